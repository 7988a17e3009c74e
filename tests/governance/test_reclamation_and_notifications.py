"""Idle reclamation with simulated idle readings; notifications in the portal and by email, as chosen."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditAction, AuditRecord
from fleet.models import GpuReading
from governance.models import IdlePolicy, IdleWatch, Notification, NotificationPreference
from governance.reclamation import check_idle_jobs
from scheduling import lifecycle
from scheduling.jobs import submission
from scheduling.models import Job, JobEvent, JobStatus, TaskType
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def running_job(users, task_type="research", minutes_ago=120, username="alice"):
    job = submission.submit_job(users[username], job_payload(task_type=task_type, gpus_per_node=2,
                                                           command=long_run(99999)))
    job = Job.objects.get(pk=job.pk)
    if job.status == JobStatus.DISPATCHING:
        lifecycle.transition(job, JobStatus.RUNNING, "started")
    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(minutes=minutes_ago))
    return Job.objects.select_related("task_type").get(pk=job.pk)


def read(job, utilization, minutes=70, every=5):
    now = timezone.now()
    rows = [GpuReading(gpu_id=a.gpu_id, at=now - timedelta(minutes=m), utilization_pct=utilization)
            for a in job.allocations.all() for m in range(0, minutes + 1, every)]
    GpuReading.objects.bulk_create(rows)


def test_idle_job_is_warned_then_reclaimed_with_the_readings_as_evidence(users):
    job = running_job(users)
    read(job, utilization=1)
    now = timezone.now()
    assert check_idle_jobs(now) == {"warned": 1, "reclaimed": 0, "withdrawn": 0}
    warning = job.events.get(kind=JobEvent.Kind.RECLAMATION)
    assert "below 5 %" in warning.reason and len(warning.data["gpus"]) == 2
    assert Notification.objects.filter(user=users["alice"], kind="reclamation_warning").count() == 1
    assert check_idle_jobs(now + timedelta(minutes=10))["reclaimed"] == 0  # still in its grace period
    read(job, utilization=2, minutes=40)
    result = check_idle_jobs(now + timedelta(minutes=31))
    assert result["reclaimed"] == 1
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.CANCELLED
    event = job.events.get(to_status=JobStatus.CANCELLED)
    assert event.data["reclaimed"] is True and event.data["evidence"]["gpus"][0]["max_pct"] <= 2
    assert not job.allocations.filter(released_at__isnull=True).exists()
    [record] = AuditRecord.objects.filter(action=AuditAction.JOB_RECLAIM)
    assert record.object_id == str(job.pk) and record.actor is None
    assert IdleWatch.objects.get(job=job).reclaimed_at is not None
    assert Notification.objects.filter(user=users["alice"], kind="reclamation_action").count() == 1


def test_busy_again_withdraws_the_warning(users):
    job = running_job(users)
    read(job, utilization=0)
    check_idle_jobs()
    GpuReading.objects.filter(gpu_id__in=job.allocations.values("gpu_id")).delete()
    read(job, utilization=80)
    assert check_idle_jobs(timezone.now() + timedelta(minutes=40))["withdrawn"] == 1
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    assert not IdleWatch.objects.filter(job=job).exists()


def test_no_evidence_no_reclamation_and_exemptions(users):
    unmeasured = running_job(users)  # no readings at all
    inference = running_job(users, task_type="inference")
    read(inference, utilization=0)
    young = running_job(users, minutes_ago=10)
    read(young, utilization=0, minutes=10)
    assert check_idle_jobs() == {"warned": 0, "reclaimed": 0, "withdrawn": 0}
    assert {Job.objects.get(pk=j.pk).status for j in (unmeasured, inference, young)} == {JobStatus.RUNNING}


def test_policy_per_tenant_overrides_the_defaults(users):
    job = running_job(users)
    read(job, utilization=20)
    assert check_idle_jobs()["warned"] == 0  # 20 % is busy by the default 5 % threshold
    IdlePolicy.objects.create(tenant=job.tenant, threshold_pct=30, idle_minutes=60, grace_minutes=10)
    assert check_idle_jobs()["warned"] == 1
    IdlePolicy.objects.create(tenant=job.tenant, task_type=TaskType.objects.get(code="research"), exempt=True)
    IdleWatch.objects.all().delete()
    assert check_idle_jobs()["warned"] == 0  # the more specific policy exempts research in this tenant


def test_job_notifications_follow_preferences(users, mailoutbox):
    alice = users["alice"]
    NotificationPreference.objects.create(user=alice, kind="job_started", in_app=True, email=True)  # mail: opt-in
    job = submission.submit_job(alice, job_payload(gpus_per_node=1, command=long_run(99999)))
    job = Job.objects.get(pk=job.pk)
    lifecycle.transition(job, JobStatus.RUNNING, "Containers started.")
    started = Notification.objects.get(user=alice, kind="job_started")
    assert f"#{job.pk}" in started.title and started.url == f"/jobs/{job.pk}/"
    assert any(f"#{job.pk}" in m.subject for m in mailoutbox)
    NotificationPreference.objects.create(user=alice, kind="job_failed", in_app=False, email=False)
    lifecycle.transition(job, JobStatus.FAILED, "OOM", failure_category="out_of_memory",
                         failure_message="CUDA out of memory")
    assert not Notification.objects.filter(user=alice, kind="job_failed").exists()


def test_failed_and_preempted_notifications_say_why(users):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=1, command=long_run(99999)))
    job = Job.objects.get(pk=job.pk)
    lifecycle.transition(job, JobStatus.FAILED, "Node fault", failure_category="node_fault",
                         failure_message="XID 79 on dc1-r3-a100-01")
    failed = Notification.objects.get(user=users["alice"], kind="job_failed")
    assert "Node fault" in failed.title and "XID 79" in failed.body


def test_history_imports_are_not_announced(users):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=1, command=long_run(99999)))
    job = Job.objects.get(pk=job.pk)
    lifecycle.transition(job, JobStatus.RUNNING, "started", at=timezone.now() - timedelta(days=3))
    assert not Notification.objects.filter(kind="job_started").exists()


def test_notifications_page_and_preferences(client, users):
    Notification.objects.create(user=users["alice"], kind="job_started", title="Job #1 started", url="/jobs/1/")
    client.login(username="alice", password="demo")
    html = client.get("/notifications/").content.decode()
    assert "Job #1 started" in html and 'class="bell">1<' in html
    client.post("/notifications/", {"job_started__app": "on"})
    preference = NotificationPreference.objects.get(user=users["alice"], kind="job_started")
    assert preference.in_app and not preference.email
    client.post("/notifications/", {"action": "read"})
    assert not Notification.objects.filter(user=users["alice"], read_at__isnull=True).exists()
