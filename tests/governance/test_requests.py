"""Requests end to end: ask -> decide -> effect on scheduling; who may decide; expiry; the audit trail."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditAction, AuditRecord
from governance import services as governance
from governance.models import Notification, PriorityRequest, RequestState
from governance.tasks import expire_requests
from scheduling.jobs import submission
from scheduling.models import Job, JobEvent, JobStatus, Reservation, TaskType
from tenants.models import Quota, QuotaBurst
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def fresh(job):
    return Job.objects.select_related("queue_state").get(pk=job.pk)


def fill_vision_a100(users):
    """Vision uses its whole A100 limit (16); a third job waits for quota."""
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(9999)))
    return submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="waits"))


def window(hours=4):
    now = timezone.now()
    return (now - timedelta(minutes=1)).isoformat(), (now + timedelta(hours=hours)).isoformat()


def test_priority_request_approved_by_a_tenant_approver_moves_the_job_up(users, api):
    first = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(9999)))
    submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(9999)))
    ahead = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="ahead"))
    behind = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="behind"))
    assert fresh(behind).tenant_queue_position > fresh(ahead).tenant_queue_position
    response = api("alice").post("/api/priority-requests/", {
        "kind": "priority", "job": behind.pk, "task_type": "training",
        "justification": "Paper deadline on Friday; the ablation must finish first."}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "pending" and body["scope"] == "tenant" and body["decided_by"] is None
    assert body["impact"]["other_tenants_preempted"] == []
    decided = api("carol").post(f"/api/priority-requests/{body['id']}/approve/", {"comment": "Go ahead."},
                                format="json")
    assert decided.status_code == 200, decided.content
    assert decided.json()["state"] == "approved" and decided.json()["decided_by"] == "carol"
    assert decided.json()["comment"] == "Go ahead."
    job = fresh(behind)
    assert job.task_type.code == "training" and job.priority == 80
    assert job.tenant_queue_position < fresh(ahead).tenant_queue_position  # the effect on scheduling
    assert job.events.filter(kind=JobEvent.Kind.APPROVAL).count() == 1
    [record] = AuditRecord.objects.filter(action=AuditAction.REQUEST_APPROVE)
    assert record.actor == users["carol"] and record.after["priority"] == 80
    assert first.pk != job.pk
    seen = api("alice").get(f"/api/priority-requests/{body['id']}/").json()
    assert (seen["state"], seen["comment"]) == ("approved", "Go ahead.")
    assert Notification.objects.filter(user=users["alice"], kind="request_decided").count() == 1


def test_nobody_approves_their_own_request(users, api):
    job = submission.submit_job(users["carol"], job_payload(project="segmentation", gpus_per_node=2))
    created = api("carol").post("/api/priority-requests/", {
        "kind": "runtime_extension", "job": job.pk, "max_runtime_minutes": 600,
        "justification": "The run needs ten hours, not two."}, format="json").json()
    refused = api("carol").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json")
    assert refused.status_code == 403 and "own request" in refused.json()["detail"]
    assert PriorityRequest.objects.get(pk=created["id"]).state == RequestState.PENDING
    admin = api("admin").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json")
    assert admin.status_code == 200
    assert Job.objects.get(pk=job.pk).max_runtime_minutes == 600


def test_nobody_decides_a_request_about_their_own_job_asked_by_someone_else(users, api):
    job = submission.submit_job(users["carol"], job_payload(project="segmentation", gpus_per_node=2))
    created = api("admin").post("/api/priority-requests/", {
        "kind": "runtime_extension", "job": job.pk, "max_runtime_minutes": 600,
        "justification": "Carol's run needs ten hours."}, format="json")
    assert created.status_code == 201, created.content
    refused = api("carol").post(f"/api/priority-requests/{created.json()['id']}/approve/", {}, format="json")
    assert refused.status_code == 403 and "their own job" in refused.json()["detail"]
    assert PriorityRequest.objects.get(pk=created.json()["id"]).state == RequestState.PENDING
    assert Job.objects.get(pk=job.pk).max_runtime_minutes != 600


def test_burst_needs_a_platform_approver_and_then_lets_the_job_start(users, api):
    waiting = fill_vision_a100(users)
    assert fresh(waiting).wait_reason == "quota_exhausted"
    start, end = window()
    created = api("alice").post("/api/priority-requests/", {
        "kind": "burst", "tenant": "vision", "gpu_model": "A100", "gpus": 8, "start": start, "end": end,
        "justification": "Four hours of extra A100 for the camera-ready experiments."}, format="json").json()
    assert created["scope"] == "platform"
    refused = api("carol").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json")
    assert refused.status_code == 403 and "platform approver" in refused.json()["detail"]
    assert api("admin").post(f"/api/priority-requests/{created['id']}/approve/", {"comment": "ok"},
                             format="json").status_code == 200
    assert QuotaBurst.objects.get(tenant__name="vision").extra_gpus == 8
    assert fresh(waiting).status != JobStatus.QUEUED  # admitted under the raised limit


def test_reservation_request_creates_a_reservation_the_scheduler_honours(users, api, client):
    start, end = window()
    created = api("erin").post("/api/priority-requests/", {
        "kind": "reservation", "tenant": "speech", "gpu_model": "L40S", "gpus": 16, "start": start, "end": end,
        "justification": "Demo day for the ASR system, all afternoon."}, format="json").json()
    assert created["scope"] == "platform"
    api("admin").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json")
    reservation = Reservation.objects.get(tenant__name="speech")
    assert reservation.gpus == 16 and reservation.created_by == users["admin"]
    blocked = submission.submit_job(users["alice"], job_payload(gpu_model="L40S", gpus_per_node=8, nodes=3,
                                                              topology="any"))
    assert fresh(blocked).status == JobStatus.QUEUED  # 24 of 32 L40S wanted, 16 held for speech
    client.login(username="erin", password="demo")
    html = client.get("/reservations/?model=L40S").content.decode()
    assert "speech: 16" in html


def test_quota_request_is_for_tenant_admins_and_changes_the_quota(users, api):
    by_alice = api("alice").post("/api/priority-requests/", {
        "kind": "quota", "tenant": "vision", "gpu_model": "H100", "guaranteed": 16, "limit": 24,
        "justification": "We grew from 4 to 9 researchers."}, format="json")
    assert by_alice.status_code == 422 and "tenant" in by_alice.json()
    bad = api("frank").post("/api/priority-requests/", {
        "kind": "quota", "tenant": "nlp", "gpu_model": "H100", "guaranteed": 30, "limit": 20,
        "justification": "Two new pretraining projects."}, format="json")
    assert bad.status_code == 422 and "limit" in bad.json()
    created = api("frank").post("/api/priority-requests/", {
        "kind": "quota", "tenant": "nlp", "gpu_model": "H100", "guaranteed": 20, "limit": 28,
        "justification": "Two new pretraining projects."}, format="json").json()
    assert created["scope"] == "platform"
    api("admin").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json")
    quota = Quota.objects.get(tenant__name="nlp", gpu_model="H100")
    assert (quota.guaranteed_gpus, quota.limit_gpus) == (20, 28)
    assert AuditRecord.objects.filter(action=AuditAction.QUOTA_CHANGE, after__limit_gpus=28).count() == 1


def test_denial_keeps_things_as_they_were_and_tells_the_requester(users, api):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=2))
    created = api("alice").post("/api/priority-requests/", {
        "kind": "runtime_extension", "job": job.pk, "max_runtime_minutes": 2000,
        "justification": "Longer training for the big model."}, format="json").json()
    denied = api("carol").post(f"/api/priority-requests/{created['id']}/deny/", {"comment": "Checkpoint instead."},
                               format="json").json()
    assert denied["state"] == "denied" and denied["comment"] == "Checkpoint instead."
    assert Job.objects.get(pk=job.pk).max_runtime_minutes == 120
    assert AuditRecord.objects.filter(action=AuditAction.REQUEST_DENY).count() == 1


def test_bad_requests_name_the_field(users, api):
    response = api("alice").post("/api/priority-requests/", {"kind": "burst", "justification": "short"},
                                 format="json")
    assert response.status_code == 400
    assert set(response.json()) >= {"justification", "gpu_model", "start", "end"}
    assert api("alice").post("/api/priority-requests/", {"kind": "teleport", "justification": "x" * 20},
                             format="json").json().keys() == {"kind"}
    assert PriorityRequest.objects.count() == 0


def test_another_tenants_request_is_invisible(users, api):
    job = submission.submit_job(users["bob"], job_payload(tenant="nlp", project="chat-eval", gpus_per_node=1))
    created = api("bob").post("/api/priority-requests/", {
        "kind": "runtime_extension", "job": job.pk, "max_runtime_minutes": 300,
        "justification": "Evaluation over the full set."}, format="json").json()
    assert api("alice").get(f"/api/priority-requests/{created['id']}/").status_code == 404
    assert api("carol").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json").status_code == 404


def test_undecided_requests_expire(users, api, settings):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=1))
    created = api("alice").post("/api/priority-requests/", {
        "kind": "runtime_extension", "job": job.pk, "max_runtime_minutes": 300,
        "justification": "Needs five hours in the end."}, format="json").json()
    PriorityRequest.objects.filter(pk=created["id"]).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert expire_requests.apply().get() == 1
    request = PriorityRequest.objects.get(pk=created["id"])
    assert request.state == RequestState.EXPIRED
    assert api("carol").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json").status_code == 403
    assert AuditRecord.objects.filter(action=AuditAction.REQUEST_EXPIRE).count() == 1
    assert Notification.objects.filter(user=users["alice"], title__contains="expired").count() == 1


def test_task_type_needing_approval_waits_for_the_tenant_approver(users, api, mailoutbox):
    TaskType.objects.filter(code="inference").update(requires_approval=True)
    job = submission.submit_job(users["alice"], job_payload(task_type="inference", gpus_per_node=1))
    assert fresh(job).status == JobStatus.PENDING
    [request] = PriorityRequest.objects.filter(job=job)
    assert request.kind == "admission" and request.scope == "tenant"
    assert Notification.objects.filter(user=users["carol"], kind="request_submitted").exists()
    assert any("carol@" in ",".join(m.to) for m in mailoutbox)
    api("carol").post(f"/api/priority-requests/{request.pk}/approve/", {"comment": "ok"}, format="json")
    assert fresh(job).status in (JobStatus.ADMITTED, JobStatus.DISPATCHING, JobStatus.RUNNING)


def test_priority_that_would_preempt_another_tenant_goes_to_the_platform(users, api):
    from tests.scheduling.passes.test_scheduling_pass import fill_h100_with_research

    Quota.objects.create(tenant=users["erin"].memberships.first().tenant, gpu_model="H100", guaranteed_gpus=0,
                         limit_gpus=8)
    fill_h100_with_research(users)  # vision's preemptible research jobs hold every H100
    waiting = submission.submit_job(users["erin"], job_payload(tenant="speech", project="asr", gpu_model="H100",
                                                             gpus_per_node=8))
    assert fresh(waiting).status == JobStatus.QUEUED
    created = api("erin").post("/api/priority-requests/", {
        "kind": "priority", "job": waiting.pk, "task_type": "inference",
        "justification": "The production ASR endpoint is down without it."}, format="json").json()
    assert created["impact"]["other_tenants_preempted"] == ["vision"], created["impact"]
    assert created["scope"] == "platform"
    assert governance.decision_refusal(users["carol"], PriorityRequest.objects.get(pk=created["id"]))


def test_an_array_needing_approval_is_one_request_and_one_decision(users, api, client):
    TaskType.objects.filter(code="inference").update(requires_approval=True)
    body = job_payload(task_type="inference", gpus_per_node=1, command="sim:minutes=5")
    answer = api("alice").post("/api/jobs/batch/", {"jobs": [  # one submission, three requests
        {**body, "kind": "array", "array": "0-4"}, {**body, "kind": "array", "array": "0-1"}, body,
        {**body, "kind": "array", "array": "0-2"}]}, format="json")
    assert answer.status_code == 201, answer.content[:500]
    sweep, later, single, unseen = answer.json()["jobs"]
    [request] = PriorityRequest.objects.filter(job_id=min(sweep["ids"]))
    assert request.jobs == 5 and PriorityRequest.objects.filter(kind="admission").count() == 4
    assert "these 5 jobs, submitted together" in request.justification_text
    assert Notification.objects.filter(user=users["carol"], kind="request_submitted").count() == 4
    assert client.login(username="alice", password="demo")
    listed = api("carol").get(f"/api/priority-requests/{request.pk}/").json()
    assert listed["jobs"] == 5 and listed["job"] == min(sweep["ids"])

    Job.objects.filter(pk=sweep["ids"][1]).update(status=JobStatus.CANCELLED)  # cancelled meanwhile: left alone
    decided = api("carol").post(f"/api/priority-requests/{request.pk}/approve/", {"comment": "ok"}, format="json")
    assert decided.status_code == 200, decided.content
    statuses = dict(Job.objects.filter(pk__in=sweep["ids"] + later["ids"] + single["ids"]).values_list(
        "pk", "status"))
    assert statuses[sweep["ids"][1]] == JobStatus.CANCELLED
    assert all(statuses[pk] != JobStatus.PENDING for pk in sweep["ids"])
    assert all(statuses[pk] == JobStatus.PENDING for pk in later["ids"] + single["ids"])  # their own requests
    record = AuditRecord.objects.get(action=AuditAction.REQUEST_APPROVE, object_id=str(request.pk))
    assert record.after["queued"] == 4
    page = client.get(f"/jobs/{sweep['ids'][3]}/").content.decode()  # a later task names the shared request
    assert f'href="/requests/{request.pk}/"' in page, page[page.find("Requests"):][:400]

    [other] = PriorityRequest.objects.filter(job_id=min(later["ids"]))
    api("carol").post(f"/api/priority-requests/{other.pk}/deny/", {"comment": "not now"}, format="json")
    assert set(Job.objects.filter(pk__in=later["ids"]).values_list("status", flat=True)) == {JobStatus.CANCELLED}
    assert not Notification.objects.filter(user=users["alice"], kind="job_cancelled").exists()  # told once:
    assert Notification.objects.filter(user=users["alice"], kind="request_decided").count() == 2  # per request
    assert Job.objects.get(pk=single["ids"][0]).status == JobStatus.PENDING

    [undecided] = PriorityRequest.objects.filter(job_id=min(unseen["ids"]), state=RequestState.PENDING)
    PriorityRequest.objects.filter(pk=undecided.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert governance.expire_due() == 1  # the array's request expires, and with it every task it decided
    assert set(Job.objects.filter(pk__in=unseen["ids"]).values_list("status", flat=True)) == {JobStatus.CANCELLED}
    assert Job.objects.get(pk=single["ids"][0]).status == JobStatus.PENDING


def test_the_approver_sees_impact_usage_and_the_queue_before_deciding(users, api, client):
    waiting = fill_vision_a100(users)
    created = api("alice").post("/api/priority-requests/", {
        "kind": "priority", "job": waiting.pk, "task_type": "training",
        "justification": "The benchmark run for the review is due tomorrow."}, format="json").json()
    client.login(username="carol", password="demo")
    html = client.get(f"/requests/{created['id']}/").content.decode()
    assert "Impact if approved now" in html and "Would preempt" in html
    assert f"#{waiting.pk} waits" in html  # the tenant's waiting jobs, by name
    assert "quota_exhausted" in html and 'id="approve"' in html
    client.login(username="alice", password="demo")
    assert 'id="no-decision"' in client.get(f"/requests/{created['id']}/").content.decode()
