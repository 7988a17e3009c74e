"""The append-only, tamper-evident audit log of governance actions.

Each record carries ``hash`` = HMAC-SHA256, with a key kept outside the database, over its own content and
the previous record's hash, so editing or removing any record breaks the chain from there on, and whoever
owns the tables cannot re-hash what they changed (``manage.py verify_audit`` names the first bad record).
Records written before the chain was keyed (``key_version`` 0) keep their plain SHA-256. On PostgreSQL
triggers refuse UPDATE, DELETE and TRUNCATE; ``AuditChainHead`` remembers the last sequence number, hash, time
and the record count under a MAC of its own, so removing the newest records is caught too, and its head is
exported to a file or syslog the database cannot reach (``audit.heads``), which catches a truncated or wholly
rewritten log, and an older head row put back.
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from gpuportal.text import phrases
from tenants import access
from tenants.scoping import TenantScopedQuerySet


class AuditAction(models.TextChoices):
    QUOTA_CHANGE = "quota.change", _("Quota changed")
    MEMBERSHIP_ADD = "membership.add", _("Membership added")
    MEMBERSHIP_CHANGE = "membership.change", _("Membership changed")
    MEMBERSHIP_REMOVE = "membership.remove", _("Membership removed")
    PLATFORM_ROLE_ADD = "platform_role.add", _("Platform role granted")
    PLATFORM_ROLE_REMOVE = "platform_role.remove", _("Platform role removed")
    REQUEST_APPROVE = "request.approve", _("Request approved")
    REQUEST_DENY = "request.deny", _("Request denied")
    REQUEST_EXPIRE = "request.expire", _("Request expired")
    RESERVATION_CREATE = "reservation.create", _("Reservation created")
    RESERVATION_CHANGE = "reservation.change", _("Reservation changed")
    RESERVATION_DELETE = "reservation.delete", _("Reservation removed")
    JOB_PREEMPT = "job.preempt", _("Job preempted")
    JOB_CANCEL = "job.cancel", _("Job cancelled by someone else")
    JOB_RECLAIM = "job.reclaim", _("Idle job reclaimed")
    JOB_CLEAR_AVOIDANCE = "job.clear_avoidance", _("Job's node avoidance cleared")
    CLUSTER_CHANGE = "cluster.change", _("Cluster changed")
    NODE_ADMIN = "node.admin", _("Node administration")
    TOKEN_ISSUE = "token.issue", _("Agent token issued")
    REPORT_REGENERATE = "report.regenerate", _("Frozen report regenerated")
    RECONCILE_RELEASE = "reconcile.release", _("GPUs released by the reconciler")
    USER_DEACTIVATE = "user.deactivate", _("Account disabled by the directory")
    USER_REACTIVATE = "user.reactivate", _("Account enabled again by the directory")
    USER_PRIVILEGE_CHANGE = "user.privilege", _("Account's privileges changed")
    USER_GROUPS_CHANGE = "user.groups", _("Account's groups or permissions changed")
    API_TOKEN_CREATE = "api_token.create", _("API token created")
    API_TOKEN_REVOKE = "api_token.revoke", _("API token revoked")
    DIRECTORY_MAPPING_CHANGE = "directory.mapping", _("Directory group mapping changed")
    DIRECTORY_LINK = "directory.link", _("Directory identity linked to an account")
    DIRECTORY_LINK_REFUSED = "directory.link_refused", _("Directory sign-in refused: name taken by a local account")
    TEMPLATE_CREATE = "template.create", _("Job template created")
    TEMPLATE_VERSION = "template.version", _("Job template version added")
    TEMPLATE_ARCHIVE = "template.archive", _("Job template archived")
    IMPROVEMENT_CREATE = "improvement.create", _("Improvement action created")
    IMPROVEMENT_CHANGE = "improvement.change", _("Improvement action changed")
    IMPROVEMENT_DELETE = "improvement.delete", _("Improvement action removed")
    ACCEPTANCE_NOTE = "acceptance.note", _("Acceptance evidence added")


class AuditQuerySet(TenantScopedQuerySet):
    def visible_to(self, user):
        """Platform admins and auditors: all records; tenant admins: their tenants' records; others: none."""
        if user is None or not user.is_authenticated:
            return self.none()
        if access.reads_whole_audit_log(user):
            return self
        return self.filter(tenant__in=access.admin_tenant_ids(user))


class AuditRecord(models.Model):
    seq = models.PositiveBigIntegerField(_("sequence"), unique=True)
    at = models.DateTimeField(_("time"), db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                              related_name="+")
    actor_name = models.CharField(_("actor"), max_length=150, help_text=_("Kept as text: users may be renamed."))
    action = models.CharField(_("action"), max_length=40, choices=AuditAction.choices, db_index=True)
    object_type = models.CharField(_("object type"), max_length=60)
    object_id = models.CharField(_("object id"), max_length=64, blank=True)
    object_repr = models.CharField(_("object"), max_length=300)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    before = models.JSONField(_("before"), null=True, blank=True)
    after = models.JSONField(_("after"), null=True, blank=True)
    reason = models.TextField(_("reason"), blank=True)
    # The reason's message id and parameters when the portal wrote it (``gpuportal.text.phrases``), so the page reads
    # it in the reader's language; null for a reason a person typed. Hashed with the record when present.
    reason_phrase = models.JSONField(_("reason as a phrase"), null=True, blank=True)
    source_address = models.CharField(_("source address"), max_length=64, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # 0: plain SHA-256 (records from before the chain was keyed); n > 0: HMAC-SHA256 with key version n.
    key_version = models.PositiveSmallIntegerField(_("key version"), default=0)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-seq"]
        verbose_name = _("audit record")
        verbose_name_plural = _("audit records")

    def __str__(self):
        return f"#{self.seq} {self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or '-'} {self.action} {self.object_repr}"

    @property
    def reason_text(self) -> str:
        """The reason in the reader's language when the portal wrote it as a phrase; as stored otherwise."""
        return phrases.read(self.reason, {phrases.DATA_KEY: self.reason_phrase} if self.reason_phrase else None)


class AuditChainHead(models.Model):
    """One row: the newest record's sequence number, hash and time, and how many records there are.

    Deleting the newest records shows here, unless the owner also puts back an older copy of this row (its MAC
    is valid): that shows only against an anchor outside the database, the heads exported by ``audit.heads``,
    which is why the count and the time are under the MAC too and go out with every export."""

    last_seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, blank=True)
    # Records from here on must be keyed: moving it (to pass re-hashed records off as old ones) breaks ``mac``.
    keyed_from_seq = models.PositiveBigIntegerField(default=1)
    record_count = models.PositiveBigIntegerField(default=0)
    last_at = models.DateTimeField(null=True, blank=True)
    # HMAC of the fields above: a head rewritten without the key shows.
    mac = models.CharField(max_length=64, blank=True)

    def __str__(self):
        return f"audit head #{self.last_seq}"
