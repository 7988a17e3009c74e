"""The group mapping: how a directory group is compared, what a set of groups grants, and the one way to add or
remove a mapping (the portal page and ``manage.py map_group`` both call it).

Groups are compared in a normal form: an LDAP DN is parsed and written back without the spaces a person may
type after commas, and everything is compared without regard to case (LDAP compares DNs that way, and the
DNs django-auth-ldap returns are lower case). A groups-claim value that is not a DN is compared the same
way, without case.
"""

from __future__ import annotations

from dataclasses import dataclass

import ldap.dn
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from directory.models import GROUP_MAX_LENGTH, GroupMapping
from tenants.models import PlatformRole, Role, Tenant


def normalize_dn(dn: str) -> str:
    """A DN in its canonical spelling (no spaces around separators), lower case."""
    dn = dn.strip()
    try:
        return ldap.dn.dn2str(ldap.dn.str2dn(dn)).lower()
    except ldap.DECODING_ERROR:
        return dn.lower()  # not a DN after all: an OpenID Connect claim value may contain "="


def normalize_group(group: str) -> str:
    """The form groups are compared in: a DN as ``normalize_dn`` writes it, anything else in lower case."""
    group = group.strip()
    return normalize_dn(group) if "=" in group else group.lower()


@dataclass(frozen=True)
class Access:
    """What a set of directory groups grants: (tenant id, role) pairs and platform roles."""

    memberships: frozenset[tuple[int, str]] = frozenset()
    platform_roles: frozenset[str] = frozenset()


def access_for_groups(groups) -> Access:
    """The memberships and platform roles the mapping gives someone in ``groups``."""
    keys = {normalize_group(group) for group in groups if group and group.strip()}
    if not keys:
        return Access()
    memberships, platform_roles = set(), set()
    for tenant_id, role, platform_role in GroupMapping.objects.filter(group_key__in=keys).values_list(
            "tenant_id", "role", "platform_role"):
        if tenant_id is not None:
            memberships.add((tenant_id, role))
        else:
            platform_roles.add(platform_role)
    return Access(frozenset(memberships), frozenset(platform_roles))


def add_mapping(group: str, tenant: str = "", role: str = "", platform_role: str = "") -> GroupMapping:
    """Map ``group`` to ``role`` in the tenant named ``tenant``, or to ``platform_role``.

    Raises ValidationError naming each field that is wrong (the page keeps what was typed and shows them)."""
    errors: dict[str, str] = {}
    group = (group or "").strip()
    if not group:
        errors["group"] = _("Give the group: an LDAP group's DN or a value of the groups claim.")
    elif len(group) > GROUP_MAX_LENGTH:
        errors["group"] = _("The group must be at most %(max)d characters (got %(n)d).") % {
            "max": GROUP_MAX_LENGTH, "n": len(group)}
    tenant_name, tenant = (tenant or "").strip(), None
    if platform_role:
        if tenant_name or role:
            errors["platform_role"] = _("Map a group either to a role in a tenant or to a platform role, not both.")
        elif platform_role not in PlatformRole.Kind.values:
            errors["platform_role"] = _("Unknown platform role %(role)s; choose one of: %(roles)s.") % {
                "role": platform_role, "roles": ", ".join(PlatformRole.Kind.values)}
    else:
        if not tenant_name:
            errors["tenant"] = _("Give a tenant (with a role), or a platform role.")
        else:
            tenant = Tenant.objects.filter(name=tenant_name).first()
            if tenant is None:
                errors["tenant"] = _("There is no tenant named %(name)s.") % {"name": tenant_name}
        if role not in Role.values:
            errors["role"] = _("Choose a role: %(roles)s.") % {"roles": ", ".join(Role.values)}
    if errors:
        raise ValidationError(errors)
    key = normalize_group(group)
    target = {"tenant": tenant, "role": role} if tenant else {"tenant": None, "platform_role": platform_role}
    if GroupMapping.objects.filter(group_key=key, **target).exists():
        raise ValidationError({"group": _("This group is already mapped to that.")})
    try:
        with transaction.atomic():
            return GroupMapping.objects.create(group=group, group_key=key, **target)
    except IntegrityError as error:  # the same mapping added at the same moment by someone else
        raise ValidationError({"group": _("This group is already mapped to that.")}) from error


def remove_mapping(mapping: GroupMapping) -> None:
    """Remove a mapping; people lose what it gave them at their next sign-in or the next sync."""
    mapping.delete()
