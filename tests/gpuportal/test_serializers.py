"""The compiled representation (gpuportal/web/serializers.py) gives exactly what DRF's own path gives."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers

from fleet.models import GPU
from gpuportal.web.serializers import planned_rows
from scheduling.api.serializers import JobDetailSerializer, JobSerializer, job_detail
from scheduling.models import FailureCategory, Job, JobAllocation, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def _jobs_of_every_kind(client) -> dict[str, int]:
    running = client.post("/api/jobs/", job_payload(command=long_run(999)), format="json").json()["id"]
    client.post("/api/jobs/", job_payload(gpus_per_node=8, command=long_run(999)), format="json")
    queued = client.post("/api/jobs/", job_payload(gpus_per_node=8), format="json").json()["id"]
    failed = client.post("/api/jobs/", job_payload(name="broken"), format="json").json()["id"]
    Job.objects.filter(pk=failed).update(
        status=JobStatus.FAILED, failure_category=FailureCategory.OUT_OF_MEMORY, failure_message="out of memory",
        exit_code=137,
        executor_state={"diagnosis": {"advice": "Use a smaller batch.", "node": "n1",
                                      "evidence": {"log_tail": ["CUDA out of memory"]}}})
    # An earlier attempt's GPU, released: history, not placement.
    job = Job.objects.get(pk=running)
    earlier = GPU.objects.exclude(allocations__job=job).order_by("pk").first()
    now = timezone.now()
    JobAllocation.objects.create(job=job, gpu=earlier, allocated_at=now - timedelta(hours=1), released_at=now)
    return {"running": running, "queued": queued, "failed": failed}


def test_same_output_as_drf_for_every_kind_of_job(api):
    ids = _jobs_of_every_kind(api("alice"))
    jobs = list(Job.objects.for_listing().with_placement().order_by("pk"))
    assert {job.status for job in jobs} >= {JobStatus.QUEUED, JobStatus.FAILED}
    serializer = JobSerializer(jobs, many=True)
    compiled = serializer.data
    drf = [serializers.ModelSerializer.to_representation(serializer.child, job) for job in jobs]
    assert compiled == drf
    by_id = {row["id"]: row for row in compiled}
    assert by_id[ids["queued"]]["wait_reason"]["code"] == "quota_exhausted"
    assert by_id[ids["failed"]]["failure"]["evidence"] == {"log_tail": ["CUDA out of memory"]}


def test_placement_lists_each_held_gpu_once_and_no_released_one(api):
    client = api("alice")
    ids = _jobs_of_every_kind(client)
    body = client.get(f"/api/jobs/{ids['running']}/").json()
    held = JobAllocation.objects.filter(job_id=ids["running"], released_at__isnull=True).select_related("gpu__node")
    expected: dict[str, list[int]] = {}
    for allocation in held:
        expected.setdefault(allocation.gpu.node.name, []).append(allocation.gpu.index)
    assert body["placement"] == [{"node": node, "gpus": sorted(gpus)} for node, gpus in sorted(expected.items())]
    assert sum(len(p["gpus"]) for p in body["placement"]) == 4
    listed = {row["id"]: row for row in client.get("/api/jobs/").json()["results"]}
    assert listed[ids["running"]]["placement"] == body["placement"]


def test_a_serializer_planned_once_gives_what_a_fresh_one_gives_for_each_call(api, rf, settings):
    settings.ALLOWED_HOSTS = ["testserver", "portal.example", "other.example"]
    ids = _jobs_of_every_kind(api("alice"))
    Job.objects.filter(pk=ids["running"]).update(kind="notebook", status=JobStatus.RUNNING)  # a link: the host shows
    jobs = list(Job.objects.for_listing().with_placement().order_by("pk"))
    for host in ("portal.example", "other.example", "portal.example"):
        context = {"request": rf.get("/api/jobs/", HTTP_HOST=host)}
        rows = planned_rows(JobSerializer, jobs, context)
        assert rows == JobSerializer(jobs, many=True, context=context).data
        assert {row["id"]: row for row in rows}[ids["running"]]["url"].startswith(f"http://{host}/")


def test_a_job_s_detail_by_the_planned_serializer_is_what_a_fresh_one_gives(api, rf):
    """``job_detail`` (the submission's, an action's and the job's own answer) against ``JobDetailSerializer``
    built afresh: the events, the attempts, the placement and a failure, each job after the other with one
    serializer, and a reader's request or none."""
    ids = _jobs_of_every_kind(api("alice"))
    jobs = Job.objects.for_listing().with_placement().prefetch_related("events__actor").order_by("pk")
    assert {job.status for job in jobs} >= {JobStatus.QUEUED, JobStatus.FAILED}
    request = rf.get("/api/jobs/")
    request.user = Job.objects.get(pk=ids["running"]).owner
    for context in ({}, {"request": request}, {}):
        for job in jobs:
            detail = job_detail(job, context)
            assert detail == JobDetailSerializer(job, context=context).data
            assert detail["events"] and detail["id"] == job.pk
    running = job_detail(jobs.get(pk=ids["running"]))  # admitted: an attempt, GPUs held
    assert running["attempts"] and running["placement"]
    assert job_detail(jobs.get(pk=ids["failed"]))["failure"]["category"] == FailureCategory.OUT_OF_MEMORY
