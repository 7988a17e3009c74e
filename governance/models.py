"""Requests for exceptions (priority, bursts, reservations, longer runtimes, quota changes, approval of a
job whose task type needs it), in-app notifications and their preferences, and idle-GPU reclamation."""

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from gpuportal.models import TimeStampedModel
from tenants.scoping import TenantScopedQuerySet


class RequestKind(models.TextChoices):
    PRIORITY = "priority", _("Higher priority for a job")
    BURST = "burst", _("Burst above the tenant's limit")
    RESERVATION = "reservation", _("Reservation")
    RUNTIME_EXTENSION = "runtime_extension", _("Longer max runtime")
    QUOTA = "quota", _("Permanent quota change")
    ADMISSION = "admission", _("Job whose task type needs approval")


class RequestState(models.TextChoices):
    PENDING = "pending", _("Pending")
    APPROVED = "approved", _("Approved")
    DENIED = "denied", _("Denied")
    EXPIRED = "expired", _("Expired")


class ApproverScope(models.TextChoices):
    TENANT = "tenant", _("An approver of the tenant")
    PLATFORM = "platform", _("A platform approver")


#: The justification the portal gives a job that waits for approval of its task type (stored in English, read in
#: the reader's language: ``PriorityRequest.justification_text``).
ADMISSION_JUSTIFICATION = gettext_noop("Task type %(t)s needs approval before the job may queue.")
#: The same for the tasks of an array or the replicas of a service submitted together: one request for them all.
GROUP_ADMISSION_JUSTIFICATION = gettext_noop(
    "Task type %(t)s needs approval before these %(n)d jobs, submitted together, may queue; one decision covers "
    "them all.")


class PriorityRequest(TimeStampedModel):
    """A written request for an exception, decided by someone other than the requester.

    ``scope`` says who may decide: the tenant's approvers, or a platform approver when the request affects
    other tenants (bursts, reservations, quota changes, anything that would preempt another tenant).
    ``impact`` is the what-if of the scheduling engine when the request was made (refreshed on the page).
    """

    kind = models.CharField(_("kind"), max_length=20, choices=RequestKind.choices)
    state = models.CharField(_("state"), max_length=10, choices=RequestState.choices, default=RequestState.PENDING,
                             db_index=True)
    scope = models.CharField(_("decided by"), max_length=10, choices=ApproverScope.choices)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="requests")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="requests")
    justification = models.TextField(_("justification"))
    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, null=True, blank=True,
                            related_name="requests")
    task_type = models.ForeignKey("scheduling.TaskType", on_delete=models.PROTECT, null=True, blank=True,
                                  related_name="+", verbose_name=_("wanted task type"))
    gpu_model = models.CharField(_("GPU model"), max_length=64, blank=True)
    gpus = models.PositiveIntegerField(_("GPUs"), null=True, blank=True)
    start = models.DateTimeField(_("start"), null=True, blank=True)
    end = models.DateTimeField(_("end"), null=True, blank=True)
    max_runtime_minutes = models.PositiveIntegerField(_("max runtime (minutes)"), null=True, blank=True)
    jobs = models.PositiveIntegerField(_("jobs"), default=1, help_text=_(
        "How many jobs an admission decides: the tasks of an array or the replicas of a service submitted "
        "together are decided at once."))
    guaranteed = models.PositiveIntegerField(_("guaranteed GPUs"), null=True, blank=True)
    limit = models.PositiveIntegerField(_("limit GPUs"), null=True, blank=True)
    impact = models.JSONField(_("impact"), default=dict, blank=True)
    expires_at = models.DateTimeField(_("expires"))
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    comment = models.TextField(_("comment"), blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        verbose_name = _("request")
        verbose_name_plural = _("requests")

    def __str__(self):
        return f"#{self.pk} {self.get_kind_display()} ({self.tenant}, {self.state})"

    def get_absolute_url(self):
        return reverse("governance:request-detail", args=[self.pk])

    @property
    def is_pending(self) -> bool:
        return self.state == RequestState.PENDING

    @property
    def justification_text(self) -> str:
        """The justification in the reader's language when the portal wrote it (a job that waits for approval of
        its task type); as its requester typed it otherwise."""
        if self.kind == RequestKind.ADMISSION and self.task_type_id:
            for text in (ADMISSION_JUSTIFICATION, GROUP_ADMISSION_JUSTIFICATION):
                if self.justification == text % {"t": self.task_type.name, "n": self.jobs}:
                    return gettext(text) % {"t": self.task_type.display_name, "n": self.jobs}
        return self.justification


class NotificationKind(models.TextChoices):
    REQUEST_SUBMITTED = "request_submitted", _("A request waits for my decision")
    REQUEST_DECIDED = "request_decided", _("My request was decided or expired")
    JOB_STARTED = "job_started", _("My job started")
    JOB_FAILED = "job_failed", _("My job failed")
    JOB_PREEMPTED = "job_preempted", _("My job was preempted")
    JOB_SUCCEEDED = "job_succeeded", _("My job succeeded")
    JOB_REQUEUED = "job_requeued", _("My job was requeued")
    JOB_CANCELLED = "job_cancelled", _("Someone else cancelled my job")
    RECLAMATION_WARNING = "reclamation_warning", _("My idle job will be reclaimed")
    RECLAMATION_ACTION = "reclamation_action", _("My idle job was reclaimed")


# Kinds a user receives only after choosing them: most jobs end well, and a message for each would bury the
# ones that need attention (a failure, a preemption). Every other kind is sent until the user turns it off.
OPT_IN_KINDS = frozenset({NotificationKind.JOB_SUCCEEDED})
# Kinds mailed only to a user who chose mail for them (or, for a job's events, whose job asked with its mail types,
# as Slurm's --mail-type): news of one's own jobs and requests is in the portal; mail is for who wants it there too.
MAIL_OPT_IN_KINDS = frozenset({
    NotificationKind.JOB_STARTED, NotificationKind.JOB_SUCCEEDED, NotificationKind.JOB_FAILED,
    NotificationKind.JOB_PREEMPTED, NotificationKind.JOB_REQUEUED, NotificationKind.JOB_CANCELLED,
    NotificationKind.REQUEST_DECIDED})


class Notification(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(_("kind"), max_length=24, choices=NotificationKind.choices)
    title = models.CharField(_("title"), max_length=200)
    body = models.TextField(_("message"), blank=True)
    url = models.CharField(_("link"), max_length=300, blank=True)
    created = models.DateTimeField(_("time"), auto_now_add=True, db_index=True)
    read_at = models.DateTimeField(_("read"), null=True, blank=True)
    emailed = models.BooleanField(_("emailed"), default=False)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["user", "read_at"])]

    def __str__(self):
        return f"{self.user}: {self.title}"


