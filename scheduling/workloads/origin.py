"""Workloads on an origin of their own: which requests are the workload origin's, sign-in tickets, its cookie.

Why: a notebook or a service serves what its tenant put there (HTML, scripts). Served from the portal's origin,
such a script runs as the portal: it reads the CSRF token and posts to the admin site or the token API in the
name of whoever opened the link. So every byte a workload produces is served on ``WORKLOADS["ORIGIN"]``
(``GPUPORTAL_WORKLOAD_ORIGIN``), another host, as JupyterHub's subdomains and Run:ai's per-workload URLs do; the
portal's origin only sends the browser there.

- Host: a request belongs to the workload origin when its Host is the setting's (port included). A first label
  ``*`` in the setting (``https://*.apps.example.org``) gives each workload a host of its own (``nb-12.…``,
  ``svc-3.…``, a job's named port ``pt-12-tensorboard.…``), so that one workload's page cannot reach another
  one's either. There only
  ``scheduling.workloads.urls`` answers (the portal's pages are not found), and the portal's session and CSRF
  cookies are dropped from the request before anything reads them, and from the response.
- Ticket: the portal's entry point (signed in, ``may_open``/``may_call`` checked) stores a random ticket for
  ``TICKET_SECONDS`` (a row of the database's session table, so every web process sees it and none needs the
  cache), bound to the user, the workload and the user's password, and redirects to
  ``<origin><workload path>?ticket=…``. The first exchange deletes the row: a second one, or one after the
  deadline, finds nothing.
- Cookie: the exchange sets ``gpuportal_workload`` (signed: user, workload, password hash; ``COOKIE_MAX_AGE``)
  host-only, HttpOnly, ``SameSite=Strict``, ``Secure`` on https, on that workload's path only, never the
  portal's session cookie. Each later request is checked against the workload and the user's rights then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.core import signing
from django.utils import timezone

from gpuportal.web.paths import portal_path

NOTEBOOK, SERVICE, PORT = "notebook", "service", "port"
COOKIE_NAME = "gpuportal_workload"
TICKET_PARAMETER = "ticket"
_TICKET_PURPOSE = "gpuportal.workload-ticket"
_COOKIE_SALT = "gpuportal.workload-cookie"
_LABEL = re.compile(r"(nb|svc)-([0-9]+)|pt-([0-9]+)-([a-z0-9-]{1,15})")
_TICKET = re.compile(r"[a-z0-9]{32,40}")


@dataclass(frozen=True)
class Workload:
    """A notebook (by its job's id), a service (by its group's id) or a job's named port (by the job's id and the
    port's name), as the workload origin addresses it."""

    kind: str
    pk: int
    port: str = ""

    @property
    def path(self) -> str:
        """Where it is served, on the workload origin as on the portal's (old links keep working)."""
        if self.kind == PORT:
            return portal_path("scheduling:port-open-root", self.pk, self.port)
        name = "scheduling:notebook-open-root" if self.kind == NOTEBOOK else "scheduling:service-endpoint-root"
        return portal_path(name, self.pk)

    @property
    def cookie_path(self) -> str:
        """The sign-in cookie's path: the workload's own (a Kubernetes ingress serves a service at
        ``/services/<id>/``, the portal at ``/services/<id>/endpoint/``: the cookie covers both)."""
        return portal_path("scheduling:service-detail", self.pk) if self.kind == SERVICE else self.path

    @property
    def label(self) -> str:
        """Its host's first label when each workload has a host of its own (each port of a job a host of its own
        too: TensorBoard's page cannot reach the job's other web UI)."""
        if self.kind == PORT:
            return f"pt-{self.pk}-{self.port}"
        return f"{'nb' if self.kind == NOTEBOOK else 'svc'}-{self.pk}"


def origin_setting() -> str:
    return (settings.WORKLOADS.get("ORIGIN") or "").rstrip("/")


def configured() -> bool:
    return bool(origin_setting())


def _normal_host(host: str, scheme: str) -> str:
    host = host.lower()
    default = ":443" if scheme == "https" else ":80"
    return host[:-len(default)] if host.endswith(default) else host


def host_label(request) -> str | None:
    """None when the request is not the workload origin's; "" on a shared workload origin; ``nb-12``,
    ``svc-3`` or ``pt-12-tensorboard`` on a workload's own host."""
    origin = origin_setting()
    if not origin:
        return None
    scheme, _sep, pattern = origin.partition("://")
    pattern = _normal_host(pattern, scheme)
    host = _normal_host(request.get_host(), scheme)
    if not pattern.startswith("*."):
        return "" if host == pattern else None
    suffix = pattern[2:]
    if host != suffix and not host.endswith(f".{suffix}"):
        return None
    label = host[:-len(suffix)].rstrip(".")
    return label if _LABEL.fullmatch(label) else "-"  # under the workloads' domain, but no workload's: nothing


