"""Jobs that wait for other jobs: ``depends_on`` on the API (and through it the form's rules), only on jobs the
submitter may see, batches whose specs name each other without a cycle, the reason that names what a job waits
for, the end of a job whose dependency can never be met, and a three-job pipeline that runs in order on the
simulated cluster."""

import time

import pytest

from governance.models import Notification, NotificationKind
from scheduling import lifecycle
from scheduling.engine.reasons import WaitReason
from scheduling.jobs import dependencies, submission
from scheduling.models import Job, JobDependency, JobEvent, JobStatus
from scheduling.passes import scheduler
from scheduling.tasks import sync_job_status
from scheduling.templates import services as job_templates
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def one_gpu(**overrides):
    return job_payload(**{"gpus_per_node": 1, "command": long_run(30), **overrides})


def submit(client, **overrides):
    response = client.post("/api/jobs/", one_gpu(**overrides), format="json")
    assert response.status_code == 201, response.content[:500]
    return response.json()


def refusal(client, **overrides) -> tuple[int, dict]:
    response = client.post("/api/jobs/", one_gpu(**overrides), format="json")
    assert response.status_code in (400, 422), response.content[:500]
    return response.status_code, response.json()


def test_a_job_waits_for_its_parent_and_its_json_and_reason_say_so(api):
    client = api("alice")
    parent = submit(client)
    assert parent["status"] in ("admitted", "dispatching", "running")
    child = submit(client, depends_on=f"afterok:{parent['id']}")
    assert child["status"] == "queued"
    assert child["depends_on"] == [{"job": parent["id"], "condition": "afterok", "satisfied": False}]
    assert child["wait_reason"]["code"] == WaitReason.DEPENDENCY
    message = child["wait_reason"]["message"]
    assert message.startswith(f"Waits for #{parent['id']} to succeed; #{parent['id']} is ")
    assert "likely done by " in message
    assert child["estimated_start"] is not None
    assert client.get(f"/api/jobs/{parent['id']}/").json()["depends_on"] == []


def test_only_jobs_the_submitter_may_see_and_well_formed_text_are_taken(api):
    alices = submit(api("alice"))
    status, body = refusal(api("bob"), tenant="nlp", project="chat-eval", depends_on=f"afterok:{alices['id']}")
    assert status == 422 and body["depends_on"] == [f"Unknown job #{alices['id']}."]
    status, body = refusal(api("alice"), depends_on="afterok:999999999999")  # past the database's integers
    assert status == 422 and body["depends_on"] == ["Unknown job #999999999999."]
    status, body = refusal(api("alice"), depends_on="afterwards:12")
    assert list(body) == ["depends_on"] and "'afterwards:12' is not a dependency" in body["depends_on"][0]
    for digits in ("afterok:²", "afterok:12_①"):  # digits to str.isdigit, not to int
        status, body = refusal(api("alice"), depends_on=digits)
        assert list(body) == ["depends_on"] and "is not a dependency" in body["depends_on"][0]
    status, body = refusal(api("alice"), depends_on="afterok:@0")
    assert "only in a batch submission" in body["depends_on"][0]
    status, body = refusal(api("alice"), depends_on=f"aftercorr:{alices['id']}")
    assert "this submission is not an array" in body["depends_on"][0]
    assert not JobDependency.objects.exists()


def test_a_batch_whose_specs_wait_for_each_other_is_refused_naming_the_cycle(api):
    client = api("alice")
    before = Job.objects.count()
    response = client.post("/api/jobs/batch/", {"jobs": [
        one_gpu(name="a", depends_on="afterok:@2"), one_gpu(name="b", depends_on="afterok:@0"),
        one_gpu(name="c", depends_on="afterany:@1")]}, format="json")
    assert response.status_code == 422, response.content[:500]
    body = response.json()
    assert set(body) == {"jobs.0.depends_on", "jobs.1.depends_on", "jobs.2.depends_on"}
    assert "jobs.0 -> jobs.2 -> jobs.1 -> jobs.0" in body["jobs.0.depends_on"][0]
    itself = client.post("/api/jobs/batch/", {"jobs": [one_gpu(depends_on="afterok:@0")]}, format="json")
    assert itself.status_code == 422 and list(itself.json()) == ["jobs.0.depends_on"]
    assert Job.objects.count() == before


