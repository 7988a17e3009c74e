"""Listen to job state changes: open the approval request of a job that needs one, notify owners."""

from __future__ import annotations

from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone
from django.utils.translation import gettext as _

from scheduling.models import FailureCategory, JobStatus
from scheduling.signals import job_status_changed

from .models import NotificationKind
from .notifications import notify
from .services import request_admission


@receiver(job_status_changed)
def _on_job_status_changed(sender, jobs, from_status, to_status, reasons, actor, at, **kwargs):
    if to_status == JobStatus.PENDING and from_status == "":
        for job in jobs:
            request_admission(job)
        return
    if at is not None and (timezone.now() - at).total_seconds() > settings.GOVERNANCE["NOTIFY_MAX_AGE_SECONDS"]:
        return  # history being imported, not news
    for job in jobs:
        url = f"/jobs/{job.pk}/"
        if to_status == JobStatus.RUNNING:
            notify([job.owner], NotificationKind.JOB_STARTED, _("Job #%(id)d %(name)s started") % {
                "id": job.pk, "name": job.name}, reasons.get(job.pk, ""), url)
        elif to_status == JobStatus.SUCCEEDED:  # opt-in (OPT_IN_KINDS): sent only to owners who asked for it
            notify([job.owner], NotificationKind.JOB_SUCCEEDED, _("Job #%(id)d %(name)s succeeded") % {
                "id": job.pk, "name": job.name}, reasons.get(job.pk, ""), url)
        elif to_status == JobStatus.FAILED:
            category = FailureCategory(job.failure_category).label if job.failure_category else _("unclassified")
            notify([job.owner], NotificationKind.JOB_FAILED, _("Job #%(id)d %(name)s failed: %(c)s") % {
                "id": job.pk, "name": job.name, "c": category}, job.failure_message or reasons.get(job.pk, ""), url)
        elif to_status == JobStatus.PREEMPTED:
            notify([job.owner], NotificationKind.JOB_PREEMPTED, _("Job #%(id)d %(name)s was preempted") % {
                "id": job.pk, "name": job.name}, reasons.get(job.pk, ""), url)
