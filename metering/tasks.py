"""Celery tasks of metering: the hourly rollup of yesterday and today, freezing the month that closed (its
capacity sizing by what-if replay first, which the advice cites), importing the Slurm clusters' own accounting,
and what-if runs."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from fleet.models import Cluster, ExecutorKind
from gpuportal.text.dates import local_day
from metering.reports import monthly as reports
from metering.usage.rollup import rollup
from metering.usage.slurm import import_accounting
from metering.whatif import services as whatif
from scheduling.executors.slurm.client import SlurmError
from tenants.models import Tenant

logger = logging.getLogger(__name__)


@shared_task
def rollup_recent() -> dict:
    """Yesterday and today: yesterday's late readings are absorbed, today's figures stay fresh."""
    today = local_day(timezone.now())
    return rollup(today - timedelta(days=1), today).as_dict()


@shared_task
def freeze_last_month() -> list[str]:
    """Freeze the platform report and every tenant's report of the month that closed last."""
    last_month = reports.last_closed_month()
    if reports.current_snapshot(last_month, None) is None and whatif.latest_sizing(last_month) is None:
        whatif.size_month(last_month)  # the platform report's capacity advice cites it
    frozen = []
    for tenant in [None, *Tenant.objects.all()]:
        if reports.current_snapshot(last_month, tenant) is None:
            reports.freeze(last_month, tenant)
            frozen.append(tenant.name if tenant else "platform")
    return frozen


@shared_task
def import_slurm_accounting() -> list[dict]:
    """Every Slurm cluster's accounting of the last ``SLURM["ACCOUNTING_HOURS"]`` (whole days), so records
    slurmdb writes late are still taken in. A cluster whose slurmdb cannot be read is skipped with its reason
    (logged and returned): the others are imported all the same, and the next run tries it again."""
    now = timezone.now()
    start = now - timedelta(hours=float(settings.SLURM["ACCOUNTING_HOURS"]))
    done = []
    for cluster in Cluster.objects.filter(executor=ExecutorKind.SLURM).exclude(slurm_url=""):
        try:
            done.append(import_accounting(cluster, start, now, now=now).as_dict())
        except SlurmError as exc:
            logger.warning("slurm accounting of %s not imported: %s", cluster.name, exc)
            done.append({"cluster": cluster.name, "error": str(exc)})
    return done


@shared_task
def run_what_if(run_id: int) -> dict:
    """One stored what-if run (``metering.whatif.services``): its progress is written as it goes."""
    run = whatif.execute(run_id)
    return {"id": run.pk, "status": run.status}
