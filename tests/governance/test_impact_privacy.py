"""The impact preview hides other tenants' jobs as the queue does: tenant, size and reason, no job id."""

import pytest

from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tenants.models import Quota
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_approver_of_vision_sees_no_job_id_of_nlp(users, api, client):
    Quota.objects.filter(tenant__name="nlp", gpu_model="H100").update(guaranteed_gpus=0, limit_gpus=32)
    Quota.objects.filter(tenant__name="vision", gpu_model="H100").update(guaranteed_gpus=0, limit_gpus=16)
    nlp_jobs = [submission.submit_job(users["bob"], job_payload(
        tenant="nlp", project="llm-pretrain", gpu_model="H100", gpus_per_node=8, command=long_run(9999)))
        for _ in range(4)]  # nlp's preemptible research jobs hold every H100
    waiting = submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8))
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.QUEUED
    created = api("alice").post("/api/priority-requests/", {
        "kind": "priority", "job": waiting.pk, "task_type": "inference",
        "justification": "The demo for the review needs it."}, format="json").json()
    impact = created["impact"]
    assert impact["other_tenants_preempted"] == ["nlp"], impact
    [preempt] = impact["preempts"]
    assert preempt["job"] is None and preempt["tenant"] == "nlp" and preempt["size"] == "1 x 8 H100"
    assert preempt["reason"] and preempt["rule"]
    entries = [entry for key in ("preempts", "delays", "starts") for entry in impact[key]]
    assert all(entry["job"] is None for entry in entries if entry["tenant"] != "vision")

    nlp_ids = {job.pk for job in nlp_jobs}
    seen_by_carol = api("carol").get(f"/api/priority-requests/{created['id']}/").json()["impact"]
    assert not nlp_ids & {entry["job"] for key in ("preempts", "delays", "starts") for entry in seen_by_carol[key]}
    client.login(username="carol", password="demo")
    html = client.get(f"/requests/{created['id']}/").content.decode()
    assert "a job of tenant nlp, 1 x 8 H100" in html
    assert not any(f"job #{pk} " in html for pk in nlp_ids)
