"""Attempts: a job preempted, requeued, run again, failed on a node fault, retried and failed for good lists every
run (where, when, how it ended, its log); the header shows only the current one; the preemption is explained on
both jobs' pages as their readers may see it; the API's ``attempts`` says the same."""

import html

import pytest
from django.test import Client

from scheduling import lifecycle
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.jobs.attempts import attempts_of, current_attempt, stopped_by
from scheduling.models import ACTIVE_STATUSES, AttemptOutcome, Job, JobAttempt, JobStatus
from scheduling.passes.scheduler import run_pass
from tenants.models import Quota
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)

NODE_FAULT = {"category": "node_fault", "message": "Node dc1-r1-h100-01 stopped responding.", "node": "",
              "advice": "Retried automatically on another node.", "exit_code": None,
              "evidence": {"log_tail": ["epoch 3", "NCCL WARN connection reset"]}}
PROGRAM_ERROR = {"category": "exit_code", "message": "The program exited with code 1.", "node": "",
                 "advice": "Read the last lines of its log.", "exit_code": 1,
                 "evidence": {"log_tail": ["Traceback (most recent call last):", "ValueError: bad shape"]}}


def _run(job: Job) -> Job:
    """Move an admitted job on to running, as dispatch and the executor would."""
    job = Job.objects.select_related("task_type").get(pk=job.pk)
    if job.status == JobStatus.ADMITTED:
        lifecycle.transition(job, JobStatus.DISPATCHING, "Sent.")
    if job.status == JobStatus.DISPATCHING:
        lifecycle.transition(job, JobStatus.RUNNING, "Running.")
    return job


@pytest.fixture
def story(users):
    """alice's four research jobs borrow every H100; bob's job reclaims one node (attempt 1 preempted and requeued);
    bob's job is cancelled, the victim runs again (attempt 2), a node fault retries it, attempt 3 fails for good."""
    Quota.objects.filter(tenant__name="vision", gpu_model="H100").update(guaranteed_gpus=0, limit_gpus=32)
    borrowers = [_run(submission.submit_job(users["alice"], job_payload(
        gpu_model="H100", gpus_per_node=8, command=long_run(9999)))) for _ in range(4)]
    reclaimer = submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain",
                                                              gpu_model="H100", gpus_per_node=8))
    victim = next(Job.objects.get(pk=b.pk) for b in borrowers if Job.objects.get(pk=b.pk).retry_count)
    steps = {"requeued": _page_and_api(users, victim, reclaimer)}
    job_actions.cancel_job(users["bob"], Job.objects.get(pk=reclaimer.pk), "")
    run_pass()
    victim = _run(Job.objects.get(pk=victim.pk))
    assert victim.status == JobStatus.RUNNING
    lifecycle.fail_or_retry(victim, NODE_FAULT)
    run_pass()
    victim = _run(Job.objects.get(pk=victim.pk))
    lifecycle.fail_or_retry(victim, PROGRAM_ERROR)
    return {"victim": Job.objects.get(pk=victim.pk), "reclaimer": reclaimer, "steps": steps}


def _page_and_api(users, victim, reclaimer) -> dict:
    """What the victim's readers saw while it waited after the preemption."""
    alice, admin = Client(), Client()
    alice.force_login(users["alice"])
    admin.force_login(users["admin"])
    bob = Client()
    bob.force_login(users["bob"])
    victim = Job.objects.get(pk=victim.pk)
    return {"job": victim, "alice": alice.get(f"/jobs/{victim.pk}/").content.decode(),
            "admin": admin.get(f"/jobs/{victim.pk}/").content.decode(),
            "bob_reclaimer": bob.get(f"/jobs/{reclaimer.pk}/").content.decode(),
            "admin_reclaimer": admin.get(f"/jobs/{reclaimer.pk}/").content.decode()}


