"""Celery tasks of the fleet: poll the node agents, prune old readings."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from fleet.agents.polling import poll_agents as poll
from fleet.models import GpuReading, NodeReading


@shared_task
def poll_agents() -> dict:
    """Poll every node agent once (concurrently), store readings and apply health changes.

    Routed to the ``agents`` queue (``CELERY_TASK_ROUTES``) so that polling never delays the pass, dispatch
    or sync; a cycle that finds another one running returns at once with ``ran`` False."""
    report = poll()
    if not report.ran:
        return {"ran": False, "detail": "another poll cycle is running"}
    return {"ran": True, "polled": report.polled, "answered": report.answered, "failed": report.failed,
            "changes": report.changes, "seconds": round(report.fetch_seconds + report.store_seconds, 3)}


@shared_task
def prune_readings() -> int:
    """Drop GPU and node readings older than READINGS_RETENTION_DAYS (metering keeps the rollups)."""
    cutoff = timezone.now() - timedelta(days=settings.AGENTS["READINGS_RETENTION_DAYS"])
    return GpuReading.objects.filter(at__lt=cutoff).delete()[0] + NodeReading.objects.filter(at__lt=cutoff).delete()[0]