def test_a_dependency_already_impossible_is_refused_at_submission(api, users):
    client = api("alice")
    parent = submit(client)
    lifecycle.transition(Job.objects.get(pk=parent["id"]), JobStatus.CANCELLED, "stopped")
    status, body = refusal(client, depends_on=f"afterok:{parent['id']}")
    assert status == 422 and body["depends_on"] == [f"afterok:{parent['id']} can never be met: #{parent['id']} was "
                                                    f"cancelled."]
    assert submit(client, depends_on=f"afternotok:{parent['id']}")["depends_on"][0]["satisfied"] is True


def test_a_dependency_that_can_no_longer_be_met_ends_the_job_and_those_after_it(api, users):
    client = api("alice")
    parent = submit(client)
    child = submit(client, depends_on=f"afterok:{parent['id']}")
    grandchild = submit(client, depends_on=f"afterany:{child['id']}")
    other = submit(client, depends_on=f"afternotok:{parent['id']}")
    lifecycle.transition(Job.objects.get(pk=parent["id"]), JobStatus.CANCELLED, "stopped by its owner")
    report = scheduler.run_pass()
    ended = Job.objects.get(pk=child["id"])
    assert ended.status == JobStatus.CANCELLED
    assert "DependencyNeverSatisfied" in ended.events.last().reason
    assert f"#{parent['id']} was cancelled" in ended.events.last().reason
    note = JobEvent.objects.get(job_id=parent["id"], kind=JobEvent.Kind.DEPENDENCY)
    assert note.data["dependent"] == child["id"] and f"Job #{child['id']} waited for this job" in note.reason
    told = Notification.objects.filter(user=users["alice"], kind=NotificationKind.JOB_CANCELLED)
    assert [f"#{child['id']} " in n.title for n in told] == [True]  # not by its owner: told (its parent's was)
    assert report.ran and Job.objects.get(pk=other["id"]).status != JobStatus.QUEUED  # afternotok: cancelled is met
    # afterany on a job this pass ended is met at the next pass: the grandchild runs then
    assert Job.objects.get(pk=grandchild["id"]).status == JobStatus.QUEUED
    assert grandchild["id"] in scheduler.run_pass().admitted_ids


def test_afternotok_ends_once_the_parent_succeeded_and_a_chain_ends_whole(api, users):
    client = api("alice")
    parent = submit(client)
    rescue = submit(client, depends_on=f"afternotok:{parent['id']}")
    after_rescue = submit(client, depends_on=f"afterok:{rescue['id']}")
    job = Job.objects.get(pk=parent["id"])
    for status in (JobStatus.DISPATCHING, JobStatus.RUNNING, JobStatus.SUCCEEDED):
        if job.status != status:
            lifecycle.transition(job, status, "simulated")
    scheduler.run_pass()
    assert Job.objects.get(pk=rescue["id"]).status == JobStatus.CANCELLED
    assert Job.objects.get(pk=after_rescue["id"]).status == JobStatus.CANCELLED  # in the same pass
    assert "succeeded" in Job.objects.get(pk=rescue["id"]).events.filter(kind=JobEvent.Kind.STATUS).last().reason


