"""Bringing a person in line with the directory: their memberships and platform roles from their groups, and
whether they may sign in at all. Sign-in (LDAP and OpenID Connect) and the periodic sync both come here.

Rules:

* Only what the directory granted (a ``DirectoryGrant``) is ever taken back; a membership an administrator
  made by hand is left alone, even when the person's groups do not (or no longer) give it.
* A person disabled in the directory, or gone from it, is made inactive: Django refuses them at sign-in and
  the API refuses their tokens (``accounts.tokens.check``). They lose what the directory granted. They become
  active again only if it was the directory that disabled them (``disabled_by_directory``).
* Every change is written through ``tenants.memberships`` inside ``acting_as_directory``, so each one is an
  audit record whose actor is "directory".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from audit import log as audit
from audit.models import AuditAction
from tenants import memberships
from tenants.models import Tenant

from .actor import DIRECTORY_ACTOR, acting_as_directory
from .groups import Access, access_for_groups
from .models import DirectoryAccount, DirectoryGrant

logger = logging.getLogger(__name__)

@dataclass
class Changes:
    """What one sync of one person changed (empty lists: nothing)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    deactivated: bool = False
    reactivated: bool = False

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.deactivated or self.reactivated)


def link_account(user, source: str, identifier: str, issuer: str = "") -> DirectoryAccount:
    """Remember that ``user`` is the directory's ``identifier`` (a DN, or an issuer's subject)."""
    account, created = DirectoryAccount.objects.get_or_create(user=user, defaults={
        "source": source, "identifier": identifier, "issuer": issuer, "last_seen_at": timezone.now()})
    if not created:
        account.source, account.identifier, account.issuer = source, identifier, issuer
        account.last_seen_at = timezone.now()
        account.save(update_fields=["source", "identifier", "issuer", "last_seen_at", "last_updated"])
    return account


def _grant_label(tenants: dict, tenant_id, role, platform_role) -> str:
    return f"{tenants[tenant_id].name}:{role}" if tenant_id else f"platform:{platform_role}"


def apply_access(user, wanted: Access, changes: Changes | None = None) -> Changes:
    """Give ``user`` what ``wanted`` holds and take back what the directory granted that it no longer holds."""
    changes = Changes() if changes is None else changes
    tenant_ids = {tenant_id for tenant_id, _role in wanted.memberships}
    grants = list(DirectoryGrant.objects.filter(user=user))
    tenant_ids |= {g.tenant_id for g in grants if g.tenant_id}
    tenants = Tenant.objects.in_bulk(tenant_ids)
    with transaction.atomic():
        for tenant_id, role in sorted(wanted.memberships):
            if memberships.grant_membership(user, tenants[tenant_id], role):
                DirectoryGrant.objects.get_or_create(user=user, tenant_id=tenant_id, role=role)
                changes.added.append(_grant_label(tenants, tenant_id, role, ""))
        for platform_role in sorted(wanted.platform_roles):
            if memberships.grant_platform_role(user, platform_role):
                DirectoryGrant.objects.get_or_create(user=user, tenant=None, platform_role=platform_role)
                changes.added.append(_grant_label(tenants, None, "", platform_role))
        for grant in grants:
            if grant.tenant_id and (grant.tenant_id, grant.role) not in wanted.memberships:
                memberships.revoke_membership(user, tenants[grant.tenant_id], grant.role)
            elif not grant.tenant_id and grant.platform_role not in wanted.platform_roles:
                memberships.revoke_platform_role(user, grant.platform_role)
            else:
                continue
            grant.delete()
            changes.removed.append(_grant_label(tenants, grant.tenant_id, grant.role, grant.platform_role))
    return changes


def bring_in_line(user, account: DirectoryAccount, groups, *, enabled: bool, reason: str,
                  address: str = "") -> Changes:
    """One person against the directory: ``groups`` they are in, and whether the directory lets them in.

    Returns what changed; ``user.is_active`` afterwards says whether they may sign in."""
    changes = Changes()
    if user.username == DIRECTORY_ACTOR:
        return changes
    with acting_as_directory(address), transaction.atomic():
        if not enabled:
            apply_access(user, Access(), changes)
            if user.is_active:
                _set_active(user, account, False, reason)
                changes.deactivated = True
        else:
            if not user.is_active and account.disabled_by_directory:
                _set_active(user, account, True, reason)
                changes.reactivated = True
            apply_access(user, access_for_groups(groups), changes)
    if changes.any:
        logger.info("directory: %s %s", user.get_username(), {
            "added": changes.added, "removed": changes.removed, "deactivated": changes.deactivated,
            "reactivated": changes.reactivated, "reason": reason})
    return changes


def _set_active(user, account: DirectoryAccount, active: bool, reason: str) -> None:
    user.is_active = active
    user.save(update_fields=["is_active"])
    account.disabled_by_directory = not active
    account.save(update_fields=["disabled_by_directory", "last_updated"])
    audit.record(AuditAction.USER_REACTIVATE if active else AuditAction.USER_DEACTIVATE, user, reason=reason,
                 before={"is_active": not active}, after={"is_active": active})
