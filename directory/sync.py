"""Bringing a person in line with the directory: their memberships and platform roles from their groups, and
whether they may sign in at all. Sign-in (LDAP and OpenID Connect) and the periodic sync both come here.

Rules:

* Only what the directory granted (a ``DirectoryGrant``) is ever taken back; a membership an administrator
  made by hand is left alone, even when the person's groups do not (or no longer) give it.
* A person disabled in the directory, or gone from it, is made inactive: Django refuses them at sign-in and
  the API refuses their tokens (``accounts.tokens.check``). They lose what the directory granted. They become
  active again only if it was the directory that disabled them (``disabled_by_directory``).
* A sign-in lands only in the account already linked to its identity (source, issuer, DN or subject) or in a
  new one: never in a local account that happens to carry the name, one linked to another identity, or a
  superuser's (``link_account``). Those are refused and audited; a platform admin links explicitly
  (``link_identity``, ``manage.py link_account``).
* Every change is written through ``tenants.memberships`` inside ``acting_as_directory``, so each one is an
  audit record whose actor is "directory".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from directory.actor import DIRECTORY_ACTOR, acting_as_directory
from directory.groups import Access, access_for_groups
from directory.models import DirectoryAccount, DirectoryGrant
from gpuportal.text.phrases import Phrase
from tenants import memberships
from tenants.models import Tenant

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


class LinkRefused(Exception):
    """A directory identity may not have this account: it is someone else's (a local account, one linked to
    another identity) or a superuser's. Sign-in refuses rather than let a directory decide who a local account
    belongs to; a platform admin links accounts explicitly (``link_identity``)."""

    def __init__(self, username: str, reason: str):
        super().__init__(reason)
        self.username, self.reason = username, reason


def linked_user(source: str, identifier: str, issuer: str = ""):
    """The account linked to this directory identity, or None."""
    account = DirectoryAccount.objects.filter(source=source, issuer=issuer, identifier=identifier).select_related(
        "user").first()
    return account.user if account is not None else None


def name_taken(username: str) -> bool:
    """Whether a new account may not be called ``username`` (names are compared without case, as sign-in
    looks them up)."""
    return username.lower() == DIRECTORY_ACTOR or get_user_model().objects.filter(username__iexact=username).exists()


def link_account(user, source: str, identifier: str, issuer: str = "") -> DirectoryAccount:
    """At sign-in: remember that ``user`` is the directory's ``identifier`` (a DN, or an issuer's subject).

    Only an account with no link yet (the one the sign-in has just created) or one already linked to this same
    identity; anything else raises LinkRefused, so no sign-in ever moves an account from one identity to
    another or takes one over. Superusers never: they are the way in when the directory is wrong."""
    if user.is_superuser:
        raise LinkRefused(user.get_username(), gettext_noop("the account is a superuser's"))
    try:
        with transaction.atomic():
            account, created = DirectoryAccount.objects.get_or_create(user=user, defaults={
                "source": source, "identifier": identifier, "issuer": issuer, "last_seen_at": timezone.now()})
    except IntegrityError as error:  # the identity is linked to another account
        raise LinkRefused(user.get_username(), gettext_noop("the identity is linked to another account")) from error
    if not created:
        if (account.source, account.issuer, account.identifier) != (source, issuer, identifier):
            raise LinkRefused(user.get_username(), gettext_noop("the account is linked to another identity"))
        account.last_seen_at = timezone.now()
        account.save(update_fields=["last_seen_at", "last_updated"])
    return account


def refuse_link(refusal: LinkRefused, source: str, identifier: str, issuer: str = "", address: str = "") -> None:
    """Write down a refused sign-in (``DIRECTORY_LINK_REFUSED``): which identity wanted which account, and why."""
    logger.warning("directory sign-in of %s %s refused: the account %s is not theirs (%s)", source, identifier,
                   refusal.username, refusal.reason)
    user = get_user_model().objects.filter(username__iexact=refusal.username).first()
    with acting_as_directory(address):
        audit.record(AuditAction.DIRECTORY_LINK_REFUSED, user, object_type="auth.user", object_repr=refusal.username,
                     reason=Phrase(refusal.reason),
                     after={"source": source, "issuer": issuer, "identifier": identifier})


def link_identity(user, source: str, identifier: str, issuer: str = "") -> DirectoryAccount:
    """A platform admin's explicit link (``manage.py link_account``): ``user`` is this directory identity from now
    on, whatever they were linked to before; audited (``DIRECTORY_LINK``, before and after).

    Raises LinkRefused for a superuser (never a directory account: see ``link_account``), for the directory's own
    actor, and for an identity another account holds (that one must not lose it silently)."""
    username = user.get_username()
    if user.is_superuser:
        raise LinkRefused(username, gettext_noop("the account is a superuser's"))
    if username == DIRECTORY_ACTOR:
        raise LinkRefused(username, gettext_noop("the account is the directory's own"))
    holder = linked_user(source, identifier, issuer)
    if holder is not None and holder.pk != user.pk:
        raise LinkRefused(holder.get_username(), gettext_noop("the identity is linked to another account"))
    fields = ("source", "issuer", "identifier")
    with transaction.atomic():
        account = DirectoryAccount.objects.select_for_update().filter(user=user).first()
        before = {name: getattr(account, name) for name in fields} if account else None
        if account is None:
            account = DirectoryAccount(user=user)
        account.source, account.issuer, account.identifier = source, issuer, identifier
        account.save()
        after = {name: getattr(account, name) for name in fields}
        if before != after:
            audit.record(AuditAction.DIRECTORY_LINK, user, before=before, after=after,
                         reason=Phrase(gettext_noop("linked by a platform admin")))
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
