"""The one tenant-scoping mechanism.

Every page, API endpoint and task that reads tenant data starts from ``Model.objects.visible_to(user)``.
Isolation is therefore decided here and nowhere else: a queryset a view forgot to scope would be a bug
that one grep (``objects.all()`` in a view) finds.
"""

from django.db import models

from . import access


class TenantScopedQuerySet(models.QuerySet):
    """A queryset that knows the lookup from its model to the owning tenant."""

    tenant_lookup = "tenant"

    @classmethod
    def as_manager(cls, tenant_lookup: str = "tenant"):
        queryset_class = type(cls.__name__, (cls,), {"tenant_lookup": tenant_lookup})
        return models.Manager.from_queryset(queryset_class)()

    def visible_to(self, user):
        """Rows of the tenants ``user`` may see: members see their tenants; platform roles see all."""
        if user is None or not user.is_authenticated:
            return self.none()
        if access.sees_all_tenants(user):
            return self
        return self.filter(**{f"{self.tenant_lookup}__in": access.member_tenant_ids(user)})
