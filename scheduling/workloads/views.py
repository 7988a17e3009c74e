"""Pages of notebooks, services and arrays, and the way in to notebooks and services.

A notebook or a service is served only on the workload origin (``scheduling.workloads.origin`` says why and how):
on the portal's origin its addresses send a signed-in reader there with a single-use ticket and never answer
with anything the workload produced. On the workload origin (``scheduling.workloads.urls``):

- ``/jobs/<id>/open/…`` is the notebook, for whoever may open it (``may_open``), signed in by the workload
  cookie; the portal adds the server's secret token, which no browser ever sees.
- ``/services/<id>/endpoint/…`` is the service, for those who may call it (``may_call``: not read-only roles),
  with an API token (programs) or the workload cookie (a browser), spread over its ready replicas.
- ``/jobs/<id>/ports/<name>/…`` is a named port of a running job (TensorBoard, a web UI), for whoever may open
  the job's notebook (``may_open``), with the workload cookie or an API token; the program sees ``/…`` (the
  prefix is taken off, as for a service).

The workload's own answer goes back with its own Content-Security-Policy (``sandbox`` included); a redirect it
answers may only lead within its own address. Neither the portal's cookies nor the caller's credentials are
forwarded.

Where an ingress serves notebooks itself (websockets), its nginx asks ``/jobs/<id>/open-auth/`` first
(``auth-url``) and must send the shared secret ``WORKLOADS["INGRESS_AUTH_SECRET"]`` in the
``X-Gpuportal-Ingress-Auth`` header (ingress-nginx: ``auth-proxy-set-headers``): only then does the 204 carry
``Authorization: token …``, which nginx hands on to the server (``auth-response-headers``) and never to the
browser. A browser asking that address itself gets a 403 and no token.
"""

from __future__ import annotations

import hmac
import http.client
import itertools
from urllib.parse import parse_qs, urljoin, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils.encoding import escape_uri_path
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from accounts.authentication import ApiTokenAuthentication
from scheduling.jobs.tokens import notebook_token
from scheduling.models import Job, JobGroup, JobStatus, WorkloadKind
from scheduling.workloads import origin as workload_origin
from scheduling.workloads import queries as workload_queries
from scheduling.workloads import services as workloads
from scheduling.workloads.origin import NOTEBOOK, PORT, SERVICE, TICKET_PARAMETER, Workload
from scheduling.workloads.queries import group_view, live_state, may_call, may_open, service_url, visible_group
from tenants import access

#: Request headers passed to a notebook or a service (nothing that identifies the caller to the portal).
FORWARDED_HEADERS = ("accept", "accept-language", "content-type", "user-agent", "x-requested-with")
#: Response headers passed back: the workload's own security policy among them (its CSP, ``sandbox`` included,
#: is what keeps an uploaded page from acting as the workload). Hop-by-hop headers and cookies stay with the
#: upstream; ``Location`` is rewritten (``public_location``).
RETURNED_HEADERS = ("content-type", "cache-control", "etag", "last-modified", "content-disposition",
                    "content-language", "content-security-policy", "content-security-policy-report-only",
                    "x-frame-options", "x-content-type-options", "referrer-policy", "permissions-policy",
                    "cross-origin-opener-policy", "cross-origin-embedder-policy", "cross-origin-resource-policy")
#: A workload's answer without a policy of its own: no other site may frame it (Jupyter's default). The portal's
#: policy is for the portal's pages; on the workload origin the workload decides the rest.
DEFAULT_WORKLOAD_POLICY = "frame-ancestors 'self'"
#: The header an ingress's auth subrequest carries the shared secret in.
INGRESS_AUTH_HEADER = "X-Gpuportal-Ingress-Auth"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
#: The most a proxied request body may carry.
MAX_PROXIED_BODY = 16 * 1024 * 1024
UPSTREAM_TIMEOUT_SECONDS = 30
_round_robin = itertools.count()
#: Characters browsers drop or read as "/" in a URL: a Location with one is refused rather than guessed at.
_AMBIGUOUS = frozenset("\\\t\r\n")


