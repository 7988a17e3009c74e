"""The REST contract: token auth, jobs, cancel, quotas, errors, isolation."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_token_endpoint_and_auth_required(api, users):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/jobs/").status_code == 401
    bad = APIClient().post("/api/auth/token/", {"username": "alice", "password": "nope"}, format="json")
    assert bad.status_code == 400
    assert api("alice").get("/api/jobs/").status_code == 200


def test_submit_returns_201_with_the_contract_fields(api):
    response = api("alice").post("/api/jobs/", job_payload(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    for field in ("id", "tenant", "project", "name", "task_type", "gpu_model", "gpus_per_node", "nodes", "status",
                  "queue_position", "wait_reason", "estimated_start", "failure", "max_runtime_minutes", "image",
                  "command"):
        assert field in body, field
    assert body["tenant"] == "vision" and body["project"] == "detection" and body["task_type"] == "research"
    assert body["nodes"] == 1 and body["gpus_per_node"] == 4
    # admitted by the pass the submission triggered, and dispatched
    assert body["status"] in ("admitted", "dispatching", "running")
    assert body["queue_position"] is None and body["wait_reason"] is None
    assert [e["to_status"] for e in body["events"]][:3] == ["queued", "admitted", "dispatching"]


def test_submit_accepts_what_a_job_json_shows(api):
    first = api("alice").post("/api/jobs/", job_payload(), format="json").json()
    again = {k: first[k] for k in ("tenant", "project", "task_type", "gpu_model", "gpus_per_node", "nodes",
                                   "image", "command", "max_runtime_minutes")}
    assert api("alice").post("/api/jobs/", again, format="json").status_code == 201
    only_project = {**again, "tenant": None}
    assert api("alice").post("/api/jobs/", only_project, format="json").status_code == 201


def test_waiting_job_shows_position_and_reason(api):
    client = api("alice")
    for _ in range(2):
        client.post("/api/jobs/", job_payload(gpus_per_node=8, command=long_run(999)), format="json")
    body = client.post("/api/jobs/", job_payload(gpus_per_node=8), format="json").json()
    assert body["status"] == "queued"
    assert body["queue_position"] == 1
    assert body["wait_reason"]["code"] == "quota_exhausted"
    assert "16 of its 16 A100" in body["wait_reason"]["message"]


@pytest.mark.parametrize(("overrides", "field", "phrase", "status"), [
    ({"gpus_per_node": 0}, "gpus_per_node", "at least 1", 400),
    ({"gpus_per_node": -2}, "gpus_per_node", "at least 1", 400),
    ({"gpus_per_node": "many"}, "gpus_per_node", "whole number", 400),
    ({"nodes": 0}, "nodes", "at least 1", 400),
    ({"gpu_model": "V100"}, "gpu_model", "Unknown GPU model 'V100'", 400),
    ({"image": ""}, "image", "Image is required", 400),
    ({"image": "   "}, "image", "Image is required", 400),
    ({"task_type": "party"}, "task_type", "Unknown task type", 400),
    ({"max_runtime_minutes": 0}, "max_runtime_minutes", "at least 1", 400),
    ({"max_runtime_minutes": 10**6}, "max_runtime_minutes", "at most 10080", 400),
    # Well-formed, refused by what the fleet and the caller's tenants are (422, gpuportal/web/api.py).
    ({"gpus_per_node": 16}, "gpus_per_node", "more than any A100 node has (at most 8)", 422),
    ({"nodes": 9}, "nodes", "more than the 4 A100 nodes", 422),
    ({"project": "llm-pretrain"}, "project", "Unknown project", 422),
    ({"tenant": "nlp", "project": "llm-pretrain"}, "tenant", "Unknown tenant", 422),
])
def test_bad_input_is_400_naming_the_field_and_stores_nothing(api, overrides, field, phrase, status):
    before = Job.objects.count()
    response = api("alice").post("/api/jobs/", job_payload(**overrides), format="json")
    assert response.status_code == status, response.content
    errors = response.json()
    assert field in errors, errors
    assert phrase in " ".join(errors[field] if isinstance(errors[field], list) else [errors[field]])
    assert Job.objects.count() == before


def test_list_is_paginated_and_honours_page_size_up_to_500(api, users):
    for _ in range(3):
        api("alice").post("/api/jobs/", job_payload(gpus_per_node=1), format="json")
    page = api("alice").get("/api/jobs/?page_size=2").json()
    assert set(page) == {"count", "next", "previous", "results"}
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    big = api("alice").get("/api/jobs/?page_size=100000").json()
    assert len(big["results"]) == 3
    from gpuportal.web.api import StandardPagination

    assert StandardPagination.max_page_size == 500


def test_the_list_counts_the_jobs_chosen_without_joining_the_names_it_shows(api, users):
    """The count (``gpuportal.web.api.CountedBy``) is the jobs the filters choose, whatever names the rows read:
    with and without a filter that joins, page by page."""
    client = api("alice")
    for size in (1, 1, 2):
        client.post("/api/jobs/", job_payload(gpus_per_node=size), format="json")
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/api/jobs/?page_size=2").json()
    counts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT COUNT(*) AS "__count" FROM '
                                                                                  '"scheduling_job"')]
    assert len(counts) == 1 and "JOIN" not in counts[0]
    assert page["count"] == Job.objects.count() == 3
    second = client.get(page["next"]).json()
    assert {row["id"] for row in page["results"] + second["results"]} == set(Job.objects.values_list("pk", flat=True))
    assert client.get("/api/jobs/?tenant=vision&page_size=1").json()["count"] == 3
    assert client.get("/api/jobs/?tenant=nlp").json()["count"] == 0


def test_isolation_other_tenant_job_is_404_everywhere(api, users):
    vision_job = submission.submit_job(users["alice"], job_payload())
    bob = api("bob")
    assert bob.get(f"/api/jobs/{vision_job.pk}/").status_code == 404
    assert bob.post(f"/api/jobs/{vision_job.pk}/cancel/", {}, format="json").status_code == 404
    assert vision_job.pk not in [j["id"] for j in bob.get("/api/jobs/?page_size=500").json()["results"]]
    assert bob.get("/api/jobs/?tenant=vision").json()["count"] == 0
    assert Job.objects.get(pk=vision_job.pk).status != JobStatus.CANCELLED


def test_manager_sees_all_read_only_and_admin_may_cancel(api, users):
    job = submission.submit_job(users["alice"], job_payload())
    dave = api("dave")
    assert dave.get(f"/api/jobs/{job.pk}/").status_code == 200
    assert dave.post(f"/api/jobs/{job.pk}/cancel/", {}, format="json").status_code == 403
    assert dave.post("/api/jobs/", job_payload(), format="json").status_code == 422
    response = api("admin").post(f"/api/jobs/{job.pk}/cancel/", {"reason": "maintenance"}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert "Cancelled by admin. maintenance" in response.json()["events"][-1]["reason"]


def test_owner_cancels_and_gpus_are_released(api):
    client = api("alice")
    job = client.post("/api/jobs/", job_payload(), format="json").json()
    response = client.post(f"/api/jobs/{job['id']}/cancel/", {}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert not Job.objects.get(pk=job["id"]).allocations.filter(released_at__isnull=True).exists()
    again = client.post(f"/api/jobs/{job['id']}/cancel/", {}, format="json")
    assert again.status_code == 422 and "status" in again.json()


def test_quotas_show_guaranteed_limit_and_used(api):
    api("alice").post("/api/jobs/", job_payload(gpus_per_node=8), format="json")
    rows = api("alice").get("/api/quotas/").json()["results"]
    assert {r["tenant"] for r in rows} == {"vision"}
    a100 = next(r for r in rows if r["gpu_model"] == "A100")
    assert (a100["guaranteed"], a100["limit"], a100["used"]) == (16, 16, 8)
    nlp_rows = api("bob").get("/api/quotas/").json()["results"]
    assert {r["tenant"] for r in nlp_rows} == {"nlp"}


def test_schema_and_docs_are_served_without_a_cdn(api, client):
    schema = api("alice").get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/jobs/{id}/cancel/" in schema.content
    docs = api("alice").get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower() and "https://" not in html
