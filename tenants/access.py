"""Who may do what. Roles are read once per user object and cached on it for the request."""

from __future__ import annotations

from dataclasses import dataclass, field

_CACHE_ATTR = "_gpuportal_access"


@dataclass(frozen=True)
class UserAccess:
    """The roles of one user, flattened for quick checks."""

    platform_admin: bool = False
    manager: bool = False
    auditor: bool = False
    roles_by_tenant: dict[int, frozenset[str]] = field(default_factory=dict)

    @property
    def sees_all(self) -> bool:
        return self.platform_admin or self.manager


def for_user(user) -> UserAccess:
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    # tenants.models -> scoping -> access: importing the models at the top would close that loop.
    from .models import Membership, PlatformRole

    if not user.is_authenticated:
        result = UserAccess()
    else:
        platform = set(PlatformRole.objects.filter(user=user).values_list("role", flat=True))
        roles: dict[int, set[str]] = {}
        for tenant_id, role in Membership.objects.filter(user=user).values_list("tenant_id", "role"):
            roles.setdefault(tenant_id, set()).add(role)
        result = UserAccess(
            platform_admin=user.is_superuser or PlatformRole.Kind.PLATFORM_ADMIN in platform,
            manager=PlatformRole.Kind.MANAGER in platform,
            auditor=PlatformRole.Kind.AUDITOR in platform,
            roles_by_tenant={k: frozenset(v) for k, v in roles.items()},
        )
    setattr(user, _CACHE_ATTR, result)
    return result


def forget(user) -> None:
    """Drop the cached roles (after a membership change in the same request or test)."""
    if hasattr(user, _CACHE_ATTR):
        delattr(user, _CACHE_ATTR)


def sees_all_tenants(user) -> bool:
    return for_user(user).sees_all


def member_tenant_ids(user) -> list[int]:
    return list(for_user(user).roles_by_tenant)


def has_role(user, tenant_id: int, roles) -> bool:
    return bool(for_user(user).roles_by_tenant.get(tenant_id, frozenset()) & set(roles))


def reads_whole_audit_log(user) -> bool:
    """Platform admins and auditors read every audit record; tenant admins only their tenant's."""
    user_access = for_user(user)
    return user_access.platform_admin or user_access.auditor


def admin_tenant_ids(user) -> list[int]:
    # tenants.models -> scoping -> access: importing the models at the top would close that loop.
    from .models import Role

    return [t for t, roles in for_user(user).roles_by_tenant.items() if Role.TENANT_ADMIN in roles]


def can_submit(user, tenant_id: int) -> bool:
    """Researchers, approvers and tenant admins submit in their tenant; platform admins anywhere."""
    # tenants.models -> scoping -> access: importing the models at the top would close that loop.
    from .models import SUBMITTING_ROLES

    return for_user(user).platform_admin or has_role(user, tenant_id, SUBMITTING_ROLES)


def can_manage_job(user, tenant_id: int, owner_id: int | None) -> bool:
    """The owner (while still a submitting member), a tenant admin, or a platform admin may cancel a job."""
    # tenants.models -> scoping -> access: importing the models at the top would close that loop.
    from .models import SUBMITTING_ROLES, Role

    if for_user(user).platform_admin or has_role(user, tenant_id, {Role.TENANT_ADMIN}):
        return True
    return owner_id == user.pk and has_role(user, tenant_id, SUBMITTING_ROLES)