def _normal_path(path: str) -> str:
    """``path`` with its ``.`` and ``..`` segments applied, as a browser would (``%2e`` counts as a dot)."""
    segments: list[str] = []
    parts = path.split("/")[1:]
    for index, segment in enumerate(parts):
        dots = segment.lower().replace("%2e", ".")
        if dots in (".", ".."):
            if dots == ".." and segments:
                segments.pop()
            if index == len(parts) - 1:
                segments.append("")
            continue
        segments.append(segment)
    return "/" + "/".join(segments)


def public_location(location: str, upstream: str, request_path: str, upstream_prefix: str,
                    public_prefix: str) -> str | None:
    """The workload's redirect as a path under its own address on the workload origin; None when it leads
    anywhere else (another site, the portal, another workload): the portal must not be an open redirect."""
    if any(c in _AMBIGUOUS or ord(c) < 0x20 for c in location):
        return None
    parts = urlsplit(location)
    if parts.scheme or parts.netloc:
        own = urlsplit(upstream)
        default = {"http": 80, "https": 443}
        try:
            same = (parts.scheme in default and parts.hostname == own.hostname
                    and (parts.port or default[parts.scheme]) == (own.port or default[own.scheme or "http"]))
        except ValueError:  # a port that is no number
            same = False
        if not same:
            return None
    path = _normal_path(urljoin(request_path, parts.path) if parts.path else request_path.split("?", 1)[0])
    if path.startswith(upstream_prefix):
        rest = path[len(upstream_prefix):]
    elif path + "/" == upstream_prefix:
        rest = ""
    else:
        return None
    query = f"?{parts.query}" if parts.query else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return f"{public_prefix}{rest}{query}{fragment}"


def forward(request, upstream: str, path: str, token: str = "", *, upstream_prefix: str = "/",
            public_prefix: str = "/") -> HttpResponse:
    """Send the request on to ``upstream`` + ``path`` and return its answer; ``path`` is under
    ``upstream_prefix``, which the workload origin serves as ``public_prefix``."""
    target = urlsplit(upstream)
    headers = {name: request.headers[name] for name in FORWARDED_HEADERS if name in request.headers}
    if token:
        headers["Authorization"] = f"token {token}"
    body = request.body if request.method not in ("GET", "HEAD") else None
    if body is not None and len(body) > MAX_PROXIED_BODY:
        return JsonResponse({"message": _("The request body is larger than %(n)d MiB.") % {
            "n": MAX_PROXIED_BODY // (1024 * 1024)}}, status=413)
    query = request.META.get("QUERY_STRING", "")
    connection = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=UPSTREAM_TIMEOUT_SECONDS)
    try:
        connection.request(request.method, path + (f"?{query}" if query else ""), body=body, headers=headers)
        answer = connection.getresponse()
        response = HttpResponse(answer.read(), status=answer.status)
    except OSError:
        return JsonResponse({"message": _("The server did not answer; it may be restarting.")}, status=502)
    finally:
        connection.close()
    for name in RETURNED_HEADERS:
        if answer.getheader(name):
            response[name] = answer.getheader(name)
    if answer.getheader("location"):
        location = public_location(answer.getheader("location"), upstream, path, upstream_prefix, public_prefix)
        if location is None:
            return JsonResponse({"message": _(
                "The workload answered with a redirect away from its own address; the portal does not follow "
                "such redirects.")}, status=502)
        response["Location"] = location
    if "Content-Security-Policy" not in response:
        response["Content-Security-Policy"] = DEFAULT_WORKLOAD_POLICY
    return response


# --- the portal's origin: the way in ----------------------------------------------------------------------------

def _not_configured() -> JsonResponse:
    return JsonResponse({"message": _(
        "Notebooks and services are not served: the portal has no workload address (GPUPORTAL_WORKLOAD_ORIGIN).")},
        status=503)


def _with_ticket(request, workload: Workload, path: str) -> HttpResponseRedirect:
    """To the workload origin, signed in there by a single-use ticket (the query is kept)."""
    query = request.GET.copy()
    query.pop(TICKET_PARAMETER, None)
    query[TICKET_PARAMETER] = workload_origin.issue_ticket(request.user, workload)
    return HttpResponseRedirect(workload_origin.url(workload, escape_uri_path(path), query.urlencode()))


def _notebook(request, pk) -> Job:
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("cluster"), pk=pk,
                            kind=WorkloadKind.NOTEBOOK)
    if not may_open(request.user, job):
        raise PermissionDenied(_("Only the notebook's owner and the tenant's admins may open it."))
    return job


@login_required
@require_safe
def notebook_open(request, pk, path=""):
    """The notebook's portal address: checks the reader and sends them to the workload origin with a ticket."""
    job = _notebook(request, pk)
    if job.status != JobStatus.RUNNING:
        return render(request, "scheduling/notebook_closed.html", {"job": job}, status=409)
    if not workload_origin.configured():
        return _not_configured()
    return _with_ticket(request, Workload(NOTEBOOK, job.pk), path)


@login_required
@require_safe
def port_open(request, pk, name, path=""):
    """A named port's portal address: checks the reader and sends them to the workload origin with a ticket."""
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("cluster"), pk=pk)
    port = workload_queries.named_port(job, name)
    if port is None:
        raise Http404(_("Job %(id)d declared no port named %(name)s.") % {"id": job.pk, "name": name})
    if not may_open(request.user, job):
        raise PermissionDenied(_("Only the job's owner and the tenant's admins may open its ports."))
    if job.status != JobStatus.RUNNING:
        return render(request, "scheduling/notebook_closed.html", {"job": job, "port": port}, status=409)
    if not workload_origin.configured():
        return _not_configured()
    return _with_ticket(request, Workload(PORT, job.pk, port["name"]), path)


