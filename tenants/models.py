"""Tenants, projects, who may do what, and how many GPUs each tenant may hold."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from gpuportal.models import TimeStampedModel
from gpuportal.text.names import dns_label

# The roles are defined in roles.py (access and scoping read them without the models); the models that store
# them name them here too, so ``tenants.models.Role`` is the same enumeration.
from .roles import PlatformRoleKind
from .roles import Role as Role
from .scoping import TenantScopedQuerySet


class Department(TimeStampedModel):
    """An optional level above tenants: its quota per GPU model caps the sum of its tenants' use."""

    name = models.SlugField(_("name"), max_length=64, unique=True)
    display_name = models.CharField(_("display name"), max_length=200, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("department")
        verbose_name_plural = _("departments")

    def __str__(self):
        return self.name


class DepartmentQuota(TimeStampedModel):
    """The most GPUs of one model a department's tenants may hold together."""

    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="quotas")
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    limit_gpus = models.PositiveIntegerField(_("limit GPUs"))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["department", "gpu_model"], name="department_quota_unique")]
        verbose_name = _("department quota")
        verbose_name_plural = _("department quotas")

    def __str__(self):
        return f"{self.department}: {self.gpu_model} {self.limit_gpus}"


class Tenant(TimeStampedModel):
    """An organisation (a lab, a team) that owns quota, projects and jobs: the unit of isolation.

    Nobody outside a tenant sees its jobs; every read goes through ``visible_to(user)``.
    """

    name = models.SlugField(_("name"), max_length=64, unique=True)
    display_name = models.CharField(_("display name"), max_length=200, blank=True)
    description = models.TextField(_("description"), blank=True)
    fair_share_weight = models.PositiveIntegerField(
        _("fair-share weight"), default=1, help_text=_("Relative share when tenants compete for idle GPUs.")
    )
    department = models.ForeignKey(Department, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="tenants", verbose_name=_("department"))

    objects = TenantScopedQuerySet.as_manager(tenant_lookup="pk")

    class Meta:
        ordering = ["name"]
        verbose_name = _("tenant")
        verbose_name_plural = _("tenants")

    def __str__(self):
        return self.name

    def clean(self):
        """Two tenants never share a Kubernetes namespace: "ml_lab" and "ml-lab", or "Vision" and "vision",
        map to one (``gpuportal.text.names.dns_label``), where each would see and touch the other's pods."""
        super().clean()
        label = dns_label(self.name or "")
        clash = next((t.name for t in Tenant.objects.exclude(pk=self.pk).only("name") if dns_label(t.name) == label),
                     None)
        if clash:
            raise ValidationError({"name": _(
                "Tenant %(other)s already has the namespace this name maps to (%(label)s): choose a name that "
                "differs from it in more than case, hyphens or underscores.") % {"other": clash, "label": label}})


class Project(TimeStampedModel):
    """A piece of work inside a tenant; usage is attributed to it in reports."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="projects", verbose_name=_("tenant"))
    name = models.SlugField(_("name"), max_length=64)
    description = models.TextField(_("description"), blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__name", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="project_unique_name_per_tenant")]
        verbose_name = _("project")
        verbose_name_plural = _("projects")

    def __str__(self):
        return f"{self.tenant.name}/{self.name}"


class Membership(TimeStampedModel):
    """A user's role in a tenant. A user may hold several roles in one tenant (researcher and approver)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(_("role"), max_length=20, choices=Role.choices, default=Role.RESEARCHER)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant", "role"], name="membership_unique_role"),
        ]
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")

    def __str__(self):
        return f"{self.user} — {self.get_role_display()} @ {self.tenant}"


class PlatformRole(TimeStampedModel):
    """A role above tenants.

    ``platform_admin`` sees and changes every tenant (read-write); ``manager`` sees every tenant's jobs,
    quotas and reports but changes nothing (read-only).
    """

    Kind = PlatformRoleKind

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="platform_roles")
    role = models.CharField(_("role"), max_length=20, choices=Kind.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "role"], name="platform_role_unique")]
        verbose_name = _("platform role")
        verbose_name_plural = _("platform roles")

    def __str__(self):
        return f"{self.user} — {self.get_role_display()}"


class QuotaBurst(TimeStampedModel):
    """``extra_gpus`` above a tenant's limit for one GPU model from ``start`` to ``end`` (an approved burst
    request); the scheduler adds it to the limit while it lasts."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="bursts")
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    extra_gpus = models.PositiveIntegerField(_("extra GPUs"))
    start = models.DateTimeField(_("start"))
    end = models.DateTimeField(_("end"))
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["start"]
        constraints = [models.CheckConstraint(condition=Q(end__gt=F("start")), name="burst_ends_after_start")]
        verbose_name = _("quota burst")
        verbose_name_plural = _("quota bursts")

    def __str__(self):
        return f"{self.tenant}: +{self.extra_gpus} {self.gpu_model} until {self.end:%Y-%m-%d %H:%M}"


class Quota(TimeStampedModel):
    """GPUs of one model a tenant may hold at once.

    ``guaranteed_gpus`` are the tenant's own and always available to it; up to ``limit_gpus`` it may borrow
    idle GPUs of others. A tenant with no Quota row for a GPU model may not use that model.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas", verbose_name=_("tenant"))
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    guaranteed_gpus = models.PositiveIntegerField(_("guaranteed GPUs"), default=0)
    limit_gpus = models.PositiveIntegerField(_("limit GPUs"), default=0)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__name", "gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "gpu_model"], name="quota_unique_per_model"),
            models.CheckConstraint(condition=Q(limit_gpus__gte=F("guaranteed_gpus")), name="quota_limit_ge_guaranteed"),
        ]
        verbose_name = _("quota")
        verbose_name_plural = _("quotas")

    def __str__(self):
        return f"{self.tenant}: {self.gpu_model} {self.guaranteed_gpus}/{self.limit_gpus}"
