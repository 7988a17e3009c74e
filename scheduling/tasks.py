"""Celery tasks: run the scheduling pass, dispatch admitted jobs, sync job status, watch and resync Kubernetes,
reconcile.

Each task is a thin wrapper over a module that knows nothing of Celery (``passes.scheduler``, ``passes.dispatch``,
``executors``): they report what they did, and the task decides what comes next (dispatch what a pass
admitted, another pass when GPUs were freed). So the embedded demo's in-process loop and a real worker do
the same thing. Services ask for a pass through ``scheduling.triggers``, which queues these tasks by name:
no portal module imports this one (the Celery app finds it; management commands, the demo and the
benchmarks, above it, call its functions).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from fleet.models import Cluster, ExecutorKind
from gpuportal.observability import telemetry
from scheduling import lifecycle
from scheduling.executors import ExecutorUpdate, executor_for
from scheduling.executors.kubernetes.sync import ClusterSync, resync_all
from scheduling.executors.slurm.client import SlurmError
from scheduling.executors.slurm.follow import sync_all as follow_slurm_jobs
from scheduling.executors.slurm.inventory import import_inventory
from scheduling.models import Job, JobStatus
from scheduling.passes.dispatch import dispatch_many
from scheduling.passes.reconcile import reconcile as reconcile_once
from scheduling.passes.scheduler import PassReport, run_pass
from scheduling.triggers import DISPATCH_JOBS, pass_started, queue_pass, request_scheduling_pass, send
from scheduling.workloads.services import advance_services

logger = logging.getLogger(__name__)


def follow_up(report: PassReport) -> None:
    """What comes after a pass: dispatch what it admitted, and one more pass when it preempted (the
    preemptors start as soon as their victims have let go)."""
    if report.admitted:
        send(DISPATCH_JOBS, report.admitted_ids)
    if report.preempted:
        queue_pass()


@shared_task
def run_scheduling_pass() -> dict:
    """One pass, then its follow-up. It first clears the mark of a queued pass (``triggers.queue_pass``): requests
    made before it were for this pass, those made from now on queue the next. A pass that raises is counted (its
    transaction rolled back; the count is written after, in its own) so that an alert sees passes failing, not
    only passes missing. The count is guarded: when what failed was the connection, it is written on a fresh
    one, and a count that cannot be written is logged rather than raised in place of the pass's own error. A
    pass that committed returns its report whatever failed after the commit (``run_pass``), so what it admitted
    is always followed up."""
    pass_started()  # before anything is read: a change from now on asks for the next pass
    try:
        report = run_pass()
    except Exception:
        telemetry.guarded(lambda: telemetry.increment("gpuportal_scheduling_pass_failures_total"))
        raise
    follow_up(report)
    return {"ran": report.ran, "admitted": report.admitted_ids, "waiting": len(report.waiting),
            "seconds": round(report.seconds, 4)}


@shared_task
def dispatch_job(job_id: int) -> str:
    """Hand one admitted job to its cluster's executor. Re-running it for the same job does nothing."""
    summary = dispatch_many([job_id])
    return "dispatched" if summary["dispatched"] else "failed" if summary["failed"] else "skipped"


@shared_task
def dispatch_jobs(job_ids: list[int]) -> dict:
    """Hand the jobs one scheduling pass admitted to their clusters, concurrently."""
    return dispatch_many(job_ids)


def record_update(job: Job, update: ExecutorUpdate, at) -> bool:
    """Store what an executor observed at ``at`` (the moment its message describes, so a duration it states
    is the one the stored times say): a failure through the retry rule (``lifecycle.fail_or_retry``), any
    other change as a transition. False when the job moved meanwhile (a cancel)."""
    try:
        if update.status == JobStatus.FAILED and update.diagnosis:
            lifecycle.fail_or_retry(job, update.diagnosis, reason=update.reason, at=at)
        else:
            lifecycle.transition(job, update.status, update.reason, at=at, data=update.diagnosis,
                                 **update.saved_fields(job))
    except lifecycle.InvalidTransition:
        return False
    return True


@shared_task
def sync_job_status() -> int:
    """Ask executors what became of dispatched and running jobs; returns how many changed."""
    now = timezone.now()
    changed = 0
    jobs = (Job.objects.filter(status__in=(JobStatus.DISPATCHING, JobStatus.RUNNING))
            .select_related("cluster", "task_type").prefetch_related("allocations__gpu__node"))
    for job in jobs:
        update = executor_for(job.cluster).observe(job, now)
        if update is not None and record_update(job, update, now):
            changed += 1
    changed += follow_slurm_jobs()  # one GET /jobs per Slurm cluster, not one request per job
    changed += advance_services()
    if changed:
        request_scheduling_pass()
    return changed


@shared_task
def watch_kubernetes() -> dict:
    """Follow pod events of every Kubernetes cluster for one beat interval (resuming at the stored
    resourceVersion), storing job state changes as they come."""
    seconds = settings.KUBERNETES["WATCH_SECONDS"]
    out = {}
    clusters = list(Cluster.objects.filter(executor=ExecutorKind.KUBERNETES))
    for cluster in clusters:
        try:
            report = ClusterSync(cluster).watch(seconds / max(len(clusters), 1))
            out[cluster.name] = {"events": report.events, "changed": report.changed, "relists": report.relists}
        except Exception as exc:  # an unreachable cluster must not stop the others
            logger.exception("watch of cluster %s failed", cluster.name)
            out[cluster.name] = {"error": str(exc)}
    if any(entry.get("changed") for entry in out.values()):
        request_scheduling_pass()
    return out


@shared_task
def reconcile() -> dict:
    """Repair what lost messages and dead workers left behind (scheduling/passes/reconcile.py)."""
    report = reconcile_once()
    if report.repairs:
        request_scheduling_pass()
    return report.as_dict()


@shared_task
def resync_kubernetes() -> int:
    """List and reconcile every Kubernetes job: the safety net for anything a watch missed."""
    changed = resync_all()
    if changed:
        request_scheduling_pass()
    return changed


@shared_task
def sync_slurm_inventory() -> dict:
    """Read every Slurm cluster's nodes, their states and the work outside the portal again (the fleet asks for a
    pass itself where capacity changed). A cluster that cannot be read keeps what was last read, and says why."""
    done: dict = {}
    for cluster in Cluster.objects.filter(executor=ExecutorKind.SLURM).exclude(slurm_url=""):
        try:
            done[cluster.name] = import_inventory(cluster).summary()
        except SlurmError as exc:
            logger.warning("inventory of Slurm cluster %s: %s", cluster.name, exc)
            done[cluster.name] = {"error": str(exc)}
    return done
