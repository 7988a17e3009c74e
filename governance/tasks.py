"""Celery tasks of governance: expire undecided requests, reclaim idle GPUs."""

from celery import shared_task

from governance.reclamation import check_idle_jobs as check
from governance.services import expire_due


@shared_task
def expire_requests() -> int:
    return expire_due()


@shared_task
def check_idle_jobs() -> dict:
    return check()
