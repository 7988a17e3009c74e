"""Who may do what: every permission of the portal as a named predicate over a user (``is_platform_admin``,
``can_manage_tenant``, ``can_decide``, …), and ``platform_admin_required`` for the views only platform admins
use. Views, the API and services ask these rather than reading roles themselves, so a rule changes in one place.

A user's roles are read once per user object and cached on it for the request. They are read through the
user's own relations (``user.memberships``, ``user.platform_roles``), not the models: ``tenants.models`` builds
its managers on ``scoping``, which asks this module, so importing the models here would close a loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import wraps

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied

from gpuportal.storage.planned import ONE_ID, PlannedRows

from .roles import SUBMITTING_ROLES, PlatformRoleKind, Role

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


#: Every signed-in request reads these (by the user's relations, unordered: the memberships' default order joined
#: two tables to sort rows that go into a set), compiled to SQL once per process.
_PLATFORM_ROLES = PlannedRows(lambda user_id: get_user_model()(pk=user_id).platform_roles.order_by().values_list(
    "role"), samples=ONE_ID)
_MEMBERSHIPS = PlannedRows(lambda user_id: get_user_model()(pk=user_id).memberships.order_by().values_list(
    "tenant_id", "role"), samples=ONE_ID)


def for_user(user) -> UserAccess:
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    if not user.is_authenticated:
        result = UserAccess()
    else:
        platform = {role for (role,) in _PLATFORM_ROLES(user.pk)}
        roles: dict[int, set[str]] = {}
        for tenant_id, role in _MEMBERSHIPS(user.pk):
            roles.setdefault(tenant_id, set()).add(role)
        result = UserAccess(
            platform_admin=user.is_superuser or PlatformRoleKind.PLATFORM_ADMIN in platform,
            manager=PlatformRoleKind.MANAGER in platform,
            auditor=PlatformRoleKind.AUDITOR in platform,
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


def has_role(user, tenant_id: int | None, roles) -> bool:
    return bool(for_user(user).roles_by_tenant.get(tenant_id, frozenset()) & set(roles))


def is_platform_admin(user) -> bool:
    """Platform admins (and superusers) see and change every tenant."""
    return for_user(user).platform_admin


def is_tenant_admin(user, tenant_id: int | None) -> bool:
    """An admin of that tenant (None, the platform's own things, has no tenant admin)."""
    return has_role(user, tenant_id, {Role.TENANT_ADMIN})


def can_manage_tenant(user, tenant_id: int | None) -> bool:
    """A platform admin, or an admin of that tenant: who manages its templates and releases an admin hold."""
    return is_platform_admin(user) or is_tenant_admin(user, tenant_id)


def can_decide(user, tenant_id: int, platform_wide: bool) -> bool:
    """Who decides a request by the roles they hold: a platform admin any request, an approver of the tenant one
    whose effect stays inside it. (Nobody decides their own request or one about their own job: the
    request's rules say that, whatever the roles.)"""
    if is_platform_admin(user):
        return True
    return not platform_wide and has_role(user, tenant_id, {Role.APPROVER})


def reads_whole_audit_log(user) -> bool:
    """Platform admins and auditors read every audit record; tenant admins only their tenant's."""
    user_access = for_user(user)
    return user_access.platform_admin or user_access.auditor


def admin_tenant_ids(user) -> list[int]:
    return [t for t, roles in for_user(user).roles_by_tenant.items() if Role.TENANT_ADMIN in roles]


def can_submit(user, tenant_id: int) -> bool:
    """Researchers, approvers and tenant admins submit in their tenant; platform admins anywhere."""
    return is_platform_admin(user) or has_role(user, tenant_id, SUBMITTING_ROLES)


def can_manage_job(user, tenant_id: int, owner_id: int | None) -> bool:
    """The owner (while still a submitting member), a tenant admin, or a platform admin may cancel a job."""
    if can_manage_tenant(user, tenant_id):
        return True
    return owner_id == user.pk and has_role(user, tenant_id, SUBMITTING_ROLES)


def platform_admin_required(view=None, *, message=None):
    """For a view only platform admins use: anyone else is refused (403, with ``message`` when given, which the
    error page shows). Put it under ``login_required``, which sends a visitor who is not signed in to sign in.
    Used bare (``@platform_admin_required``) or with a message (``@platform_admin_required(message=...)``)."""

    def decorate(function):
        @wraps(function)
        def checked(request, *args, **kwargs):
            if not is_platform_admin(request.user):
                raise PermissionDenied(*([message] if message is not None else []))
            return function(request, *args, **kwargs)

        return checked

    return decorate(view) if view is not None else decorate