def test_a_requeued_job_shows_no_run_of_its_old_attempt(story):
    seen = story["steps"]["requeued"]
    job = seen["job"]
    assert job.status == JobStatus.QUEUED and job.retry_count == 1
    assert job.started_at is None and job.admitted_at is None  # the old run's moments are the attempt's now
    page = seen["alice"]
    assert 'id="run-time"' not in page and 'id="deadline"' not in page
    assert 'id="current-attempt"' in page and "waiting to start" in page
    assert 'id="attempt-1"' in page and 'data-outcome="preempted"' in page
    assert "Attempt 2 starts when the scheduler admits the job again." in page


def test_the_victim_and_the_preemptor_explain_the_preemption_as_each_reader_may_see_it(story):
    seen, reclaimer = story["steps"]["requeued"], story["reclaimer"]
    # alice (vision) may not see bob's (nlp) job: its tenant and the rule, no id
    assert "Preempted by a job of tenant nlp: reclaim within guarantee." in seen["alice"]
    assert f"#{reclaimer.pk}" not in seen["alice"].split('id="attempts"', 1)[1]
    # a platform admin sees every job: named, with a link
    assert f"Preempted by job #{reclaimer.pk} of tenant nlp" in seen["admin"]
    assert f'href="/jobs/{reclaimer.pk}/"' in seen["admin"]
    # the preemptor's page says what it stopped
    assert "It stopped 1 job of another tenant." in seen["bob_reclaimer"]
    assert f"This job stopped #{seen['job'].pk} of tenant vision: " in seen["admin_reclaimer"]


def test_every_attempt_is_listed_with_where_when_and_how_it_ended(story, users):
    victim = story["victim"]
    assert victim.status == JobStatus.FAILED and victim.retry_count == 2
    rows = attempts_of(victim, users["alice"])
    assert [row.number for row in rows] == [1, 2, 3]
    assert [row.outcome for row in rows] == [AttemptOutcome.PREEMPTED, AttemptOutcome.RETRIED, AttemptOutcome.FAILED]
    assert [row.requeued for row in rows] == [True, True, False]
    assert [row.failure_category for row in rows] == ["preempted", "node_fault", "exit_code"]
    for row in rows:
        assert row.ended_at is not None and row.started_at is not None and row.run_seconds is not None
        assert len(row.placement) == 1 and len(row.placement[0].gpus) == 8 and row.placement[0].node
        assert not row.current
    assert rows[1].reason.startswith("Attempt 2 failed: Node dc1-r1-h100-01 stopped responding.")
    assert rows[2].reason == "The program exited with code 1."
    # the header is the last attempt's: its start, not the first one's
    assert victim.started_at == rows[2].started_at and victim.admitted_at == rows[2].admitted_at
    stored = JobAttempt.objects.filter(job=victim).order_by("number")
    assert [a.log_tail for a in stored][1:] == [NODE_FAULT["evidence"]["log_tail"],
                                                PROGRAM_ERROR["evidence"]["log_tail"]]


def test_each_attempts_log_is_reachable_on_the_page_and_the_api(story, users, api):
    victim = story["victim"]
    page = Client()
    page.force_login(users["alice"])
    text = page.get(f"/jobs/{victim.pk}/").content.decode()
    assert all(f'href="?attempt={n}#job-log"' in text for n in (1, 2, 3))
    # attempt 1 was preempted: the simulated cluster's lines were kept as it stopped
    first = page.get(f"/jobs/{victim.pk}/?attempt=1").content.decode()
    kept = JobAttempt.objects.get(job=victim, number=1).log_tail
    assert kept and 'data-attempt="1"' in first and html.escape(kept[-1], quote=False) in first
    second = page.get(f"/jobs/{victim.pk}/?attempt=2").content.decode()
    assert "NCCL WARN connection reset" in second and 'data-attempt="2"' in second
    assert 'data-complete="true"' in second  # an earlier attempt's log does not refresh
    client = api("alice")
    body = client.get(f"/api/jobs/{victim.pk}/log/?attempt=2").json()
    assert body["attempt"] == 2 and body["lines"] == NODE_FAULT["evidence"]["log_tail"]
    assert client.get(f"/api/jobs/{victim.pk}/log/?attempt=1").json()["lines"] == JobAttempt.objects.get(
        job=victim, number=1).log_tail[-200:]
    # a cluster that deletes a stopped attempt's pods keeps nothing: the page says the log is gone
    JobAttempt.objects.filter(job=victim, number=1).update(log_tail=[])
    assert client.get(f"/api/jobs/{victim.pk}/log/?attempt=1").json()["lines"] == []
    assert "Log gone: the cluster no longer has it and the portal kept none." in page.get(
        f"/jobs/{victim.pk}/").content.decode()
    assert client.get(f"/api/jobs/{victim.pk}/log/?attempt=9").status_code == 404
    assert client.get(f"/api/jobs/{victim.pk}/log/?attempt=0").status_code == 400


