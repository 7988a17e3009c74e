"""Listen to job state changes: open the approval request of a job that needs one, notify owners."""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import NotificationKind
from governance.notifications.services import notify
from governance.services import ADMISSION_ENDINGS, request_admission
from scheduling.jobs import dependencies
from scheduling.jobs.efficiency import efficiency_of
from scheduling.models import ACTIVE_STATUSES, FailureCategory, JobStatus, MailType
from scheduling.signals import job_status_changed


@receiver(job_status_changed)
def _on_job_status_changed(sender, jobs, from_status, to_status, reasons, actor, at, **kwargs):
    if to_status == JobStatus.PENDING and from_status == "":
        together = defaultdict(list)  # an array's tasks (a service's replicas) submitted at once: one request
        for job in jobs:
            together[("group", job.group_id) if job.group_id else ("job", job.pk)].append(job)
        for group in together.values():
            request_admission(group)
        return
    if at is not None and (timezone.now() - at).total_seconds() > settings.GOVERNANCE["NOTIFY_MAX_AGE_SECONDS"]:
        return  # history being imported, not news
    for job in jobs:
        notice = _job_notice(job, from_status, to_status, actor, reasons.get(job.pk))
        if notice is not None:
            kind, title = notice
            body = (job.failure_message if to_status == JobStatus.FAILED else "") or reasons.get(job.pk, "")
            notify([job.owner], kind, title, body, job.get_absolute_url(), event=_event_of(job, to_status, at),
                   mail=_job_asks_mail(job, kind), mail_extra=_summary(job) if job.is_terminal else "")


#: The mail types (Slurm's ``--mail-type``) under which each kind of job notification is mailed.
MAIL_TYPES_OF = {
    NotificationKind.JOB_STARTED: {MailType.BEGIN}, NotificationKind.JOB_SUCCEEDED: {MailType.END},
    NotificationKind.JOB_FAILED: {MailType.END, MailType.FAIL}, NotificationKind.JOB_CANCELLED: {MailType.END},
    NotificationKind.JOB_PREEMPTED: {MailType.REQUEUE}, NotificationKind.JOB_REQUEUED: {MailType.REQUEUE},
}


def _job_asks_mail(job, kind: str) -> bool | None:
    """Whether the job's own mail types ask for this mail; None where it left that to its owner's preferences."""
    asked = job.mail_types
    return None if asked is None else bool(asked & MAIL_TYPES_OF[kind])


def _event_of(job, to_status: str, at) -> str:
    """The change's name for its mail: one mail per job, status and moment, however often the news arrives."""
    return f"job:{job.pk}:{to_status}:{(at or job.last_updated).isoformat()}"


def _summary(job):
    """The efficiency summary for the mail, read when (and only if) a mail is written, in its reader's language."""
    def lines() -> str:
        return "\n".join([_("How it used its GPUs:"), *(f"- {line}" for line in efficiency_of(job).summary_lines())])
    return lines


def _job_notice(job, from_status: str, to_status: str, actor, reason=None):
    """The kind and title (in the recipient's language, hence a callable) of a status change's notification;
    None for a change nobody is told about. A job that succeeded is opt-in (OPT_IN_KINDS); a cancellation is told
    when another person made it, or the pass because a dependency can never be met (the portal's own otherwise, a
    service scaled down for one, are on the job's timeline); a requeue after a preemption was told as the
    preemption."""
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
    if getattr(reason, "msgid", None) in ADMISSION_ENDINGS:
        return None  # its requester is told of the request's decision or expiry, once for all the jobs it decided
    never = getattr(reason, "msgid", None) == dependencies.NEVER_SATISFIED
    if to_status == JobStatus.CANCELLED and (never or (actor is not None and actor.pk != job.owner_id)):
        return NotificationKind.JOB_CANCELLED, lambda: _("Job #%(id)d %(name)s was cancelled") % params
    if to_status == JobStatus.QUEUED and from_status in ACTIVE_STATUSES:
        return NotificationKind.JOB_REQUEUED, lambda: _("Job #%(id)d %(name)s was requeued") % params
    return None
