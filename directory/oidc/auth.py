"""OpenID Connect sign-in (mozilla-django-oidc): authorization code flow with PKCE, the provider's endpoints
from its discovery document, groups from a configurable claim, and logout at the provider.

Configuration is ``settings.DIRECTORY["OIDC"]`` (the ``GPUPORTAL_OIDC_*`` variables). mozilla-django-oidc
reads its settings through ``get_settings``; ``oidc_setting`` answers those names from that configuration
and from ``{issuer}/.well-known/openid-configuration`` (fetched when a sign-in first needs it, then kept
for ``DISCOVERY_TTL_SECONDS``), so no endpoint is configured by hand and nothing is fetched at start-up or
on ordinary requests.

People are matched by the issuer's subject (``sub``), never by e-mail or name: an account at the provider
can never take over a local account that happens to carry the same address or username. Someone new gets an
account named after their ``preferred_username``; when an account of that name exists already (a local one,
one linked to another identity), the sign-in is refused with a message and an audit record, as is one whose
linked account is a superuser's (``directory.sync.link_account``).
"""

from __future__ import annotations

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
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.translation import gettext_noop
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from directory.models import AccountSource
from directory.sync import LinkRefused, bring_in_line, link_account, name_taken, refuse_link
from gpuportal.text.phrases import Phrase
from gpuportal.web.clients import client_address

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


#: Claims an ID token must carry (OpenID Connect Core 1.0, section 3.1.3.7): who issued it, for which client,
#: about whom, when, and until when. A token without ``exp`` would be valid for ever.
REQUIRED_CLAIMS = ("iss", "aud", "sub", "exp", "iat")
#: Seconds of clock difference between the provider and the portal tolerated on ``exp`` and ``iat``.
CLOCK_LEEWAY_SECONDS = 60


def decode_id_token(token: str, key, algorithm: str, issuer: str, client_id: str) -> dict:
    """The claims of a signed ID token, verified: the signature with ``key``, ``iss`` the configured issuer
    (with or without its trailing slash), ``aud`` this client, ``exp`` not passed and ``iat`` not in the future
    (``CLOCK_LEEWAY_SECONDS``), every claim of ``REQUIRED_CLAIMS`` present. Raises ``jwt.PyJWTError``
    otherwise. mozilla-django-oidc checks the signature only, so a token issued to another client of the same
    provider, or one that never expires, would sign someone in."""
    return jwt.decode(token, key, algorithms=[algorithm], audience=client_id,
                      issuer=(issuer, f"{issuer}/"), leeway=CLOCK_LEEWAY_SECONDS,
                      options={"require": list(REQUIRED_CLAIMS), "verify_iat": True})


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

    def _verify_jws(self, payload, key):
        """The ID token's signature and claims (``decode_id_token``), with the algorithm the provider offers."""
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"the ID token is signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO!r}")
        conf = oidc_conf()
        return decode_id_token(payload, key, algorithm, conf["ISSUER"], conf["CLIENT_ID"])

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
        """The account linked to this issuer's subject (a superuser's is refused before anything is updated)."""
        users = self.UserModel.objects.filter(directory_account__source=AccountSource.OIDC,
                                              directory_account__issuer=oidc_conf()["ISSUER"],
                                              directory_account__identifier=str(claims["sub"]))
        superuser = next((user for user in users if user.is_superuser), None)
        if superuser is not None:
            raise LinkRefused(superuser.get_username(), gettext_noop("the account is a superuser's"))
        return users

    def create_user(self, claims):
        """A new account for someone the portal has not seen, under their own name only: never an existing one."""
        username = wanted_username(claims)
        taken = LinkRefused(username, gettext_noop("the name is taken by an account not linked to this person"))
        if name_taken(username):
            raise taken
        try:
            with transaction.atomic():
                user = self.UserModel.objects.create_user(username, email=claims.get("email", ""))
        except IntegrityError as error:  # the name was taken at this same moment
            raise taken from error
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
        conf = oidc_conf()
        try:
            user = super().get_or_create_user(access_token, id_token, payload)
            if user is None:
                return None
            account = link_account(user, AccountSource.OIDC, str(self._claims["sub"]), issuer=conf["ISSUER"])
        except LinkRefused as refusal:
            refuse_link(refusal, AccountSource.OIDC, str(self._claims.get("sub", "")), issuer=conf["ISSUER"],
                        address=client_address(self.request.META))
            self.request.directory_link_refused = refusal.username  # the login page says why
            return None
        claims = self._claims
        groups = claims.get(conf["GROUPS_CLAIM"]) or []
        bring_in_line(user, account, [groups] if isinstance(groups, str) else [str(g) for g in groups],
                      enabled=True, reason=Phrase(gettext_noop("signed in with %(provider)s"), {
                          "provider": conf["PROVIDER_NAME"]}),
                      address=client_address(self.request.META))
        return user if user.is_active else None

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None


_USERNAME_CHARACTERS = re.compile(r"[^\w.@+-]")


def wanted_username(claims: dict) -> str:
    """The username a new person asks for: their ``preferred_username`` (or the name part of their e-mail).

    Not made unique by a suffix when it is taken: ``ada-1f2e3d4c`` beside a local ``ada`` would pass for her
    in every list and audit record, so a taken name is refused (``create_user``) and a platform admin decides."""
    wanted = claims.get("preferred_username") or (claims.get("email") or "").split("@")[0] or "user"
    return _USERNAME_CHARACTERS.sub("", str(wanted))[:120] or "user"


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

