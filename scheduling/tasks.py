"""Celery tasks: poll agents, run the scheduling pass, dispatch admitted jobs, sync job status.

Each task is a thin wrapper over a service, so the embedded demo's in-process loop and a real worker
do the same thing.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from . import lifecycle
from .executors import executor_for
from .models import Job, JobStatus

logger = logging.getLogger(__name__)


@shared_task
def poll_agents() -> dict:
    """Poll every node agent once (concurrently), store readings and apply health changes."""
    from .polling import poll_agents as poll

    report = poll()
    return {"polled": report.polled, "answered": report.answered, "failed": report.failed,
            "changes": report.changes, "seconds": round(report.fetch_seconds + report.store_seconds, 3)}


@shared_task
def prune_readings() -> int:
    """Drop GPU and node readings older than READINGS_RETENTION_DAYS (metering keeps the rollups)."""
    from datetime import timedelta

    from django.conf import settings

    from .models import GpuReading, NodeReading

    cutoff = timezone.now() - timedelta(days=settings.AGENTS["READINGS_RETENTION_DAYS"])
    return GpuReading.objects.filter(at__lt=cutoff).delete()[0] + NodeReading.objects.filter(at__lt=cutoff).delete()[0]


@shared_task
def run_scheduling_pass() -> dict:
    from .scheduler import run_pass

    report = run_pass()
    return {"ran": report.ran, "admitted": [j for j, _w in report.admitted], "waiting": len(report.waiting),
            "seconds": round(report.seconds, 4)}


@shared_task
def dispatch_job(job_id: int) -> str:
    """Hand one admitted job to its cluster's executor. Re-running it for the same job does nothing."""
    from .dispatch import dispatch_many

    summary = dispatch_many([job_id])
    return "dispatched" if summary["dispatched"] else "failed" if summary["failed"] else "skipped"


@shared_task
def dispatch_jobs(job_ids: list[int]) -> dict:
    """Hand the jobs one scheduling pass admitted to their clusters, concurrently."""
    from .dispatch import dispatch_many

    return dispatch_many(job_ids)


@shared_task
def sync_job_status() -> int:
    """Ask executors what became of dispatched and running jobs; returns how many changed."""
    now = timezone.now()
    changed = 0
    jobs = (Job.objects.filter(status__in=(JobStatus.DISPATCHING, JobStatus.RUNNING))
            .select_related("cluster").prefetch_related("allocations__gpu__node"))
    for job in jobs:
        update = executor_for(job.cluster).observe(job, now)
        if update is None:
            continue
        try:
            lifecycle.transition(job, update.status, update.reason, failure_category=update.failure_category,
                                 failure_message=update.failure_message, exit_code=update.exit_code)
        except lifecycle.InvalidTransition:
            continue  # cancelled meanwhile
        changed += 1
    if changed:
        from .services import request_scheduling_pass

        request_scheduling_pass()
    return changed


@shared_task
def watch_kubernetes() -> dict:
    """Follow pod events of every Kubernetes cluster for one beat interval (resuming at the stored
    resourceVersion), storing job state changes as they come."""
    from django.conf import settings

    from .executors.kubernetes.sync import ClusterSync
    from .models import Cluster, ExecutorKind

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
    return out


@shared_task
def resync_kubernetes() -> int:
    """List and reconcile every Kubernetes job: the safety net for anything a watch missed."""
    from .executors.kubernetes.sync import resync_all

    return resync_all()
