"""No silent self-harm: before a job that would stop its submitter's own running jobs is stored, the form names
them and offers to spare them; the API takes ``spare_own_jobs``; a priority request warns the same way."""

import pytest

from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from scheduling.passes import preview
from tenants.models import Quota
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)

FORM = {"project": "vision/detection", "task_type": "training", "gpu_model": "A100", "gpus_per_node": "8",
        "nodes": "1", "image": "registry.local/x:1", "command": long_run(600), "max_runtime_minutes": "120"}


@pytest.fixture
def full_a100(users):
    """Every A100 busy: alice's evaluation job (priority 30) and three of bob's research jobs (50). A training
    job of alice's (80, not preemptible) would stop the cheapest: her own."""
    Quota.objects.filter(tenant__name="nlp", gpu_model="A100").update(guaranteed_gpus=8, limit_gpus=24)
    own = submission.submit_job(users["alice"], job_payload(task_type="evaluation", gpus_per_node=8,
                                                            command=long_run(9999), max_runtime_minutes=240))
    others = [submission.submit_job(users["bob"], job_payload(
        tenant="nlp", project="llm-pretrain", gpus_per_node=8, command=long_run(9999))) for _ in range(3)]
    assert all(Job.objects.get(pk=j.pk).status not in (JobStatus.QUEUED, JobStatus.PENDING) for j in [own, *others])
    return {"own": own, "others": others}


def _login(client, username):
    assert client.login(username=username, password="demo")
    return client


def test_the_form_names_own_jobs_it_would_stop_and_stores_nothing_yet(client, users, full_a100):
    own = full_a100["own"]
    response = _login(client, "alice").post("/jobs/new/", FORM)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="own-preemptions"' in html
    assert f'href="/jobs/{own.pk}/"' in html and own.name in html
    assert 'name="own_jobs" value="spare"' in html and 'name="own_jobs" value="preempt"' in html
    assert "registry.local/x:1" in html  # what was typed comes back with the question
    assert not Job.objects.filter(task_type__code="training").exists()


def test_sparing_own_jobs_stores_the_choice_and_the_pass_stops_someone_else(client, users, full_a100):
    response = _login(client, "alice").post("/jobs/new/", FORM | {"own_jobs": "spare"})
    assert response.status_code == 302
    job = Job.objects.get(task_type__code="training")
    assert job.spare_own_jobs is True
    own = Job.objects.get(pk=full_a100["own"].pk)
    assert own.status not in (JobStatus.PREEMPTED, JobStatus.QUEUED)  # her own job still runs
    stopped = Job.objects.filter(pk__in=[j.pk for j in full_a100["others"]], retry_count__gt=0)
    assert stopped.count() == 1  # one of bob's lower-priority jobs made room instead


def test_confirming_submits_and_the_own_job_is_preempted(client, users, full_a100):
    response = _login(client, "alice").post("/jobs/new/", FORM | {"own_jobs": "preempt"})
    assert response.status_code == 302
    own = Job.objects.get(pk=full_a100["own"].pk)
    assert own.retry_count == 1 and own.events.filter(to_status=JobStatus.PREEMPTED).exists()


def test_a_job_that_stops_nobody_of_hers_is_submitted_at_once(client, users):
    response = _login(client, "alice").post("/jobs/new/", FORM | {"task_type": "research", "gpus_per_node": "2"})
    assert response.status_code == 302


def test_own_preemptions_come_from_the_next_pass_and_the_choice(users, full_a100):
    request = submission.validate_job_request(users["alice"], {**FORM, "tenant": "vision"})
    assert [j.pk for j in preview.own_preemptions(users["alice"], request)] == [full_a100["own"].pk]
    spared = submission.validate_job_request(users["alice"], {**FORM, "spare_own_jobs": True})
    assert spared.spare_own_jobs and preview.own_preemptions(users["alice"], spared) == []
    assert preview.own_preemptions(users["bob"], request) == []  # bob's jobs are not the ones it stops


def test_the_api_takes_spare_own_jobs(api, users, full_a100):
    created = api("alice").post("/api/jobs/", {**job_payload(task_type="training", gpus_per_node=8,
                                                             command=long_run(600)), "spare_own_jobs": True},
                                format="json")
    assert created.status_code == 201, created.content
    assert Job.objects.get(pk=created.json()["id"]).spare_own_jobs is True
    assert Job.objects.get(pk=full_a100["own"].pk).retry_count == 0
    cloned = api("alice").post(f"/api/jobs/{created.json()['id']}/clone/", format="json")
    assert cloned.status_code == 201, cloned.content
    assert Job.objects.get(pk=cloned.json()["id"]).spare_own_jobs is True  # the choice is cloned


def test_a_priority_request_warns_before_it_is_sent(client, users, full_a100):
    waiting = submission.submit_job(users["alice"], job_payload(task_type="evaluation", gpus_per_node=8,
                                                                command=long_run(60), max_runtime_minutes=60))
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.QUEUED
    form = {"kind": "priority", "job": str(waiting.pk), "task_type": "training",
            "justification": "The review needs this result today."}
    html = _login(client, "alice").post("/requests/new/", form).content.decode()
    assert 'id="own-preemptions"' in html and f'href="/jobs/{full_a100["own"].pk}/"' in html
    assert not waiting.requests.exists()
    sent = client.post("/requests/new/", form | {"own_jobs": "preempt"})
    assert sent.status_code == 302 and waiting.requests.count() == 1