@require_safe
def service_endpoint(request, pk, path=""):
    """The service's portal address: a signed-in browser goes on to the workload origin with a ticket; a program
    (an API token) is told the service's own address."""
    workload = Workload(SERVICE, pk)
    if not request.user.is_authenticated:
        if "Authorization" in request.headers and workload_origin.configured():
            return HttpResponseRedirect(workload_origin.url(workload, escape_uri_path(path),
                                                            request.META.get("QUERY_STRING", "")), status=307)
        return redirect_to_login(request.get_full_path())
    group = JobGroup.objects.visible_to(request.user).filter(pk=pk, kind=JobGroup.Kind.SERVICE).first()
    if group is None:
        return JsonResponse({"message": _("No such service.")}, status=404)
    if not may_call(request.user, group):
        return JsonResponse({"message": _("Read-only roles may not call services.")}, status=403)
    if not workload_origin.configured():
        return _not_configured()
    return _with_ticket(request, workload, path)


# --- the workload origin ----------------------------------------------------------------------------------------

def _token_user(request):
    """The owner of the API token the request carries; None without one or with a bad one."""
    try:
        found = ApiTokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed:
        return None
    return found[0] if found else None


def _running_notebook(user, pk) -> tuple[Job | None, JsonResponse | None]:
    job = Job.objects.visible_to(user).select_related("cluster").filter(pk=pk, kind=WorkloadKind.NOTEBOOK).first()
    if job is None or not may_open(user, job):
        return None, JsonResponse({"message": _("Only the notebook's owner and the tenant's admins may open it.")},
                                  status=403)
    if job.status != JobStatus.RUNNING:
        return None, JsonResponse({"message": _("This notebook is not running, so there is nothing to open.")},
                                  status=409)
    return job, None


def _callable_service(user, pk) -> tuple[JobGroup | None, JsonResponse | None]:
    group = JobGroup.objects.visible_to(user).filter(pk=pk, kind=JobGroup.Kind.SERVICE).first()
    if group is None:
        return None, JsonResponse({"message": _("No such service.")}, status=404)
    if not may_call(user, group):
        return None, JsonResponse({"message": _("Read-only roles may not call services.")}, status=403)
    return group, None


