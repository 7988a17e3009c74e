"""What the directory decides and what it did: the group mapping platform admins edit, the people who signed
in through a directory, and the memberships and platform roles the directory granted them.

Memberships themselves belong to ``tenants`` and are written only through ``tenants.memberships``; the rows
here remember which of them came from the directory, so that a sync removes those and never a membership an
administrator made by hand.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from gpuportal.models import TimeStampedModel
from tenants.models import PlatformRole, Role, Tenant

GROUP_MAX_LENGTH = 500


class GroupMapping(TimeStampedModel):
    """One directory group → a role in one tenant, or → a platform role.

    ``group`` is an LDAP group's DN or a value of the OpenID Connect groups claim, kept as typed; ``group_key``
    is its normal form (``directory.groups.normalize_group``), which is what sign-in and sync compare."""

    group = models.CharField(_("directory group"), max_length=GROUP_MAX_LENGTH)
    group_key = models.CharField(max_length=GROUP_MAX_LENGTH, db_index=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="+",
                               verbose_name=_("tenant"))
    role = models.CharField(_("role"), max_length=20, choices=Role.choices, blank=True)
    platform_role = models.CharField(_("platform role"), max_length=20, choices=PlatformRole.Kind.choices, blank=True)

    class Meta:
        ordering = ["group_key", "tenant__name", "role", "platform_role"]
        constraints = [
            # Either a tenant and a role, or a platform role alone.
            models.CheckConstraint(name="group_mapping_one_target", condition=(
                (Q(tenant__isnull=False, platform_role="") & ~Q(role=""))
                | (Q(tenant__isnull=True, role="") & ~Q(platform_role="")))),
            models.UniqueConstraint(fields=["group_key", "tenant", "role"], condition=Q(tenant__isnull=False),
                                    name="group_mapping_unique_membership"),
            models.UniqueConstraint(fields=["group_key", "platform_role"], condition=Q(tenant__isnull=True),
                                    name="group_mapping_unique_platform_role"),
        ]
        verbose_name = _("group mapping")
        verbose_name_plural = _("group mappings")

    def __str__(self):
        if self.tenant_id:
            return f"{self.group} → {self.tenant.name}: {self.get_role_display()}"
        return f"{self.group} → {self.get_platform_role_display()}"


class AccountSource(models.TextChoices):
    LDAP = "ldap", _("LDAP")
    OIDC = "oidc", _("OpenID Connect")


class DirectoryAccount(TimeStampedModel):
    """A person who signed in through a directory, and who they are there: their DN (LDAP) or the issuer's
    subject (OpenID Connect). The sync visits exactly these people; local accounts are never touched."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="directory_account")
    source = models.CharField(_("source"), max_length=10, choices=AccountSource.choices)
    issuer = models.CharField(_("issuer"), max_length=500, blank=True)
    identifier = models.CharField(_("identifier"), max_length=GROUP_MAX_LENGTH,
                                  help_text=_("The DN in LDAP, the subject of the OpenID Connect issuer."))
    # True when the directory (not an administrator) made the Django user inactive: only then does the
    # directory make them active again once they are enabled there.
    disabled_by_directory = models.BooleanField(_("disabled by the directory"), default=False)
    last_seen_at = models.DateTimeField(_("last seen in the directory"), null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "issuer", "identifier"],
                                               name="directory_account_unique_identity")]
        verbose_name = _("directory account")
        verbose_name_plural = _("directory accounts")

    def __str__(self):
        return f"{self.user} ({self.get_source_display()}: {self.identifier})"


class DirectoryGrant(models.Model):
    """A membership or platform role that the directory gave a person (and so may take back)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="directory_grants")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    role = models.CharField(max_length=20, choices=Role.choices, blank=True)
    platform_role = models.CharField(max_length=20, choices=PlatformRole.Kind.choices, blank=True)
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant", "role"], condition=Q(tenant__isnull=False),
                                    name="directory_grant_unique_membership"),
            models.UniqueConstraint(fields=["user", "platform_role"], condition=Q(tenant__isnull=True),
                                    name="directory_grant_unique_platform_role"),
        ]

    def __str__(self):
        target = f"{self.tenant}: {self.role}" if self.tenant_id else self.platform_role
        return f"{self.user} — {target}"
