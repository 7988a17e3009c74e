"""Celery tasks of governance: expire undecided requests, reclaim idle GPUs."""

from celery import shared_task


@shared_task
def expire_requests() -> int:
    from .services import expire_due

    return expire_due()


@shared_task
def check_idle_jobs() -> dict:
    from .reclamation import check_idle_jobs as check

    return check()
