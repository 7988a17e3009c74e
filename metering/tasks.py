"""Celery tasks of metering: the hourly rollup of yesterday and today, and freezing the month that closed."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from gpuportal.text.dates import local_day
from metering.reports import monthly as reports
from metering.usage.rollup import rollup
from tenants.models import Tenant


@shared_task
def rollup_recent() -> dict:
    """Yesterday and today: yesterday's late readings are absorbed, today's figures stay fresh."""
    today = local_day(timezone.now())
    return rollup(today - timedelta(days=1), today).as_dict()


@shared_task
def freeze_last_month() -> list[str]:
    """Freeze the platform report and every tenant's report of the month that closed last."""
    last_month = reports.last_closed_month()
    frozen = []
    for tenant in [None, *Tenant.objects.all()]:
        if reports.current_snapshot(last_month, tenant) is None:
            reports.freeze(last_month, tenant)
            frozen.append(tenant.name if tenant else "platform")
    return frozen
