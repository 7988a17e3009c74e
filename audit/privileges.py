"""Audit every change of what an account may do, wherever it is made: the Django admin, a shell, a management
command (``createsuperuser``, ``api_token``), the directory, the portal's pages and API.

Covered: the superuser, staff and active flags of a user (a user created with either of the first two is a
grant too), a user's groups and permissions, a group's permissions (a grant to all its members), and API
tokens created and revoked. Model signals rather than the views, because a flag flipped in ``manage.py shell``
grants as much as one flipped on a page; the state before is read from the stored rows, not from what the
caller believes it changed. Tokens are announced by ``accounts.tokens`` (its ``token_issued`` and
``tokens_revoked`` signals: accounts sits below audit and names no one who listens). The actor is the
request's user where there is one (``audit.log``), else whoever the caller names, else no one ("the portal":
a shell or a command). Not seen: ``QuerySet.update()`` and raw SQL on these fields, which send no signal; the
portal changes none of them that way.

Records of accounts, groups and tokens belong to no tenant: platform admins and auditors read them, tenant
admins do not (``AuditQuerySet.visible_to``).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_save, pre_save
from django.dispatch import receiver

from accounts import tokens

from . import log as audit
from .models import AuditAction

User = get_user_model()
FLAGS = ("is_superuser", "is_staff", "is_active")
_BEFORE = "_audit_privileges_before"


@receiver(pre_save, sender=User, dispatch_uid="audit.privileges_before")
def _flags_before(sender, instance, update_fields=None, **kwargs):
    setattr(instance, _BEFORE, None)
    if instance.pk is None or (update_fields is not None and not set(update_fields) & set(FLAGS)):
        return  # a new user, or a save of other fields (last_login at every sign-in): no query
    setattr(instance, _BEFORE, User.objects.filter(pk=instance.pk).values(*FLAGS).first())


@receiver(post_save, sender=User, dispatch_uid="audit.privileges_after")
def _flags_after(sender, instance, created, update_fields=None, **kwargs):
    before = None if created else getattr(instance, _BEFORE, None)
    setattr(instance, _BEFORE, None)
    after = {flag: getattr(instance, flag) for flag in FLAGS}
    if created:
        if not (instance.is_superuser or instance.is_staff):
            return  # an ordinary account: its grants are memberships and roles, audited where they are made
    elif before is None or before == after:
        return
    audit.record(AuditAction.USER_PRIVILEGE_CHANGE, instance, before=before, after=after)


# --- groups and permissions ---------------------------------------------------------------------------------

def _permission_names(through, owner_field: str, owner_ids) -> dict[int, list[str]]:
    rows = through.objects.filter(**{f"{owner_field}__in": owner_ids}).values_list(
        owner_field, "permission__content_type__app_label", "permission__codename")
    names: dict[int, list[str]] = {pk: [] for pk in owner_ids}
    for owner, app_label, codename in rows:
        names[owner].append(f"{app_label}.{codename}")
    return {pk: sorted(values) for pk, values in names.items()}


def _group_names(through, owner_field: str, owner_ids) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {pk: [] for pk in owner_ids}
    for owner, name in through.objects.filter(**{f"{owner_field}__in": owner_ids}).values_list(owner_field,
                                                                                             "group__name"):
        names[owner].append(name)
    return {pk: sorted(values) for pk, values in names.items()}


#: through model -> (the model whose grants change, its field on the through model, the other side's field,
#: the key of before/after, how to read the grants)
RELATIONS = {
    User.groups.through: (User, "user", "group", "groups", _group_names),
    User.user_permissions.through: (User, "user", "permission", "permissions", _permission_names),
    Group.permissions.through: (Group, "group", "permission", "permissions", _permission_names),
}
_M2M_BEFORE = "_audit_m2m_before"


def _m2m_changed(sender, instance, action, reverse, pk_set, **kwargs):
    owner_model, owner_field, other_field, key, read = RELATIONS[sender]
    if action in ("pre_add", "pre_remove", "pre_clear"):
        if not reverse:
            owners = [instance.pk]
        elif pk_set is not None:
            owners = sorted(pk_set)
        else:  # group.user_set.clear(): every member loses the group
            owners = sorted(sender.objects.filter(**{other_field: instance.pk}).values_list(owner_field, flat=True))
        pending = instance.__dict__.setdefault(_M2M_BEFORE, {})
        pending[sender] = (owners, read(sender, owner_field, owners))
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    owners, before = instance.__dict__.get(_M2M_BEFORE, {}).pop(sender, ([], {}))
    if not owners:
        return
    after = read(sender, owner_field, owners)
    objects = {instance.pk: instance} if not reverse else owner_model.objects.in_bulk(owners)
    for pk in owners:
        if before.get(pk) != after.get(pk) and pk in objects:
            audit.record(AuditAction.USER_GROUPS_CHANGE, objects[pk], before={key: before.get(pk, [])},
                         after={key: after.get(pk, [])})


for _through in RELATIONS:
    m2m_changed.connect(_m2m_changed, sender=_through, dispatch_uid=f"audit.privileges_{_through._meta.label}")


# --- API tokens ---------------------------------------------------------------------------------------------

def _token_repr(token) -> str:
    """Whose token, and its name (its prefix is in ``after``: random letters are no name to read)."""
    return f"{token.user.get_username()}: {token.name}"[:300]


@receiver(tokens.token_issued, dispatch_uid="audit.api_token_issued")
def _token_issued(sender, token, actor=None, **kwargs):
    audit.record(AuditAction.API_TOKEN_CREATE, token, actor=actor, object_repr=_token_repr(token), after={
        "user": token.user.get_username(), "name": token.name, "prefix": token.prefix,
        "expires_at": token.expires_at})


@receiver(tokens.tokens_revoked, dispatch_uid="audit.api_tokens_revoked")
def _tokens_revoked(sender, revoked, reason, actor=None, **kwargs):
    for token in revoked:
        audit.record(AuditAction.API_TOKEN_REVOKE, token, actor=actor, object_repr=_token_repr(token),
                     before={"revoked_at": None},
                     after={"revoked_at": token.revoked_at, "revoked_reason": str(reason)})