def _running_port(user, pk, name) -> tuple[Job | None, dict | None, JsonResponse | None]:
    job = Job.objects.visible_to(user).select_related("cluster").filter(pk=pk).first()
    port = workload_queries.named_port(job, name) if job is not None else None
    if port is None:
        return None, None, JsonResponse({"message": _("No such port.")}, status=404)
    if not may_open(user, job):
        return None, None, JsonResponse({"message": _("Only the job's owner and the tenant's admins may open its "
                                                      "ports.")}, status=403)
    if job.status != JobStatus.RUNNING:
        return None, None, JsonResponse({"message": _("This job is not running, so its ports are closed.")},
                                        status=409)
    return job, port, None


def _check(workload: Workload, user) -> JsonResponse | None:
    if workload.kind == NOTEBOOK:
        return _running_notebook(user, workload.pk)[1]
    if workload.kind == PORT:
        return _running_port(user, workload.pk, workload.port)[2]
    return _callable_service(user, workload.pk)[1]


def _exchange(request, workload: Workload) -> HttpResponse:
    """The ticket's one use: the workload cookie, then on to the same address without the ticket. The browser
    goes on from this page (not by a redirect): a SameSite=Strict cookie is sent only on a navigation the
    workload origin starts itself, while a redirect would still count as the portal's."""
    user = workload_origin.redeem_ticket(request.GET.get(TICKET_PARAMETER, ""), workload)
    signed_in = user is None and workload_origin.cookie_user(request, workload) is not None  # "back" to the link
    if user is None and not signed_in:
        return JsonResponse({"message": _(
            "This sign-in link was used already or has expired: open the workload from the portal again.")},
            status=401)
    refusal = _check(workload, user) if user is not None else None
    if refusal is not None:
        return refusal
    query = request.GET.copy()
    query.pop(TICKET_PARAMETER)
    clean = escape_uri_path(request.path) + (f"?{query.urlencode()}" if query else "")
    response = HttpResponse(render_to_string("scheduling/workload_signin.html", {"next": clean}))
    response["Content-Security-Policy"] = "default-src 'none'; frame-ancestors 'none'"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    if user is not None:
        workload_origin.set_cookie(response, user, workload)
    return response


def _sign_in_first(request, workload: Workload, path: str) -> HttpResponse:
    """A browser without the workload cookie goes through the portal's sign-in (and back with a ticket)."""
    if request.method in ("GET", "HEAD") and "Authorization" not in request.headers:
        query = request.META.get("QUERY_STRING", "")
        return HttpResponseRedirect(f"{settings.PORTAL_URL.rstrip('/')}{workload.path}{escape_uri_path(path)}"
                                    + (f"?{query}" if query else ""))
    return JsonResponse({"message": _("Open it from the portal, or send an API token.")}, status=401)


def _arrival(request, workload: Workload) -> HttpResponse | None:
    """What every workload request answers before its own checks: 404 on a host that does not serve this
    workload, the ticket's exchange for a cookie; None to go on."""
    if not workload_origin.serves(request, workload):
        return workload_not_found(request)
    if request.method in ("GET", "HEAD") and TICKET_PARAMETER in request.GET:
        return _exchange(request, workload)
    return None


def _cross_origin() -> JsonResponse:
    return JsonResponse({"message": _("Refused: this request comes from another site than the workload's.")},
                        status=403)


@csrf_exempt  # the workload origin's requests are not the portal's: its SameSite=Strict cookie and Origin check
def workload_notebook(request, pk, path=""):
    workload = Workload(NOTEBOOK, pk)
    if (arrival := _arrival(request, workload)) is not None:
        return arrival
    user = workload_origin.cookie_user(request, workload)
    if user is None:
        return _sign_in_first(request, workload, path)
    if request.method not in SAFE_METHODS and not workload_origin.same_origin_or_unsaid(request, workload):
        return _cross_origin()
    job, refusal = _running_notebook(user, pk)
    if refusal is not None:
        return refusal
    live = live_state(job)
    if not live.upstream:
        return JsonResponse({"message": _("The notebook server does not answer yet.")}, status=503)
    return forward(request, live.upstream, workload.path + escape_uri_path(path), notebook_token(job),
                   upstream_prefix=workload.path, public_prefix=workload.path)


