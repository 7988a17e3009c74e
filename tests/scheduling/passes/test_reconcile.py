"""Level-triggered truth: lost messages, races and leftovers are repaired by the reconciler, each repair an
event with its reason; a cancel racing with a pass or a dispatch changes only that job."""

import json
import threading
from datetime import timedelta
from unittest import mock

import kombu.exceptions
import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone

from audit.models import AuditAction, AuditRecord
from gpuportal.models import OperationalCounter
from kubefake.resources import ApiError
from scheduling import engine, lifecycle
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.models import Job, JobAllocation, JobStatus
from scheduling.passes.dispatch import dispatch_many
from scheduling.passes.reconcile import reconcile
from scheduling.passes.scheduler import run_pass
from scheduling.tasks import dispatch_jobs, run_scheduling_pass
from tests.conftest import job_payload, long_run
from tests.scheduling.kube import MODEL

pytestmark = pytest.mark.django_db(transaction=True)
LATER = timedelta(hours=1)  # beyond every reconcile bound
BROKER_DOWN = kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def exists(fake, namespace: str, name: str) -> bool:
    try:
        fake.get("jobs", namespace, name)
    except ApiError:
        return False
    return True


def counter(kind: str) -> float:
    row = OperationalCounter.objects.filter(name="gpuportal_reconcile_repairs_total", labels=f'kind="{kind}"').first()
    return row.value if row else 0


def test_a_lost_dispatch_message_is_dispatched_again(users):
    with mock.patch.object(dispatch_jobs, "apply_async", side_effect=BROKER_DOWN):
        job = submission.submit_job(users["alice"], job_payload(gpus_per_node=4, command=long_run(999)))
    assert job.status == JobStatus.ADMITTED  # the pass admitted it; its dispatch message never left
    assert reconcile().repairs == []  # within the bound: dispatch may still be on its way
    report = reconcile(timezone.now() + LATER)
    assert [(r.kind, r.job) for r in report.repairs] == [("redispatched", job.pk)]
    job.refresh_from_db()
    assert job.status == JobStatus.DISPATCHING
    event = job.events.get(kind="reconcile")
    assert "lost message" in event.reason and event.data["repair"] == "redispatched"
    assert counter("redispatched") == 1


def test_gpus_of_a_job_that_stopped_holding_them_are_released_with_an_audit_record(users):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=2, command=long_run(999)))
    assert job.allocations.filter(released_at__isnull=True).count() == 2
    Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)  # a worker died between two writes
    report = reconcile()
    assert report.count("released") == 1
    assert not JobAllocation.objects.filter(job=job, released_at__isnull=True).exists()
    assert "Released 2 GPU(s)" in job.events.get(kind="reconcile").reason
    record = AuditRecord.objects.get(action=AuditAction.RECONCILE_RELEASE)
    assert record.object_id == str(job.pk) and record.tenant.name == "vision"
    assert reconcile().repairs == []  # nothing left to repair: idempotent


def test_a_cancel_during_a_pass_changes_only_that_job(users):
    with mock.patch.object(run_scheduling_pass, "apply_async"):  # passes run only where the test says
        doomed = submission.submit_job(users["alice"], job_payload(gpus_per_node=2))
        other = submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain",
                                                                gpus_per_node=2))
    schedule = engine.schedule

    def cancel_while_deciding(snapshot):
        result = schedule(snapshot)
        thread = threading.Thread(target=lambda: (job_actions.cancel_job(users["alice"], Job.objects.get(
            pk=doomed.pk)), connections.close_all()))
        thread.start()
        thread.join(10)
        return result

    with mock.patch("scheduling.engine.schedule", side_effect=cancel_while_deciding):
        report = run_pass()
    assert report.ran and report.admitted_ids == [other.pk]
    doomed.refresh_from_db()
    assert doomed.status == JobStatus.CANCELLED and not doomed.allocations.exists()
    assert Job.objects.get(pk=other.pk).status == JobStatus.ADMITTED


def test_a_cancel_during_a_dispatch_batch_leaves_the_others_dispatched(kube, users):
    with mock.patch.object(dispatch_jobs, "apply_async"):  # keep the admitted jobs for one batch below
        jobs = [submission.submit_job(users["alice"], job_payload(gpu_model=MODEL, gpus_per_node=2))
                for _ in range(3)]
    assert {Job.objects.get(pk=j.pk).status for j in jobs} == {JobStatus.ADMITTED}
    from scheduling.executors.kubernetes import KubernetesExecutor

    send = KubernetesExecutor.dispatch

    def dispatch_then_cancel(executor, job):
        state = send(executor, job)
        if job.pk == jobs[1].pk:  # the owner cancels it while its objects are being made
            lifecycle.transition(Job.objects.get(pk=job.pk), JobStatus.CANCELLED, "Cancelled by alice.")
        return state

    with mock.patch.object(KubernetesExecutor, "dispatch", dispatch_then_cancel):
        summary = dispatch_many([j.pk for j in jobs], workers=1)
    assert (summary["dispatched"], summary["failed"], summary["skipped"]) == (2, 0, 1)
    statuses = [Job.objects.get(pk=j.pk).status for j in jobs]
    assert statuses == [JobStatus.DISPATCHING, JobStatus.CANCELLED, JobStatus.DISPATCHING]
    assert not exists(kube.fake, "gp-vision", f"gp-{jobs[1].pk}-a0")  # its objects deleted again
    assert exists(kube.fake, "gp-vision", f"gp-{jobs[0].pk}-a0")


def test_objects_that_never_appeared_are_created_and_leftovers_deleted(kube, users):
    job = submission.submit_job(users["alice"], job_payload(gpu_model=MODEL, gpus_per_node=2,
                                                            command=long_run(999)))
    namespace, name = kube.objects_of(job)
    kube.fake.delete("jobs", namespace, name)  # lost on the way (an API server restored from backup)
    gone = submission.submit_job(users["alice"], job_payload(gpu_model=MODEL, gpus_per_node=2))
    leftover = kube.objects_of(gone)
    Job.objects.filter(pk=gone.pk).update(status=JobStatus.CANCELLED)  # ended without deleting its objects
    report = reconcile(timezone.now() + LATER)
    assert sorted((r.kind, r.job) for r in report.repairs) == [
        ("deleted", gone.pk), ("recreated", job.pk), ("released", gone.pk)]
    assert exists(kube.fake, namespace, name)  # made again, same deterministic name
    assert not exists(kube.fake, *leftover)
    assert "never appeared" in Job.objects.get(pk=job.pk).events.get(kind="reconcile").reason


def test_submission_answers_201_when_the_broker_is_down_and_nothing_is_lost(api, users):
    with mock.patch.object(run_scheduling_pass, "apply_async", side_effect=BROKER_DOWN):
        response = api("alice").post("/api/jobs/", job_payload(gpus_per_node=2), format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == JobStatus.QUEUED and Job.objects.count() == 1
    assert OperationalCounter.objects.get(name="gpuportal_enqueue_failures_total").value == 1
    run_scheduling_pass.apply()  # the next beat tick
    assert Job.objects.get(pk=job.pk).status in (JobStatus.ADMITTED, JobStatus.DISPATCHING)


def test_reconcile_command_prints_what_it_repaired(users, capsys):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=1, command=long_run(999)))
    Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)
    call_command("reconcile", "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed["counts"]["released"] == 1 and printed["repairs"][0]["job"] == job.pk
