"""Bulk submission: an array of up to 10,000 tasks and a batch of up to 1,000 jobs (``POST /api/jobs/batch/``)
are stored with a number of queries that does not grow with the number of jobs, each job with its event, in
one transaction followed by one pass; a batch is all or nothing."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.models import PriorityRequest
from scheduling import triggers
from scheduling.jobs.limits import MAX_ARRAY_TASKS, MAX_BATCH_JOBS, MAX_BATCH_TOTAL
from scheduling.models import Job, JobEvent, JobGroup, JobStatus, TaskType
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def passes(monkeypatch):
    """The passes asked for, counted instead of run (a pass over thousands of queued jobs is the pass's own
    benchmark, not this test's)."""
    asked = []
    monkeypatch.setattr(triggers, "send", lambda name, *args: asked.append(name) or True)
    return asked


def one_gpu(**overrides):
    return job_payload(**{"gpus_per_node": 1, "task_type": "test", "command": "sim:minutes=5", **overrides})


def queries(client, path: str, body: dict) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.post(path, body, format="json")
    assert response.status_code == 201, response.content[:500]
    return len(captured)


def test_queries_do_not_grow_with_the_number_of_jobs(api, passes):
    """From 50 rows on, jobs and events go in by COPY (one statement each, whatever the number of rows; Django's
    capture does not list them); fewer go in by one INSERT each table."""
    client = api("alice")
    client.post("/api/jobs/batch/", {"jobs": [one_gpu()]}, format="json")  # the first call reads what is cached
    assert (queries(client, "/api/jobs/", one_gpu(kind="array", array="0-49"))
            == queries(client, "/api/jobs/", one_gpu(kind="array", array="0-199")))
    assert (queries(client, "/api/jobs/batch/", {"jobs": [one_gpu(name=f"few-{i}") for i in range(50)]})
            == queries(client, "/api/jobs/batch/", {"jobs": [one_gpu(name=f"many-{i}") for i in range(120)]}))
    assert len(passes) == 5  # one pass asked for per call, not per job


def test_the_largest_array_and_batch_are_stored_whole(api, passes):
    client = api("alice")
    response = client.post("/api/jobs/", one_gpu(kind="array", array=f"0-{MAX_ARRAY_TASKS - 1}", name="sweep"),
                           format="json")
    assert response.status_code == 201, response.content[:500]
    group = JobGroup.objects.get(pk=response.json()["group"])
    assert group.size == MAX_ARRAY_TASKS and group.members.filter(status=JobStatus.QUEUED).count() == MAX_ARRAY_TASKS
    assert set(group.members.values_list("group_index", flat=True)) == set(range(MAX_ARRAY_TASKS))
    assert group.members.filter(name="sweep[9999]").exists()
    response = client.post("/api/jobs/batch/", {"jobs": [one_gpu(name=f"b-{i}") for i in range(MAX_BATCH_JOBS)]},
                           format="json")
    assert response.status_code == 201, response.content[:500]
    body = response.json()
    assert body["created"] == MAX_BATCH_JOBS and [len(spec["ids"]) for spec in body["jobs"]] == [1] * MAX_BATCH_JOBS
    ids = [spec["ids"][0] for spec in body["jobs"]]
    assert list(Job.objects.filter(pk__in=ids).order_by("pk").values_list("name", flat=True)) == [
        f"b-{i}" for i in range(MAX_BATCH_JOBS)]
    # every job has its first event, with the reason, as one submitted alone has
    events = JobEvent.objects.filter(job__owner__username="alice", from_status="", to_status=JobStatus.QUEUED)
    assert events.count() == MAX_ARRAY_TASKS + MAX_BATCH_JOBS
    assert events.filter(reason="Submitted by alice; task type test needs no approval, queued.").count() == \
        events.count()
    assert len(passes) == 2


def test_a_batch_is_all_or_nothing_naming_the_index_and_the_field(api, passes):
    client = api("alice")
    client.post("/api/jobs/", one_gpu(), format="json")
    before = Job.objects.count()
    schema = client.post("/api/jobs/batch/", {"jobs": [one_gpu(), one_gpu(gpus_per_node=0)]}, format="json")
    assert schema.status_code == 400 and list(schema.json()) == ["jobs.1.gpus_per_node"], schema.json()
    rule = client.post("/api/jobs/batch/", {"jobs": [one_gpu(), one_gpu(), one_gpu(project="nowhere"),
                                                     one_gpu(gpu_model="H100", gpus_per_node=8, nodes=3)]},
                       format="json")
    assert rule.status_code == 422 and set(rule.json()) == {"jobs.2.project", "jobs.3.nodes"}, rule.json()
    too_many = client.post("/api/jobs/batch/", {"jobs": [one_gpu()] * (MAX_BATCH_JOBS + 1)}, format="json")
    assert too_many.status_code == 400 and list(too_many.json()) == ["jobs"]
    assert client.post("/api/jobs/batch/", {"jobs": []}, format="json").status_code == 400
    for body in ({"jobs": one_gpu()}, {"jobs": ["a job"]}, ["not", "an object"]):
        assert client.post("/api/jobs/batch/", body, format="json").status_code == 400, body
    foreign = client.post("/api/jobs/batch/", {"jobs": [one_gpu(), one_gpu(tenant="nlp", project="chat-eval")]},
                          format="json")  # another tenant (unknown to alice): refused as alone
    assert foreign.status_code == 422 and list(foreign.json()) == ["jobs.1.tenant"], foreign.json()
    sweeps = [one_gpu(kind="array", array=f"0-{MAX_ARRAY_TASKS // 4 - 1}")] * 5
    total = client.post("/api/jobs/batch/", {"jobs": sweeps}, format="json")  # each array allowed, not all five
    assert total.status_code == 422 and list(total.json()) == ["jobs"], total.json()
    assert f"at most {MAX_BATCH_TOTAL} jobs in all" in total.json()["jobs"][0]
    too_large = client.post("/api/jobs/", one_gpu(kind="array", array=f"0-{MAX_ARRAY_TASKS}"), format="json")
    assert too_large.status_code == 422 and f"at most {MAX_ARRAY_TASKS} tasks" in too_large.json()["array"][0]
    assert Job.objects.count() == before and len(passes) == 1


def test_the_pass_admits_a_batch_and_approval_stays_the_rule(api):
    TaskType.objects.filter(code="evaluation").update(requires_approval=True)
    response = api("alice").post("/api/jobs/batch/", {"jobs": [
        one_gpu(name="first"), one_gpu(name="sweep", kind="array", array="0-3"),
        one_gpu(name="gated", task_type="evaluation")]}, format="json")
    assert response.status_code == 201, response.content[:500]
    first, sweep, gated = response.json()["jobs"]
    assert len(sweep["ids"]) == 4 and sweep["group"] is not None and first["group"] is None
    admitted = Job.objects.filter(pk__in=first["ids"] + sweep["ids"]).exclude(status=JobStatus.QUEUED)
    assert admitted.count() == 5  # the one pass that followed the batch admitted all of them
    assert Job.objects.get(pk=gated["ids"][0]).status == JobStatus.PENDING
    assert PriorityRequest.objects.filter(job_id=gated["ids"][0]).count() == 1
