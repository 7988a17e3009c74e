"""A job's JSON names where it runs: its cluster and what the cluster calls it, null until it has them."""

import pytest

from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_cluster_and_external_id_are_null_while_waiting_and_named_once_placed(api):
    client = api("alice")
    placed = client.post("/api/jobs/", job_payload(gpus_per_node=8, command=long_run(999)), format="json").json()
    client.post("/api/jobs/", job_payload(gpus_per_node=8, command=long_run(999)), format="json")
    waiting = client.post("/api/jobs/", job_payload(gpus_per_node=8), format="json").json()  # beyond the quota

    assert Job.objects.get(pk=waiting["id"]).status == JobStatus.QUEUED
    body = client.get(f"/api/jobs/{waiting['id']}/").json()
    assert body["cluster"] is None and body["external_id"] is None

    job = Job.objects.select_related("cluster").get(pk=placed["id"])
    assert job.cluster is not None
    body = client.get(f"/api/jobs/{job.pk}/").json()
    assert body["cluster"] == job.cluster.name
    assert body["external_id"] is None  # the simulated executor gives its jobs no name of their own

    Job.objects.filter(pk=job.pk).update(executor_state={"slurm_job_id": 4242})  # Slurm's id is a number
    assert client.get(f"/api/jobs/{job.pk}/").json()["external_id"] == "4242"
    Job.objects.filter(pk=job.pk).update(executor_state={"namespace": "gp-vision", "object": "job-7-a1"})
    listed = {row["id"]: row for row in client.get("/api/jobs/").json()["results"]}
    assert listed[job.pk]["external_id"] == "job-7-a1" and listed[job.pk]["cluster"] == job.cluster.name
    assert listed[waiting["id"]]["cluster"] is None


def test_the_schema_documents_both_keys(api):
    schema = api("alice").get("/api/schema/?format=json").json()
    job = schema["components"]["schemas"]["Job"]["properties"]
    for key in ("cluster", "external_id"):
        assert job[key]["nullable"] is True and job[key]["readOnly"] is True, job[key]
        assert "null until" in job[key]["description"], key
