"""Whose account a job runs under on a Slurm cluster.

Slurm runs a job as the user its token names, and that user must exist on the nodes; so the portal must name
the person's account there. In order: one service account where the site runs every job as it; the cluster's
explicit mapping; the directory's identifier where the person signs in through LDAP or OpenID Connect (the uid
the site's machines know them by); else the portal user name, which on most sites is the same login."""

from __future__ import annotations

from directory.models import DirectoryAccount


def directory_identifier(user) -> str:
    """The person's identifier in the site's directory, or "" for a local account. An LDAP DN is reduced to
    its first value ("uid=ada,ou=people,dc=lab" → "ada"): the login the nodes know."""
    try:
        identifier = user.directory_account.identifier
    except DirectoryAccount.DoesNotExist:
        return ""
    first = identifier.split(",", 1)[0]
    return first.split("=", 1)[1].strip() if "=" in first else identifier.strip()


def cluster_user(cluster, user) -> str:
    if cluster.slurm_run_as:
        return cluster.slurm_run_as
    mapped = (cluster.slurm_users or {}).get(user.username)
    if mapped:
        return str(mapped)
    return directory_identifier(user) or user.username
