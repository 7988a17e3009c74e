"""OpenID Connect sign-in (mozilla-django-oidc): authorization code flow with PKCE, the provider's endpoints
from its discovery document, groups from a configurable claim, and logout at the provider.

Configuration is ``settings.DIRECTORY["OIDC"]`` (the ``GPUPORTAL_OIDC_*`` variables). mozilla-django-oidc
reads its settings through ``get_settings``; ``oidc_setting`` answers those names from that configuration
and from ``{issuer}/.well-known/openid-configuration`` (fetched when a sign-in first needs it, then kept
for ``DISCOVERY_TTL_SECONDS``), so no endpoint is configured by hand and nothing is fetched at start-up or
on ordinary requests.

People are matched by the issuer's subject (``sub``), never by e-mail or name: an account at the provider
can never take over a local account that happens to carry the same address or username.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, get_user_model
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from audit.log import client_address

from .actor import DIRECTORY_ACTOR
from .models import AccountSource
from .sync import bring_in_line, link_account

logger = logging.getLogger(__name__)

DISCOVERY_TTL_SECONDS = 3600
#: Signing algorithms accepted for ID tokens, most preferred first (never "none", never a shared secret).
SIGNING_ALGORITHMS = ("RS256", "ES256", "PS256", "RS384", "ES384", "RS512", "ES512")
CALLBACK_URL_NAME = "directory:oidc-callback"

_discovered: dict[str, tuple[float, dict]] = {}
_discovery_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be fetched or does not describe the configured issuer."""


def oidc_conf() -> dict | None:
    """``settings.DIRECTORY["OIDC"]``: None when OpenID Connect sign-in is not configured."""
    return (getattr(settings, "DIRECTORY", None) or {}).get("OIDC") or None


def _verify(conf: dict):
    return conf["CA_FILE"] or True


def discovery(conf: dict) -> dict:
    """The issuer's discovery document (cached); ProviderUnavailable when it cannot be had."""
    issuer = conf["ISSUER"]
    with _discovery_lock:
        cached = _discovered.get(issuer)
        if cached and time.monotonic() - cached[0] < DISCOVERY_TTL_SECONDS:
            return cached[1]
    try:
        response = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=conf["TIMEOUT_SECONDS"],
                                verify=_verify(conf))
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as error:
        raise ProviderUnavailable(f"discovery of {issuer} failed: {error}") from error
    # OpenID Connect Discovery 1.0, section 4.3: the document must name exactly the issuer it was fetched for.
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderUnavailable(f"the discovery document of {issuer} names another issuer")
    missing = [key for key in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(key)]
    if missing:
        raise ProviderUnavailable(f"the discovery document of {issuer} lacks {', '.join(missing)}")
    with _discovery_lock:
        _discovered[issuer] = (time.monotonic(), document)
    return document


def forget_discovery() -> None:
    """Drop cached discovery documents (a provider moved its endpoints; tests)."""
    with _discovery_lock:
        _discovered.clear()


def _signing_algorithm(document: dict) -> str:
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    return next((alg for alg in SIGNING_ALGORITHMS if alg in offered), "RS256")


#: mozilla-django-oidc setting → key of the discovery document
_DISCOVERED = {"OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint", "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
               "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint", "OIDC_OP_JWKS_ENDPOINT": "jwks_uri"}


def oidc_setting(name: str, *default):
    """What mozilla-django-oidc asks for, from the portal's configuration and the discovery document."""
    conf = oidc_conf()
    if conf is not None:
        if name in _DISCOVERED:
            return discovery(conf).get(_DISCOVERED[name])
        fixed = {
            "OIDC_RP_CLIENT_ID": conf["CLIENT_ID"], "OIDC_RP_CLIENT_SECRET": conf["CLIENT_SECRET"],
            "OIDC_RP_SCOPES": conf["SCOPES"], "OIDC_USE_PKCE": True, "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
            "OIDC_USE_NONCE": True, "OIDC_STORE_ID_TOKEN": True, "OIDC_VERIFY_SSL": _verify(conf),
            "OIDC_TIMEOUT": conf["TIMEOUT_SECONDS"], "OIDC_AUTHENTICATION_CALLBACK_URL": CALLBACK_URL_NAME,
            "OIDC_CREATE_USER": True, "OIDC_ALLOW_UNSECURED_JWT": False, "OIDC_RP_IDP_SIGN_KEY": None,
        }
        if name in fixed:
            return fixed[name]
        if name == "OIDC_RP_SIGN_ALGO":
            return _signing_algorithm(discovery(conf))
    return import_from_settings(name, *default)


def _endpoint(name: str):
    return property(lambda self: self.get_settings(name, None))


class OIDCDirectoryBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, configured from ``settings.DIRECTORY`` and discovery, that matches people
    by subject, maps their groups claim like LDAP groups, and refuses inactive users."""

    get_settings = staticmethod(oidc_setting)
    # Read when a sign-in needs them: the base class reads them in __init__, which runs for every request
    # of a signed-in person (get_user) and would fetch discovery there.
    OIDC_OP_TOKEN_ENDPOINT = _endpoint("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = _endpoint("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = _endpoint("OIDC_OP_JWKS_ENDPOINT")
    OIDC_RP_CLIENT_ID = _endpoint("OIDC_RP_CLIENT_ID")
    OIDC_RP_CLIENT_SECRET = _endpoint("OIDC_RP_CLIENT_SECRET")
    OIDC_RP_SIGN_ALGO = _endpoint("OIDC_RP_SIGN_ALGO")
    OIDC_RP_IDP_SIGN_KEY = None

    def __init__(self, *args, **kwargs):
        self.UserModel = get_user_model()
        self._claims: dict = {}

    def authenticate(self, request, **kwargs):
        """Only the callback's call (with the nonce and PKCE verifier it kept) is an OpenID Connect sign-in."""
        conf = oidc_conf()
        if conf is None or request is None or "nonce" not in kwargs or "password" in kwargs:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except (ProviderUnavailable, requests.RequestException, SuspiciousOperation, jwt.PyJWTError,
                KeyError, ValueError, TypeError) as error:
            logger.warning("OpenID Connect sign-in failed: %s", error)
            return None

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims with the userinfo endpoint's on top (providers put groups in either)."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            userinfo = super().get_userinfo(access_token, id_token, payload)
            if userinfo.get("sub") != payload.get("sub"):  # OpenID Connect Core 1.0, section 5.3.2
                raise SuspiciousOperation("the userinfo subject differs from the ID token's")
            claims.update(userinfo)
        self._claims = claims
        return claims

    def verify_claims(self, claims):
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(directory_account__source=AccountSource.OIDC,
                                             directory_account__issuer=oidc_conf()["ISSUER"],
                                             directory_account__identifier=str(claims["sub"]))

    def create_user(self, claims):
        user = self.UserModel.objects.create_user(free_username(claims), email=claims.get("email", ""))
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        fields = {"email": claims.get("email", user.email), "first_name": claims.get("given_name", user.first_name),
                  "last_name": claims.get("family_name", user.last_name)}
        changed = [name for name, value in fields.items() if value is not None and getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)
        return user

    def get_or_create_user(self, access_token, id_token, payload):
        user = super().get_or_create_user(access_token, id_token, payload)
        if user is None:
            return None
        conf, claims = oidc_conf(), self._claims
        account = link_account(user, AccountSource.OIDC, str(claims["sub"]), issuer=conf["ISSUER"])
        groups = claims.get(conf["GROUPS_CLAIM"]) or []
        bring_in_line(user, account, [groups] if isinstance(groups, str) else [str(g) for g in groups],
                      enabled=True, reason=_("signed in with %(provider)s") % {"provider": conf["PROVIDER_NAME"]},
                      address=client_address(self.request.META))
        return user if user.is_active else None

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None


_USERNAME_CHARACTERS = re.compile(r"[^\w.@+-]")


def free_username(claims: dict) -> str:
    """A username for a new person: their ``preferred_username`` (or the name part of their e-mail) when no one
    has it yet, else that name with a suffix derived from their subject."""
    wanted = claims.get("preferred_username") or (claims.get("email") or "").split("@")[0] or "user"
    wanted = _USERNAME_CHARACTERS.sub("", str(wanted))[:120] or "user"
    taken = get_user_model().objects.filter(username__iexact=wanted).exists() or wanted.lower() == DIRECTORY_ACTOR
    if not taken:
        return wanted
    suffix = hashlib.sha256(f"{oidc_conf()['ISSUER']} {claims['sub']}".encode()).hexdigest()[:8]
    return f"{wanted}-{suffix}"


def signed_in_with_oidc(request) -> bool:
    return request.session.get(BACKEND_SESSION_KEY) == f"{__name__}.{OIDCDirectoryBackend.__name__}"


def provider_logout_url(request) -> str | None:
    """Where to send someone who signed in with the provider after the portal signed them out: the provider's
    ``end_session_endpoint`` (RP-initiated logout), which brings them back to the login page. None when the
    provider has no such endpoint or cannot be reached (then the portal's own sign-out is all there is)."""
    conf = oidc_conf()
    if conf is None or not signed_in_with_oidc(request):
        return None
    try:
        endpoint = discovery(conf).get("end_session_endpoint")
    except ProviderUnavailable:
        return None
    if not endpoint:
        return None
    params = {"client_id": conf["CLIENT_ID"],
              "post_logout_redirect_uri": request.build_absolute_uri(reverse("login"))}
    if request.session.get("oidc_id_token"):
        params["id_token_hint"] = request.session["oidc_id_token"]
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"