def test_the_api_lists_the_attempts(story, api):
    victim, reclaimer = story["victim"], story["reclaimer"]
    body = api("alice").get(f"/api/jobs/{victim.pk}/").json()
    attempts = body["attempts"]
    assert [(a["number"], a["outcome"], a["requeued"]) for a in attempts] == [
        (1, "preempted", True), (2, "retried", True), (3, "failed", False)]
    assert attempts[0]["preempted_by"] is None and "tenant nlp" in attempts[0]["reason"]
    assert all(a["nodes"][0]["gpus"] == sorted(a["nodes"][0]["gpus"]) and a["ended_at"] for a in attempts)
    assert attempts[1]["log_url"] == f"/api/jobs/{victim.pk}/log/?attempt=2"
    admin = api("admin").get(f"/api/jobs/{victim.pk}/").json()["attempts"]
    assert admin[0]["preempted_by"] == reclaimer.pk
    # read by the preemptor's owner, the sentence says it was theirs
    assert attempts_of(victim, reclaimer.owner)[0].reason == (
        f"Preempted by your job #{reclaimer.pk}: reclaim within guarantee.")


def test_a_running_attempt_is_current_and_holds_what_the_placement_shows(users):
    job = _run(submission.submit_job(users["alice"], job_payload(command=long_run(60))))
    rows = attempts_of(job, users["alice"])
    assert len(rows) == 1 and rows[0].current and rows[0].outcome == "" and rows[0].outcome_label == "Running"
    held = {(gpu.node.name, gpu.index) for gpu in job.held_gpus()}
    assert {(p.node, i) for p in rows[0].placement for i in p.gpus} == held
    assert job.status in ACTIVE_STATUSES and stopped_by(job, users["alice"]).sentence == ""


def test_the_backfill_reads_from_the_timeline_what_lifecycle_wrote(story):
    from importlib import import_module

    from django.apps import apps

    backfill = import_module("scheduling.migrations.0015_backfill_attempts").backfill
    fields = ("job_id", "number", "admitted_at", "started_at", "ended_at", "outcome", "failure_category",
              "end_event_id", "log_tail")
    JobAttempt.objects.filter(outcome=AttemptOutcome.PREEMPTED).update(log_tail=[])  # read then, not in the timeline
    written = list(JobAttempt.objects.order_by("job_id", "number").values_list(*fields))
    assert len(written) >= 3
    JobAttempt.objects.all().delete()
    backfill(apps, None)
    assert list(JobAttempt.objects.order_by("job_id", "number").values_list(*fields)) == written