def _caller(request, workload: Workload, path: str):
    """Who calls a service or a port, by API token or the workload origin's cookie, as (user, None); or (None, the
    answer instead): a sign-in redirect's arrival, a sign-in first, a browser's write from another origin."""
    if (arrival := _arrival(request, workload)) is not None:
        return None, arrival
    by_token = "Authorization" in request.headers
    user = _token_user(request) if by_token else workload_origin.cookie_user(request, workload)
    if user is None:
        return None, _sign_in_first(request, workload, path)
    if (not by_token and request.method not in SAFE_METHODS
            and not workload_origin.same_origin_or_unsaid(request, workload)):
        return None, _cross_origin()
    return user, None


@csrf_exempt  # programs call with an API token; a browser's cookie is SameSite=Strict and its Origin is checked
def workload_service(request, pk, path=""):
    workload = Workload(SERVICE, pk)
    user, answer = _caller(request, workload, path)
    if answer is not None:
        return answer
    group, refusal = _callable_service(user, pk)
    if refusal is not None:
        return refusal
    ready = [m for m in group_view(group).members if m.live.ready and m.live.upstream]
    if not ready:
        return JsonResponse({"message": _("No replica of %(name)s is ready.") % {"name": group.name}}, status=503)
    chosen = ready[next(_round_robin) % len(ready)]
    return forward(request, chosen.live.upstream, "/" + escape_uri_path(path), upstream_prefix="/",
                   public_prefix=workload.path)


@csrf_exempt  # as a service: an API token, or the SameSite=Strict cookie with the Origin checked
def workload_port(request, pk, name, path=""):
    workload = Workload(PORT, pk, name)
    user, answer = _caller(request, workload, path)
    if answer is not None:
        return answer
    job, port, refusal = _running_port(user, pk, name)
    if refusal is not None:
        return refusal
    if refused := workload_queries.port_refusal(job, port):
        return JsonResponse({"message": refused}, status=403)
    upstream = workload_queries.port_upstream(job, port)
    if not upstream:
        return JsonResponse({"message": _("Nothing answers on port %(port)d of job %(id)d yet.") % {
            "port": port["port"], "id": job.pk}}, status=503)
    return forward(request, upstream, "/" + escape_uri_path(path), upstream_prefix="/", public_prefix=workload.path)


def workload_not_found(request, exception=None):
    """The workload origin's 404: none of the portal's pages are there (nor its layout, whose links are the
    portal's)."""
    return JsonResponse({"message": _("Not found.")}, status=404)


def workload_forbidden(request, exception=None):
    return JsonResponse({"message": _("Forbidden.")}, status=403)


def workload_bad_request(request, exception=None):
    return JsonResponse({"message": _("Bad request.")}, status=400)


def workload_server_error(request):
    return JsonResponse({"message": _("The portal failed to answer; the error was logged.")}, status=500)


# --- an ingress's access checks (auth-url) ----------------------------------------------------------------------

def _from_ingress(request) -> bool:
    secret = settings.WORKLOADS.get("INGRESS_AUTH_SECRET") or ""
    given = request.headers.get(INGRESS_AUTH_HEADER, "")
    return bool(secret) and hmac.compare_digest(given.encode(), secret.encode())


def _ingress_user(request, workload: Workload, by_token: bool):
    """(the reader, whether the answer must set the workload cookie): by an API token, the workload cookie, or
    (asked by the ingress only) a ticket in the original address's query, spent here."""
    if by_token:
        return _token_user(request), False
    user = workload_origin.cookie_user(request, workload)
    if user is not None or not _from_ingress(request):
        return user, False
    original = urlsplit(request.headers.get("X-Original-Url", "") or request.headers.get("X-Original-Uri", ""))
    ticket = parse_qs(original.query).get(TICKET_PARAMETER, [""])[0]
    user = workload_origin.redeem_ticket(ticket, workload) if ticket else None
    return user, user is not None


def _unsafe_cross_origin(request, workload: Workload) -> bool:
    method = request.headers.get("X-Original-Method", request.method).upper()
    return method not in SAFE_METHODS and not workload_origin.same_origin_or_unsaid(request, workload)


