"""Granting and revoking tenant memberships and platform roles: the service other apps call instead of writing
``Membership`` and ``PlatformRole`` rows themselves (the directory sync).

Each function is idempotent and says whether it changed anything, so a caller that brings a person in line
with an outside source (a directory group) can tell what it did from what was already so.

Audit: both models are registered by the audit app (``audit/apps.py``), so every row created or deleted here
becomes an audit record through the model signals, with the actor of the current audit context
(``audit.log.set_context``): the signed-in person during a request, or whoever the caller names, such as the
directory's own actor (``directory.actor``). Tenants sits below audit and cannot write the records itself;
writing them here as well would record every change twice.
"""

from __future__ import annotations

from django.db import transaction

from . import access
from .models import Membership, PlatformRole


def grant_membership(user, tenant, role: str) -> bool:
    """Give ``user`` ``role`` in ``tenant``; False if they already held it."""
    _membership, created = Membership.objects.get_or_create(user=user, tenant=tenant, role=role)
    access.forget(user)
    return created


def revoke_membership(user, tenant, role: str) -> bool:
    """Take ``role`` in ``tenant`` from ``user``; False if they did not hold it.

    Rows are deleted one by one (not by a bulk query) so that each deletion sends the signal audit records."""
    removed = False
    with transaction.atomic():
        for membership in Membership.objects.filter(user=user, tenant=tenant, role=role):
            membership.delete()
            removed = True
    access.forget(user)
    return removed


def grant_platform_role(user, role: str) -> bool:
    """Give ``user`` the platform role ``role`` (a ``PlatformRole.Kind``); False if they already held it."""
    _platform_role, created = PlatformRole.objects.get_or_create(user=user, role=role)
    access.forget(user)
    return created


def revoke_platform_role(user, role: str) -> bool:
    """Take the platform role ``role`` from ``user``; False if they did not hold it."""
    removed = False
    with transaction.atomic():
        for platform_role in PlatformRole.objects.filter(user=user, role=role):
            platform_role.delete()
            removed = True
    access.forget(user)
    return removed
