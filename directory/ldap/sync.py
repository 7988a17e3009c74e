"""The periodic sync (``manage.py sync_directory``, the beat's ``directory.tasks.sync_directory``): every person
who ever signed in with LDAP, brought in line with the directory as it is now.

The directory is read first, whole, in three searches on one connection (everyone the user search finds, who
of them is disabled, the members of every group); only then is anything changed. So a directory that cannot
be reached, or that fails halfway, changes nothing: the sync raises ``DirectoryUnavailable`` and nobody is
disabled because the server was down.

People who signed in with OpenID Connect are not visited: a provider offers no way to ask about someone who
is not signing in, so their memberships follow their groups claim at each sign-in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import ldap
import ldap.filter
from django.utils import timezone
from django.utils.translation import gettext_noop
from ldap.controls import SimplePagedResultsControl

from directory.groups import normalize_dn
from directory.ldap.auth import connection_options, ldap_conf
from directory.models import AccountSource, DirectoryAccount
from directory.sync import bring_in_line
from gpuportal.text.phrases import Phrase

logger = logging.getLogger(__name__)

#: Entries asked for per page when the sync reads the whole directory (servers cap an answer at 500 to 1000).
PAGE_SIZE = 500


class DirectoryUnavailable(Exception):
    """The directory could not be reached, refused the portal's own bind or failed a search: nothing changed."""


def open_connection(conf: dict):
    """A connection bound with the portal's own DN; DirectoryUnavailable when that fails."""
    try:
        connection = ldap.initialize(conf["URI"], bytes_mode=False)
        for option, value in connection_options(conf).items():
            connection.set_option(option, value)
        if conf["START_TLS"]:
            connection.start_tls_s()
        connection.simple_bind_s(conf["BIND_DN"], conf["BIND_PASSWORD"])
    except ldap.LDAPError as error:
        raise DirectoryUnavailable(describe(error)) from error
    return connection


def describe(error: ldap.LDAPError) -> str:
    """python-ldap's error as one line ("Can't contact LDAP server", "Invalid credentials", …)."""
    info = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
    return " ".join(str(info[key]) for key in ("desc", "info") if info.get(key)) or repr(error)


def paged_search(connection, base: str, filterstr: str, attributes: list[str]):
    """Every (dn, attributes) under ``base`` matching ``filterstr``, a page at a time (servers limit the size
    of one answer), referrals left out."""
    control = SimplePagedResultsControl(True, size=PAGE_SIZE, cookie="")
    while True:
        message = connection.search_ext(base, ldap.SCOPE_SUBTREE, filterstr, attributes, serverctrls=[control])
        _kind, entries, _message, controls = connection.result3(message)
        yield from ((dn, values) for dn, values in entries if dn is not None)
        cookie = next((c.cookie for c in controls if c.controlType == SimplePagedResultsControl.controlType), b"")
        if not cookie:
            return
        control.cookie = cookie


@dataclass
class DirectorySnapshot:
    """Who is in the directory, who of them is disabled, and who is in which group (DNs in normal form)."""

    users: set[str] = field(default_factory=set)
    disabled: set[str] = field(default_factory=set)
    groups_of: dict[str, set[str]] = field(default_factory=dict)


def read_directory(connection, conf: dict) -> DirectorySnapshot:
    snapshot = DirectorySnapshot()
    everybody = conf["USER_FILTER"] % {"user": "*"}  # the sign-in search with a wildcard for the name
    snapshot.users = {normalize_dn(dn) for dn, _values in paged_search(
        connection, conf["USER_BASE"], everybody, ["1.1"])}
    if conf["DISABLED_FILTER"]:
        snapshot.disabled = {normalize_dn(dn) for dn, _values in paged_search(
            connection, conf["USER_BASE"], f"(&{everybody}{conf['DISABLED_FILTER']})", ["1.1"])}
    if conf["GROUP_BASE"]:
        for group_dn, values in paged_search(connection, conf["GROUP_BASE"], conf["GROUP_FILTER"], ["member"]):
            group = normalize_dn(group_dn)
            for member in values.get("member", []):
                snapshot.groups_of.setdefault(normalize_dn(member.decode("utf-8")), set()).add(group)
    return snapshot


def find_user_dn(connection, conf: dict, username: str) -> str | None:
    """The DN the sign-in search finds for ``username`` now (after a rename or a move), or None."""
    filterstr = conf["USER_FILTER"] % {"user": ldap.filter.escape_filter_chars(username)}
    found = [dn for dn, _values in paged_search(connection, conf["USER_BASE"], filterstr, ["1.1"])]
    return normalize_dn(found[0]) if len(found) == 1 else None


@dataclass
class SyncReport:
    """What one sync did; ``people`` counts everyone visited."""

    people: int = 0
    added: int = 0
    removed: int = 0
    deactivated: list[str] = field(default_factory=list)
    reactivated: list[str] = field(default_factory=list)
    skipped: str = ""

    def as_dict(self) -> dict:
        return {"people": self.people, "added": self.added, "removed": self.removed,
                "deactivated": self.deactivated, "reactivated": self.reactivated, "skipped": self.skipped}


def sync_ldap() -> SyncReport:
    """Bring every LDAP-signed-in person in line with the directory. Raises DirectoryUnavailable (nothing
    changed) when the directory cannot be read."""
    conf = ldap_conf()
    report = SyncReport()
    if conf is None:
        report.skipped = "LDAP sign-in is not configured (GPUPORTAL_LDAP_URI)"
        return report
    connection = open_connection(conf)
    try:
        snapshot = read_directory(connection, conf)
        accounts = list(DirectoryAccount.objects.filter(source=AccountSource.LDAP).select_related("user"))
        for account in accounts:
            _sync_one(connection, conf, snapshot, account, report)
    except ldap.LDAPError as error:
        raise DirectoryUnavailable(describe(error)) from error
    finally:
        connection.unbind_s()
    logger.info("directory sync: %s", report.as_dict())
    return report


def _sync_one(connection, conf: dict, snapshot: DirectorySnapshot, account: DirectoryAccount,
              report: SyncReport) -> None:
    user, dn = account.user, account.identifier
    if dn not in snapshot.users:
        moved = find_user_dn(connection, conf, user.get_username())
        if moved in snapshot.users:
            account.identifier = dn = moved
            account.save(update_fields=["identifier", "last_updated"])
    if dn not in snapshot.users:
        enabled, reason = False, Phrase(gettext_noop("no longer in the directory"))
    else:
        account.last_seen_at = timezone.now()
        account.save(update_fields=["last_seen_at", "last_updated"])
        enabled = dn not in snapshot.disabled
        reason = Phrase(gettext_noop("directory sync") if enabled else gettext_noop("disabled in the directory"))
    changes = bring_in_line(user, account, snapshot.groups_of.get(dn, ()), enabled=enabled, reason=reason)
    report.people += 1
    report.added += len(changes.added)
    report.removed += len(changes.removed)
    if changes.deactivated:
        report.deactivated.append(user.get_username())
    if changes.reactivated:
        report.reactivated.append(user.get_username())
