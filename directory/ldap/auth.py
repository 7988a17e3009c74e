"""LDAP sign-in (django-auth-ldap) and reading the directory for the sync.

Configuration is ``settings.DIRECTORY["LDAP"]`` (``GPUPORTAL_LDAP_*``, gpuportal/settings/directory.py),
turned here into django-auth-ldap's settings; any ``AUTH_LDAP_*`` setting a site adds still applies to what
this module does not set. The person's password is checked by binding as them; everything else (their
groups, whether they are disabled) is read with the portal's own bind DN, which the sync uses as well, so
sign-in and sync see the same thing.

Groups are ``groupOfNames`` entries under the group base whose ``member`` holds the person's DN (nested
groups are not followed). A person is disabled when their entry matches ``DISABLED_FILTER``, and gone when
the user search no longer finds them.

A person signs in to the account linked to their DN, or to a new one named after them; an existing account
of that name that is not linked to them (a local one, a superuser's, one linked to another identity) is
refused with a message and an audit record, never taken over (``get_or_build_user``).
"""

from __future__ import annotations

import logging

import ldap
from django.conf import settings
from django.dispatch import receiver
from django.utils.translation import gettext_noop
from django_auth_ldap.backend import LDAPBackend, ldap_error
from django_auth_ldap.config import GroupOfNamesType, LDAPSearch, LDAPSettings

from directory.actor import DIRECTORY_ACTOR
from directory.groups import normalize_dn
from directory.models import AccountSource
from directory.sync import LinkRefused, bring_in_line, link_account, linked_user, name_taken, refuse_link
from gpuportal.text.phrases import Phrase
from gpuportal.web.clients import client_address

logger = logging.getLogger(__name__)

def ldap_conf() -> dict | None:
    """``settings.DIRECTORY["LDAP"]``: None when LDAP sign-in is not configured."""
    return (getattr(settings, "DIRECTORY", None) or {}).get("LDAP") or None


def connection_options(conf: dict) -> dict:
    """python-ldap options: time limits (an unreachable directory must not hang the login page) and, with a
    CA file, certificate checks for StartTLS and ldaps://."""
    options = {ldap.OPT_NETWORK_TIMEOUT: conf["TIMEOUT_SECONDS"], ldap.OPT_TIMEOUT: conf["TIMEOUT_SECONDS"],
               ldap.OPT_REFERRALS: 0}
    if conf.get("CA_FILE"):
        options[ldap.OPT_X_TLS_CACERTFILE] = conf["CA_FILE"]
        options[ldap.OPT_X_TLS_REQUIRE_CERT] = ldap.OPT_X_TLS_DEMAND
        options[ldap.OPT_X_TLS_NEWCTX] = 0  # last: applies the TLS options above to this connection
    return options


def auth_ldap_settings(conf: dict) -> dict:
    """django-auth-ldap's settings (names without the ``AUTH_LDAP_`` prefix) for the portal's configuration."""
    return {
        "SERVER_URI": conf["URI"],
        "BIND_DN": conf["BIND_DN"],
        "BIND_PASSWORD": conf["BIND_PASSWORD"],
        "START_TLS": conf["START_TLS"],
        "CONNECTION_OPTIONS": connection_options(conf),
        "USER_SEARCH": LDAPSearch(conf["USER_BASE"], ldap.SCOPE_SUBTREE, conf["USER_FILTER"]),
        "GROUP_SEARCH": LDAPSearch(conf["GROUP_BASE"], ldap.SCOPE_SUBTREE, conf["GROUP_FILTER"])
        if conf["GROUP_BASE"] else None,
        "GROUP_TYPE": GroupOfNamesType(),
        "USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        # The person's bind only checks the password; groups and the disabled check use the portal's bind.
        "BIND_AS_AUTHENTICATING_USER": False,
        "ALWAYS_UPDATE_USER": True,
    }


class LDAPDirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend, configured from ``settings.DIRECTORY`` and bringing the person's memberships
    in line with their groups at every sign-in.

    It refuses inactive users (django-auth-ldap does not), both at sign-in and for an existing session, so a
    person disabled in the directory is out at their next request."""

    _request = None

    @property
    def settings(self):
        if self._settings is None:
            self._settings = LDAPSettings(self.settings_prefix, self.default_settings)
            for name, value in auth_ldap_settings(ldap_conf()).items():
                setattr(self._settings, name, value)
        return self._settings

    @settings.setter
    def settings(self, value):
        self._settings = value

    def authenticate(self, request, username=None, password=None, **kwargs):
        if ldap_conf() is None or not username or username.strip().lower() == DIRECTORY_ACTOR:
            return None
        self._request = request
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_or_build_user(self, username, ldap_user):
        """The account this person signs in to: the one linked to their DN, else a new one named ``username``.

        django-auth-ldap would take any account of that name (a local one, a superuser's) and overwrite its
        name and e-mail before the sign-in even finished; a name that is taken is refused here instead, after
        the password was checked and before anything is written (``sync.link_account``)."""
        dn = normalize_dn(ldap_user.dn)
        user = linked_user(AccountSource.LDAP, dn)
        refusal = None
        if user is not None and user.is_superuser:
            refusal = LinkRefused(user.get_username(), gettext_noop("the account is a superuser's"))
        elif user is None and name_taken(username):
            refusal = LinkRefused(username, gettext_noop("the name is taken by an account not linked to this person"))
        if refusal is not None:
            self._refuse(refusal, dn)
            raise ldap_user.AuthenticationFailed(refusal.reason)
        if user is not None:
            return user, False
        return self.get_user_model()(username=username.lower()), True

    def _refuse(self, refusal: LinkRefused, dn: str) -> None:
        address = client_address(self._request.META) if self._request is not None else ""
        refuse_link(refusal, AccountSource.LDAP, dn, address=address)
        if self._request is not None:  # the login page says why (the password was right)
            self._request.directory_link_refused = refusal.username

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        conf = ldap_conf()
        try:
            enabled = not matches(ldap_user.connection, ldap_user.dn, conf["DISABLED_FILTER"])
            groups = ldap_user.group_dns if conf["GROUP_BASE"] else ()
        except ldap.LDAPError as error:
            _remember_failure(self._request, error)
            return None
        dn = normalize_dn(ldap_user.dn)
        try:
            account = link_account(user, AccountSource.LDAP, dn)
        except LinkRefused as refusal:  # linked to another identity meanwhile
            self._refuse(refusal, dn)
            return None
        address = client_address(self._request.META) if self._request is not None else ""
        bring_in_line(user, account, groups, enabled=enabled, address=address,
                      reason=Phrase(gettext_noop("signed in with LDAP") if enabled
                                    else gettext_noop("disabled in the directory")))
        return user if user.is_active else None

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None


def _remember_failure(request, error) -> None:
    """Tell the login page that the directory failed (not the person's password): it says so instead."""
    logger.warning("LDAP directory failed during sign-in: %s", error)
    if request is not None:
        request.directory_unavailable = True


@receiver(ldap_error, sender=LDAPDirectoryBackend, dispatch_uid="directory.ldap_error")
def _directory_failed(sender, context, user, request, exception, **kwargs):
    """django-auth-ldap reports every LDAP error but a wrong password this way (server down, time-out, a bind
    the directory refused to the portal itself)."""
    _remember_failure(request, exception)


def matches(connection, dn: str, filterstr: str) -> bool:
    """Whether the entry ``dn`` matches ``filterstr`` (False when there is no filter)."""
    if not filterstr:
        return False
    try:
        return bool(connection.search_s(dn, ldap.SCOPE_BASE, filterstr, ["1.1"]))
    except ldap.NO_SUCH_OBJECT:
        return False