def test_the_kept_view_sees_a_parent_end_though_the_childs_row_is_unchanged(api, users):
    """Two passes in one process (the kept view on PostgreSQL): the child's row is the same in both, only its
    parent's status changed, and the second pass admits it."""
    client = api("alice")
    parent = submit(client)
    child = submit(client, depends_on=f"afterok:{parent['id']}")
    scheduler.run_pass()
    assert Job.objects.get(pk=child["id"]).queue_state.wait_reason == WaitReason.DEPENDENCY
    job = Job.objects.get(pk=parent["id"])
    for status in (JobStatus.DISPATCHING, JobStatus.RUNNING, JobStatus.SUCCEEDED):
        if job.status != status:
            lifecycle.transition(job, status, "simulated")
    report = scheduler.run_pass()
    assert child["id"] in report.admitted_ids
    assert client.get(f"/api/jobs/{child['id']}/").json()["depends_on"][0]["satisfied"] is True


def test_aftercorr_joins_each_task_to_the_same_task_of_the_other_array(api, users):
    client = api("alice")
    first = client.post("/api/jobs/", one_gpu(kind="array", array="0-3"), format="json").json()
    tasks = dict(Job.objects.filter(group_id=first["group"]).values_list("group_index", "id"))
    second = client.post("/api/jobs/", one_gpu(kind="array", array="1-2", depends_on=f"aftercorr:{first['id']}"),
                         format="json")
    assert second.status_code == 201, second.content[:500]
    edges = dict(JobDependency.objects.filter(job__group_id=second.json()["group"]).values_list(
        "job__group_index", "on_job_id"))
    assert edges == {1: tasks[1], 2: tasks[2]}
    status, body = refusal(client, kind="array", array="3-5", depends_on=f"aftercorr:{first['id']}")
    assert "it lacks 4, 5" in body["depends_on"][0]
    whole = submit(client, depends_on=f"afterok:{first['id']}")  # the first task's id: the whole array
    assert JobDependency.objects.get(job_id=whole["id"]).whole_array
    one = submit(client, depends_on=f"afterok:{first['id']}_2")  # Slurm's form for one task
    assert JobDependency.objects.get(job_id=one["id"]).on_job_id == tasks[2]
    # a task named by no edge of its own still shows the job that waits for its whole array; a job no edge
    # touches shows no chain
    assert [link.job.pk for link in dependencies.chain(Job.objects.get(pk=tasks[3]), users["alice"]).downstream] \
        == [whole["id"]]
    assert not dependencies.chain(Job.objects.get(pk=submit(client)["id"]), users["alice"])


def test_a_batch_script_dependency_is_read_and_a_bad_one_names_its_line(api, users):
    parent = submit(api("alice"))
    script = f"#!/bin/bash\n#SBATCH --gres=gpu:a100:1 --dependency=afterok:{parent['id']}\npython train.py\n"
    request = submission.validate_job_request(users["alice"], {**one_gpu(), "gpu_model": "", "gpus_per_node": "",
                                                               "command": "", "sbatch": script})
    assert [(e.condition, e.on_job.pk) for e in request.depends_on] == [("afterok", parent["id"])]
    bad = script.replace(f"afterok:{parent['id']}", "singleton")
    payload = {k: v for k, v in one_gpu().items() if k not in ("gpu_model", "gpus_per_node", "command")}
    response = api("alice").post("/api/jobs/", {**payload, "sbatch": bad}, format="json")
    assert response.status_code == 422, response.content[:500]
    body = response.json()
    assert "#SBATCH --dependency=singleton (line 2)" in body["depends_on"][0]


def test_the_chain_shows_both_ways_as_far_as_the_reader_may_see(api, users):
    client = api("alice")
    first = submit(client)
    second = submit(client, depends_on=f"afterok:{first['id']}")
    third = submit(client, depends_on=f"afterany:{second['id']}")
    middle = Job.objects.get(pk=second["id"])
    chain = dependencies.chain(middle, users["alice"])
    assert [(link.depth, link.job.pk, link.condition) for link in chain.upstream] == [(1, first["id"], "afterok")]
    assert [(link.depth, link.job.pk) for link in chain.downstream] == [(1, third["id"])]
    assert [link.job.pk for link in dependencies.chain(Job.objects.get(pk=third["id"]), users["alice"]).upstream] \
        == [second["id"], first["id"]]
    assert not dependencies.chain(middle, users["bob"])
    page = api("alice")  # the page is read as a browser would
    page.force_login(users["alice"])
    html = page.get(f"/jobs/{second['id']}/").content.decode()
    assert f"#{first['id']}" in html and f"#{third['id']}" in html