@require_safe
def notebook_auth(request, pk):
    """For an ingress's ``auth_request`` (with the shared secret): 204 and the notebook's token for nginx when
    the workload cookie's reader may open the notebook; nothing for anyone else."""
    if not _from_ingress(request):
        return HttpResponse(status=403)
    workload = Workload(NOTEBOOK, pk)
    user, new_cookie = _ingress_user(request, workload, by_token=False)
    if user is None:
        return HttpResponse(status=401)
    job, refusal = _running_notebook(user, pk)
    if refusal is not None or _unsafe_cross_origin(request, workload):
        return HttpResponse(status=403)
    allowed = HttpResponse(status=204)
    allowed["Authorization"] = f"token {notebook_token(job)}"  # nginx hands it on to the server only
    if new_cookie:
        workload_origin.set_cookie(allowed, user, workload)
    return allowed


@require_safe
def service_auth(request, pk):
    """For an ingress's ``auth_request`` in front of a service: 204 for those who may call it (an API token or
    the workload cookie)."""
    workload = Workload(SERVICE, pk)
    by_token = "Authorization" in request.headers
    user, new_cookie = _ingress_user(request, workload, by_token)
    if user is None:
        return HttpResponse(status=401)
    group = JobGroup.objects.filter(pk=pk, kind=JobGroup.Kind.SERVICE, stopped_at__isnull=True).first()
    if group is None or not may_call(user, group) or (not by_token and _unsafe_cross_origin(request, workload)):
        return HttpResponse(status=403)
    allowed = HttpResponse(status=204)
    if new_cookie:
        workload_origin.set_cookie(allowed, user, workload)
    return allowed


# --- pages of services and arrays -------------------------------------------------------------------------------

@login_required
def service_detail(request, pk):
    group = visible_group(request.user, pk, JobGroup.Kind.SERVICE)
    return render(request, "scheduling/service_detail.html", {
        "view": group_view(group), "group": group, "endpoint": service_url(group.pk),
        "can_call": may_call(request.user, group),
        "can_operate": group.stopped_at is None and access.can_manage_job(request.user, group.tenant_id,
                                                                           group.owner_id),
        "form_values": request.POST if request.method == "POST" else {}})


@login_required
@require_POST
def service_action(request, pk, action):
    group = visible_group(request.user, pk, JobGroup.Kind.SERVICE)
    operations = {"scale": lambda: workloads.scale_service(request.user, group, request.POST),
                  "rollout": lambda: workloads.rollout_service(request.user, group, request.POST),
                  "stop": lambda: workloads.stop_service(request.user, group)}
    try:
        operations[action]()
    except ValidationError as error:
        details = error.message_dict if hasattr(error, "error_dict") else {"": error.messages}
        view = group_view(group)
        return render(request, "scheduling/service_detail.html", {
            "view": view, "group": group, "endpoint": service_url(group.pk), "can_call": may_call(request.user, group),
            "can_operate": True, "errors": details, "form_values": request.POST}, status=400)
    done = {"scale": _("Scaled to %(n)d replicas.") % {"n": group.size},
            "rollout": _("Rolling out revision %(r)d.") % {"r": group.revision},
            "stop": _("Service stopped; its GPUs are freed.")}
    messages.success(request, done[action])
    return redirect("scheduling:service-detail", pk=group.pk)


@login_required
def array_detail(request, pk):
    group = visible_group(request.user, pk, JobGroup.Kind.ARRAY)
    return render(request, "scheduling/array_detail.html", {
        "view": group_view(group, probe=False), "group": group,
        "can_cancel": access.can_manage_job(request.user, group.tenant_id, group.owner_id)})


@login_required
@require_POST
def array_cancel(request, pk):
    group = visible_group(request.user, pk, JobGroup.Kind.ARRAY)
    count = workloads.cancel_array(request.user, group)
    messages.success(request, _("Cancelled %(n)d tasks.") % {"n": count})
    return redirect("scheduling:array-detail", pk=group.pk)