def serves(request, workload: Workload) -> bool:
    """Whether this workload-origin request may reach ``workload`` (on a workload's own host: only its own)."""
    label = getattr(request, "workload_label", None)
    return label == "" or label == workload.label


def base_url(workload: Workload) -> str:
    """``scheme://host`` of the workload origin for ``workload``."""
    return origin_setting().replace("://*.", f"://{workload.label}.", 1)


def url(workload: Workload, path: str = "", query: str = "") -> str:
    return f"{base_url(workload)}{workload.path}{path}" + (f"?{query}" if query else "")


def secure() -> bool:
    return origin_setting().startswith("https://")


def _password_digest(user) -> str:
    """Changes when the password does, as Django's own sessions end then."""
    return user.get_session_auth_hash()


# --- tickets ----------------------------------------------------------------------------------------------------

def issue_ticket(user, workload: Workload) -> str:
    """A single-use ticket for ``user`` to sign in to ``workload`` on the workload origin."""
    store = DatabaseSessionStore()
    store.update({"purpose": _TICKET_PURPOSE, "user": user.pk, "kind": workload.kind, "pk": workload.pk,
                  "port": workload.port, "password": _password_digest(user)})
    store.set_expiry(max(1, int(settings.WORKLOADS["TICKET_SECONDS"])))
    store.create()
    return store.session_key


def redeem_ticket(ticket: str, workload: Workload):
    """The user the ticket was made for, once: the ticket is gone afterwards. None for a ticket that is
    unknown, spent, past its deadline, made for another workload, or whose user changed password or left."""
    if not _TICKET.fullmatch(ticket or ""):
        return None
    row = Session.objects.filter(session_key=ticket, expire_date__gt=timezone.now()).first()
    if row is None:
        return None
    data = DatabaseSessionStore().decode(row.session_data)
    if data.get("purpose") != _TICKET_PURPOSE:
        return None  # a portal session's key is no ticket (and that session stays)
    deleted, _rows = Session.objects.filter(session_key=ticket).delete()
    if not deleted:
        return None  # another request spent it first
    if (data.get("kind"), data.get("pk"), data.get("port", "")) != (workload.kind, workload.pk, workload.port):
        return None
    user = get_user_model().objects.filter(pk=data.get("user"), is_active=True).first()
    if user is None or _password_digest(user) != data.get("password"):
        return None
    return user


# --- the workload origin's cookie -------------------------------------------------------------------------------

def set_cookie(response, user, workload: Workload) -> None:
    value = signing.dumps({"user": user.pk, "workload": workload.label, "password": _password_digest(user)},
                          salt=_COOKIE_SALT)
    response.set_cookie(COOKIE_NAME, value, max_age=settings.WORKLOADS["COOKIE_MAX_AGE"], path=workload.cookie_path,
                        secure=secure(), httponly=True, samesite="Strict")


def cookie_user(request, workload: Workload):
    """The user the request's workload cookie names for ``workload``; None when it has none valid for it."""
    raw = request.COOKIES.get(COOKIE_NAME)
    if not raw:
        return None
    try:
        data = signing.loads(raw, salt=_COOKIE_SALT, max_age=settings.WORKLOADS["COOKIE_MAX_AGE"])
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("workload") != workload.label:
        return None
    user = get_user_model().objects.filter(pk=data.get("user"), is_active=True).first()
    if user is None or _password_digest(user) != data.get("password"):
        return None
    return user


def same_origin_or_unsaid(request, workload: Workload) -> bool:
    """For a cookie-authenticated request with an unsafe method: the browser says it comes from the workload's
    own origin (``Origin``, ``Sec-Fetch-Site``), or says nothing (not a browser). A page of a sibling host of
    the same site gets the SameSite=Strict cookie sent along, so the cookie alone does not prove it."""
    origin = request.headers.get("Origin")
    if origin is not None and origin.rstrip("/").lower() != base_url(workload).lower():
        return False
    return request.headers.get("Sec-Fetch-Site", "same-origin") == "same-origin"


class WorkloadOriginMiddleware:
    """Routes the workload origin's requests to ``scheduling.workloads.urls`` and keeps the portal's session and
    CSRF cookies out of them (a demo on one host name with two ports shares cookies between the two)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        label = host_label(request)
        if label is None:
            return self.get_response(request)
        request.workload_label = label
        request.urlconf = "scheduling.workloads.urls"
        portal_cookies = (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME)
        for name in portal_cookies:
            request.COOKIES.pop(name, None)
        response = self.get_response(request)
        for name in portal_cookies:
            response.cookies.pop(name, None)
        return response