def test_the_api_timeline_names_another_tenants_job_only_to_who_may_see_it(story, api):
    victim, reclaimer = story["victim"], story["reclaimer"]
    named = ("preemptor", "preemptor_owner", "victim", "victim_owner")

    def kept(client, job):
        events = client.get(f"/api/jobs/{job.pk}/").json()["events"]
        return [e["data"] for e in events if {"preemptor_tenant", "victim_tenant"} & set(e["data"])]

    # alice (vision) reads her job: bob's (nlp) job and bob are not named, the tenant and the rule are
    alices = kept(api("alice"), victim)
    assert alices and all(not set(named) & set(data) for data in alices)
    assert all(data["preemptor_tenant"] == "nlp" and data["rule"] == "reclaim within guarantee" for data in alices)
    # bob reads his job: alice's job is not named either
    bobs = kept(api("bob"), reclaimer)
    assert bobs and all(not set(named) & set(data) for data in bobs) and bobs[0]["victim_tenant"] == "vision"
    # a platform admin sees both jobs: every id
    assert all(data["preemptor"] == reclaimer.pk and data["preemptor_owner"] == reclaimer.owner_id
               for data in kept(api("admin"), victim))
    assert kept(api("admin"), reclaimer)[0]["victim"] == victim.pk


def test_without_a_reader_the_serializer_names_no_other_job(story):
    from scheduling.api.serializers import JobDetailSerializer

    victim = Job.objects.get(pk=story["victim"].pk)
    body = JobDetailSerializer(victim).data  # no request in its context: no reader
    assert [a["number"] for a in body["attempts"]] == [1, 2, 3] and body["attempts"][0]["preempted_by"] is None
    assert "tenant nlp" in body["attempts"][0]["reason"]
    assert all("preemptor" not in event["data"] for event in body["events"])
    assert any(event["data"].get("preemptor_tenant") == "nlp" for event in body["events"])


def test_the_current_attempt_comes_from_the_attempts_not_the_retry_count(users, api):
    """Rows written back from an older timeline count admissions, which may pass the retry count: the latest row
    is the one the cluster's log belongs to, an earlier one's log is what the portal kept."""
    job = _run(submission.submit_job(users["alice"], job_payload(command=long_run(600))))
    assert job.retry_count == 0
    attempt = JobAttempt.objects.get(job=job)
    JobAttempt.objects.filter(pk=attempt.pk).update(number=2)
    JobAttempt.objects.create(job=job, number=1, admitted_at=attempt.admitted_at, started_at=attempt.admitted_at,
                              ended_at=attempt.admitted_at, outcome=AttemptOutcome.RETRIED, log_tail=["kept line"])
    assert current_attempt(job) == 2
    rows = attempts_of(job, users["alice"])
    assert [(row.number, row.current, row.has_log) for row in rows] == [(1, False, True), (2, True, True)]
    client = api("alice")
    assert client.get(f"/api/jobs/{job.pk}/log/?attempt=1").json()["lines"] == ["kept line"]
    assert "kept line" not in client.get(f"/api/jobs/{job.pk}/log/?attempt=2").json()["lines"]
    page = Client()
    page.force_login(users["alice"])
    assert "kept line" in page.get(f"/jobs/{job.pk}/?attempt=1").content.decode()
    # back in the queue, no attempt is the cluster's: each one's log is what was kept
    lifecycle.transition(job, JobStatus.QUEUED, "Requeued.", retry_count=1, cluster=None, executor_state={})
    assert current_attempt(Job.objects.get(pk=job.pk)) is None


def test_the_backfill_clears_the_run_times_of_a_job_that_waits_again(users):
    from importlib import import_module

    from django.apps import apps
    from django.utils import timezone

    backfill = import_module("scheduling.migrations.0015_backfill_attempts").backfill
    waiting = submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8,
                                                              command=long_run(600)))
    running = _run(submission.submit_job(users["alice"], job_payload(command=long_run(600))))
    then = timezone.now()
    Job.objects.filter(pk=waiting.pk).update(status=JobStatus.QUEUED, admitted_at=then, started_at=then)
    JobAttempt.objects.all().delete()
    backfill(apps, None)
    waiting, running = Job.objects.get(pk=waiting.pk), Job.objects.get(pk=running.pk)
    assert waiting.admitted_at is None and waiting.started_at is None
    assert running.admitted_at is not None and running.started_at is not None  # a run still under way keeps them