def _run_until(jobs, settings, rounds=400):
    settings.SIMULATION_TIME_SCALE = 1e-6
    for _ in range(rounds):
        time.sleep(0.01)
        sync_job_status()
        if all(Job.objects.get(pk=pk).is_terminal for pk in jobs):
            return
    raise AssertionError({pk: Job.objects.get(pk=pk).status for pk in jobs})


def test_a_pipeline_submitted_at_once_runs_in_order_on_the_simulated_cluster(api, settings):
    response = api("alice").post("/api/jobs/batch/", {"jobs": [
        one_gpu(name="preprocess", command=long_run(30)),
        one_gpu(name="train", command=long_run(60), depends_on="afterok:@0"),
        one_gpu(name="evaluate", command=long_run(10), depends_on="afterok:@1")]}, format="json")
    assert response.status_code == 201, response.content[:500]
    ids = [spec["ids"][0] for spec in response.json()["jobs"]]
    _run_until(ids, settings)
    preprocess, train, evaluate = (Job.objects.get(pk=pk) for pk in ids)
    assert [j.status for j in (preprocess, train, evaluate)] == [JobStatus.SUCCEEDED] * 3
    assert preprocess.finished_at <= train.admitted_at and train.finished_at <= evaluate.admitted_at
    waited = train.events.filter(kind=JobEvent.Kind.WAIT_REASON).first()
    assert waited.data["code"] == WaitReason.DEPENDENCY and waited.data["params"]["on_job"] == ids[0]


def test_the_form_keeps_what_was_typed_and_says_what_is_wrong(client, api, users):
    parent = submit(api("alice"))
    assert client.login(username="alice", password="demo")
    assert f'href="/jobs/new/?after={parent["id"]}"' in client.get(f"/jobs/{parent['id']}/").content.decode()
    prefilled = client.get(f"/jobs/new/?after={parent['id']}").content.decode()
    assert f'value="afterok:{parent["id"]}"' in prefilled
    form = {"project": "vision/detection", "task_type": "research", "gpu_model": "A100", "gpus_per_node": "1",
            "nodes": "1", "image": "registry.local/pytorch:2.4", "kind": "batch", "topology": "any",
            "depends_on": f"afterok:{parent['id']},afterany:999999"}
    response = client.post("/jobs/new/", form)
    html = response.content.decode()
    assert response.status_code == 400 and 'id="error-depends_on"' in html and "Unknown job #999999." in html
    assert f'value="afterok:{parent["id"]},afterany:999999"' in html
    created = client.post("/jobs/new/", {**form, "depends_on": f"afterok:{parent['id']}"})
    assert created.status_code == 302
    child = Job.objects.get(pk=int(created.url.rstrip("/").rsplit("/", 1)[1]))
    assert list(child.dependencies.values_list("on_job_id", "condition")) == [(parent["id"], "afterok")]


def test_a_job_from_a_template_waits_as_the_submission_asks(api, users):
    parent = submit(api("alice"))
    template = job_templates.create_template(
        users["admin"], tenant=None, name="evaluate", kind="batch", parameters=[],
        defaults={"task_type": "research", "gpu_model": "A100", "gpus_per_node": 1, "image": "registry.local/ev:1",
                  "command": long_run(10)})
    answer = api("alice").post(f"/api/templates/{template.pk}/submit/", {
        "project": "vision/detection", "depends_on": f"afterok:{parent['id']}"}, format="json")
    assert answer.status_code == 201, answer.content[:500]
    assert answer.json()["depends_on"] == [{"job": parent["id"], "condition": "afterok", "satisfied": False}]
    assert answer.json()["wait_reason"]["code"] == WaitReason.DEPENDENCY
