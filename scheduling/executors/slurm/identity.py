"""Whose account a job runs under on a Slurm cluster.

Slurm runs a job as the user its token names, and that user must exist on the nodes; so the portal must name
the person's account there. In order: one service account where the site runs every job as it; the account of
the token file where the site gave the portal one token (every request, and so every job, is that account's);
the cluster's explicit mapping; the uid of the person's LDAP entry where its DN names one; else the portal user
name, which is the login the person signed in with (LDAP), their ``preferred_username`` (OpenID Connect, whose
``sub`` is an opaque id the nodes do not know), or the local account's name.

The portal holds the cluster's key and can sign a token for any name, so a name it derived (not one an admin
chose) is refused when it is not a valid POSIX user name, and every per-person name is refused when it is a
privileged account (``root``, a name of uid 0, the cluster's ``slurm_user`` and ``slurm``): a portal user
called ``root`` must never run jobs as root. The service account and the token file's account are the site's
own choice."""

from __future__ import annotations

import pwd
import re

from django.utils.translation import gettext as _

from directory.models import AccountSource, DirectoryAccount
from scheduling.executors.slurm.tokens import token_user

#: A user name as POSIX systems (useradd's default rule) accept it, at most 32 characters.
POSIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]*[$]?$")
POSIX_NAME_MAX = 32


class IdentityRefused(Exception):
    """The portal will not run this person's jobs under the account it found; the message says why."""


def directory_uid(user) -> str:
    """The uid an LDAP DN names ("uid=ada,ou=people,dc=lab" → "ada"), "" for other DNs ("cn=Ada Lovelace,…"),
    OpenID Connect subjects and local accounts."""
    try:
        account = user.directory_account
    except DirectoryAccount.DoesNotExist:
        return ""
    if account.source != AccountSource.LDAP:
        return ""
    attribute, _sep, value = account.identifier.split(",", 1)[0].partition("=")
    return value.strip() if attribute.strip().lower() == "uid" else ""


def privileged(cluster, name: str) -> bool:
    """Whether ``name`` is an account no person's job may run as: root, any name of uid 0 on the portal's host,
    or the account slurmctld runs as (the cluster's ``slurm_user``, and ``slurm``, its usual name)."""
    if name in {"root", cluster.slurm_user or "", "slurm"} - {""}:
        return True
    try:
        return pwd.getpwnam(name).pw_uid == 0
    except (KeyError, UnicodeEncodeError, ValueError):
        return False


def valid_posix(name: str) -> bool:
    return len(name) <= POSIX_NAME_MAX and bool(POSIX_NAME.match(name))


def cluster_user(cluster, user) -> str:
    """The account on ``cluster`` that ``user``'s jobs run as. Raises IdentityRefused for a privileged account
    or a derived name the nodes cannot have."""
    if cluster.slurm_run_as:
        return cluster.slurm_run_as
    if cluster.slurm_token_file and not cluster.slurm_jwt_key_file:
        owner = token_user(cluster)
        if owner:
            return owner
    mapped = (cluster.slurm_users or {}).get(user.username)
    name = str(mapped) if mapped else (directory_uid(user) or user.username)
    if privileged(cluster, name):
        raise IdentityRefused(_(
            "The portal does not run jobs of %(user)s as %(name)s on cluster %(c)s: it is a privileged account of "
            "the cluster. A platform admin can map %(user)s to another account.") % {
            "user": user.username, "name": name, "c": cluster.name})
    if not mapped and not valid_posix(name):
        raise IdentityRefused(_(
            "%(name)s is not a user name the nodes of cluster %(c)s can have (lower-case letters, digits, \"_\" and "
            "\"-\", at most 32 characters): a platform admin must map %(user)s to their account there.") % {
            "name": name, "c": cluster.name, "user": user.username})
    return name
