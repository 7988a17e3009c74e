"""The request pages tell the truth: the preview links the jobs its reader may see (owner and size), a
decided request shows its decision instead of a preview, the form offers GPU models as choices and says
which fields each kind uses, and a comment too long is refused with what was typed kept."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import PriorityRequest, RequestState
from governance.services import MAX_COMMENT
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tenants.models import Quota
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def _burst_request(users, api):
    """alice's second 8-GPU job waits for vision's H100 limit (8, all in use); she asks for a burst of 8."""
    Quota.objects.filter(tenant__name="vision", gpu_model="H100").update(guaranteed_gpus=8, limit_gpus=8)
    submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8, command=long_run(9999)))
    waiting = submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8, name="big-eval"))
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.QUEUED
    now = timezone.now()
    created = api("alice").post("/api/priority-requests/", {
        "kind": "burst", "tenant": "vision", "gpu_model": "H100", "gpus": 8, "start": now.isoformat(),
        "end": (now + timedelta(days=1)).isoformat(), "justification": "The demo for the review needs it."},
        format="json")
    assert created.status_code == 201, created.content
    return waiting, created.json()["id"]


def test_the_preview_links_own_jobs_and_a_decided_request_shows_the_decision(users, api, client):
    waiting, request_id = _burst_request(users, api)
    client.login(username="carol", password="demo")  # vision's approver reads it (a platform approver decides)
    html = client.get(f"/requests/{request_id}/").content.decode()
    starts = html[html.index('class="impact-starts"'):]
    starts = starts[:starts.index("</ul>")]
    assert f'href="/jobs/{waiting.pk}/">#{waiting.pk} big-eval</a> — alice, 1 x 8 H100' in starts
    client.logout()

    client.login(username="admin", password="demo")
    too_long = "x" * (MAX_COMMENT + 1)
    refused = client.post(f"/requests/{request_id}/decide/", {"decision": "approve", "comment": too_long})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert f"At most {MAX_COMMENT} characters (got {MAX_COMMENT + 1})" in page and too_long in page
    assert PriorityRequest.objects.get(pk=request_id).state == RequestState.PENDING

    decided = client.post(f"/requests/{request_id}/decide/", {"decision": "approve", "comment": "For the review."})
    assert decided.status_code == 302
    html = client.get(f"/requests/{request_id}/").content.decode()
    assert 'id="decision"' in html and "For the review." in html
    assert 'id="impact"' not in html and "Impact if approved now" not in html


def test_the_form_offers_gpu_models_and_names_each_fields_kinds(users, client):
    client.login(username="alice", password="demo")
    html = client.get("/requests/new/").content.decode()
    assert '<select name="gpu_model"' in html
    for model in ("A100", "H100", "L40S"):
        assert f'<option value="{model}">{model} (' in html
    assert 'data-kinds="priority runtime_extension"' in html  # the job id
    assert 'data-kinds="burst reservation quota"' in html  # tenant and GPU model
    assert "ISO 8601, in your time zone (" in html

    typed = {"kind": "burst", "justification": "A deadline on Friday for the paper.", "tenant": "vision",
             "gpu_model": "Z999", "gpus": "4", "start": "2026-12-01T09:00", "end": "2026-12-02T09:00"}
    refused = client.post("/requests/new/", typed)
    assert refused.status_code == 400
    page = refused.content.decode()
    assert 'id="error-gpu_model"' in page and "Z999" in page
    assert typed["justification"] in page and 'value="2026-12-01T09:00"' in page
    assert not PriorityRequest.objects.exists()