class NotificationPreference(models.Model):
    """What a user receives for one kind of notification (no row: both in-app and email, or neither for
    ``OPT_IN_KINDS``)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=24, choices=NotificationKind.choices)
    in_app = models.BooleanField(_("in the portal"), default=True)
    email = models.BooleanField(_("by email"), default=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="notification_preference_unique")]

    def __str__(self):
        return f"{self.user} {self.kind}: app={self.in_app} email={self.email}"


class MailDelivery(models.Model):
    """One mail for one event to one recipient, written in their language when the event happened and sent by a
    Celery task (``governance.notifications.mail``). Unique per event and recipient, so that a duplicated signal
    or a retried task never mails twice; ``sent_at`` says it went out, ``last_error`` why it has not yet."""

    event = models.CharField(_("event"), max_length=120)
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    address = models.EmailField(_("address"))
    subject = models.CharField(_("subject"), max_length=250)
    body = models.TextField(_("body"))
    notification = models.ForeignKey(Notification, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(_("created"), auto_now_add=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)
    tries = models.PositiveSmallIntegerField(_("tries"), default=0)
    last_error = models.TextField(_("last error"), blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event", "recipient"], name="mail_delivery_once_per_event")]
        verbose_name = _("mail delivery")
        verbose_name_plural = _("mail deliveries")

    def __str__(self):
        return f"{self.event} -> {self.address}: {'sent' if self.sent_at else 'not sent'}"


class IdlePolicy(TimeStampedModel):
    """When a running job counts as idle: all its GPUs below ``threshold_pct`` for ``idle_minutes``; it is
    warned, then stopped after ``grace_minutes``. The most specific row wins (tenant, then task type, then
    cluster); without one, the GOVERNANCE settings apply."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, null=True, blank=True,
                                related_name="+")
    task_type = models.ForeignKey("scheduling.TaskType", on_delete=models.CASCADE, null=True, blank=True,
                                  related_name="+")
    exempt = models.BooleanField(_("exempt from reclamation"), default=False)
    # xgettext:no-python-format
    threshold_pct = models.PositiveSmallIntegerField(_("idle below (% utilisation)"), default=5)
    idle_minutes = models.PositiveIntegerField(_("idle for (minutes)"), default=60)
    grace_minutes = models.PositiveIntegerField(_("grace after the warning (minutes)"), default=30)

    class Meta:
        verbose_name = _("idle policy")
        verbose_name_plural = _("idle policies")

    def __str__(self):
        scope = "/".join(str(x) for x in (self.tenant, self.task_type, self.cluster) if x) or "default"
        return f"{scope}: <{self.threshold_pct}% for {self.idle_minutes} min, grace {self.grace_minutes}"


class IdleWatch(models.Model):
    """A running job found idle: when it was warned, the evidence, and when it was reclaimed."""

    job = models.OneToOneField("scheduling.Job", on_delete=models.CASCADE, primary_key=True, related_name="idle")
    warned_at = models.DateTimeField()
    evidence = models.JSONField(default=dict)
    reclaimed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"job {self.job_id} idle since warning {self.warned_at:%H:%M}"
