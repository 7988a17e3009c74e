"""Listen to job state changes: open the approval request of a job that needs one, notify owners."""

from __future__ import annotations

from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import NotificationKind
from governance.notifications.services import notify
from governance.services import request_admission
from scheduling.models import FailureCategory, JobStatus
from scheduling.signals import job_status_changed


@receiver(job_status_changed)
def _on_job_status_changed(sender, jobs, from_status, to_status, reasons, actor, at, **kwargs):
    if to_status == JobStatus.PENDING and from_status == "":
        for job in jobs:
            request_admission(job)
        return
    if at is not None and (timezone.now() - at).total_seconds() > settings.GOVERNANCE["NOTIFY_MAX_AGE_SECONDS"]:
        return  # history being imported, not news
    for job in jobs:
        notice = _job_notice(job, to_status)
        if notice is not None:
            kind, title = notice
            body = (job.failure_message if to_status == JobStatus.FAILED else "") or reasons.get(job.pk, "")
            notify([job.owner], kind, title, body, job.get_absolute_url())


def _job_notice(job, to_status: str):
    """The kind and title (in the recipient's language, hence a callable) of a status change's notification;
    None for a change nobody is told about. A job that succeeded is opt-in (OPT_IN_KINDS)."""
    params = {"id": job.pk, "name": job.name}
    if to_status == JobStatus.RUNNING:
        return NotificationKind.JOB_STARTED, lambda: _("Job #%(id)d %(name)s started") % params
    if to_status == JobStatus.SUCCEEDED:
        return NotificationKind.JOB_SUCCEEDED, lambda: _("Job #%(id)d %(name)s succeeded") % params
    if to_status == JobStatus.FAILED:
        return NotificationKind.JOB_FAILED, lambda: _("Job #%(id)d %(name)s failed: %(c)s") % {
            **params, "c": FailureCategory(job.failure_category).label if job.failure_category
            else _("unclassified")}
    if to_status == JobStatus.PREEMPTED:
        return NotificationKind.JOB_PREEMPTED, lambda: _("Job #%(id)d %(name)s was preempted") % params
    return None
