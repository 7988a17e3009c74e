"""Celery task of the audit log: export the chain head regularly (see ``audit.heads``)."""

from celery import shared_task

from .heads import export_head as export


@shared_task
def export_head() -> dict | None:
    """Append the chain head to the head file / syslog, so a later rewrite or truncation of the log shows."""
    return export()
