"""Pages of notebooks, services and arrays, and the portal's own way in to them.

A notebook is reached only through ``/jobs/<id>/open/``: the portal checks the reader (``may_open``) and
forwards the request to the server with the server's secret token, which no user ever sees. Where an ingress
serves notebooks (websockets), it asks ``/jobs/<id>/open-auth/`` first (nginx ``auth_request``): 204 lets the
request through, 401/403 stop it. A service is called through ``/services/<id>/endpoint/`` by members of its
tenant (a session or an API token), spread over its ready replicas. The portal's own cookies and the
caller's credentials are never forwarded.
"""

from __future__ import annotations

import http.client
import itertools
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from accounts.authentication import ApiTokenAuthentication
from tenants import access

from . import workloads
from .job_tokens import notebook_token
from .models import Job, JobGroup, JobStatus, WorkloadKind
from .workload_queries import group_view, live_state, may_call, may_open, visible_group

#: Request headers passed to a notebook or a service (nothing that identifies the caller to the portal).
FORWARDED_HEADERS = ("accept", "accept-language", "content-type", "user-agent", "x-requested-with")
#: Response headers passed back (hop-by-hop headers and cookies stay with the upstream).
RETURNED_HEADERS = ("content-type", "cache-control", "etag", "last-modified", "location")
#: The most a proxied request body may carry.
MAX_PROXIED_BODY = 16 * 1024 * 1024
UPSTREAM_TIMEOUT_SECONDS = 30
_round_robin = itertools.count()


def forward(request, upstream: str, path: str, token: str = "") -> HttpResponse:
    """Send the request on to ``upstream`` + ``path`` and return its answer."""
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
        for name in RETURNED_HEADERS:
            if answer.getheader(name):
                response[name] = answer.getheader(name)
        return response
    except OSError:
        return JsonResponse({"message": _("The server did not answer; it may be restarting.")}, status=502)
    finally:
        connection.close()


def _notebook(request, pk) -> Job:
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("cluster"), pk=pk,
                            kind=WorkloadKind.NOTEBOOK)
    if not may_open(request.user, job):
        raise PermissionDenied(_("Only the notebook's owner and the tenant's admins may open it."))
    return job


@csrf_exempt  # the notebook's own requests (its API) carry no portal CSRF token; the session and may_open guard it
@login_required
def notebook_open(request, pk, path=""):
    job = _notebook(request, pk)
    if job.status != JobStatus.RUNNING:
        return render(request, "scheduling/notebook_closed.html", {"job": job}, status=409)
    live = live_state(job)
    if not live.upstream:
        return JsonResponse({"message": _("The notebook server does not answer yet.")}, status=503)
    return forward(request, live.upstream, f"/jobs/{job.pk}/open/{path}", notebook_token(job))


def notebook_auth(request, pk):
    """For an ingress's ``auth_request``: 204 when the signed-in reader may open the notebook."""
    if not request.user.is_authenticated:
        return HttpResponse(status=401)
    job = Job.objects.visible_to(request.user).filter(pk=pk, kind=WorkloadKind.NOTEBOOK).first()
    if job is None or not may_open(request.user, job) or job.status != JobStatus.RUNNING:
        return HttpResponse(status=403)
    allowed = HttpResponse(status=204)
    allowed["Authorization"] = f"token {notebook_token(job)}"  # the ingress hands it on to the server only
    return allowed


def service_auth(request, pk):
    """For an ingress's ``auth_request`` in front of a service: 204 for members of its tenant."""
    user = _caller(request)
    if user is None:
        return HttpResponse(status=401)
    group = JobGroup.objects.filter(pk=pk, kind=JobGroup.Kind.SERVICE, stopped_at__isnull=True).first()
    return HttpResponse(status=204 if group is not None and may_call(user, group) else 403)


def _caller(request):
    """The signed-in user, or the owner of the API token the request carries."""
    if request.user.is_authenticated:
        return request.user
    try:
        found = ApiTokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed:
        return None
    return found[0] if found else None


@csrf_exempt  # called by programs with an API token; a session caller is checked the same way
def service_endpoint(request, pk, path=""):
    user = _caller(request)
    if user is None:
        return JsonResponse({"message": _("Sign in or send an API token.")}, status=401)
    group = JobGroup.objects.filter(pk=pk, kind=JobGroup.Kind.SERVICE).first()
    if group is None or not may_call(user, group):
        return JsonResponse({"message": _("No such service.")}, status=404)
    ready = [m for m in group_view(group).members if m.live.ready and m.live.upstream]
    if not ready:
        return JsonResponse({"message": _("No replica of %(name)s is ready.") % {"name": group.name}}, status=503)
    chosen = ready[next(_round_robin) % len(ready)]
    return forward(request, chosen.live.upstream, f"/{path}")


@login_required
def service_detail(request, pk):
    group = visible_group(request.user, pk, JobGroup.Kind.SERVICE)
    return render(request, "scheduling/service_detail.html", {
        "view": group_view(group), "group": group,
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
            "view": view, "group": group, "can_operate": True, "errors": details, "form_values": request.POST},
            status=400)
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
