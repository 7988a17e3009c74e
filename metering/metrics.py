"""``GET /metrics``: the platform's state in Prometheus text format.

Gauges are read from the live tables at scrape time (queue, GPU health); counters that many processes add
to (pass durations, dispatch errors, poll failures) come from ``OperationalCounter``.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from fleet.models import GPU, Node
from gpuportal.models import OperationalCounter
from gpuportal.telemetry import label_text
from scheduling.models import Job

HELP = {
    "gpuportal_queue_depth": ("gauge", "Jobs waiting (queued or pending approval) per tenant and GPU model."),
    "gpuportal_queue_oldest_wait_seconds": ("gauge", "Age of the oldest waiting job per tenant and GPU model."),
    "gpuportal_gpus": ("gauge", "GPUs per model and health state."),
    "gpuportal_nodes": ("gauge", "Nodes per cluster and state (health, or the admin state when set)."),
    "gpuportal_jobs_active": ("gauge", "Jobs holding GPUs per status."),
    "gpuportal_scheduling_pass_duration_seconds_last": ("gauge", "Duration of the last scheduling pass."),
    "gpuportal_scheduling_pass_duration_seconds_sum": ("counter", "Total seconds spent in scheduling passes."),
    "gpuportal_scheduling_pass_duration_seconds_count": ("counter", "Scheduling passes run."),
    "gpuportal_dispatch_errors_total": ("counter", "Dispatches that failed, per cluster."),
    "gpuportal_agent_poll_failures_total": ("counter", "Node-agent polls that got no answer."),
    "gpuportal_reconcile_repairs_total": ("counter", "Repairs made by the reconciler, per kind (released, "
                                                     "redispatched, recreated, deleted)."),
    "gpuportal_enqueue_failures_total": ("counter", "Tasks the broker could not take, per task (the reconciler "
                                                    "and the next beat tick do their work)."),
}


def _client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "")


def allowed(request) -> bool:
    """With METRICS["TOKEN"] set, the bearer token decides; without it, the client address (embedded only).

    In production the address proves nothing: every client behind a local reverse proxy arrives from
    loopback. So there, without a token nobody may scrape."""
    token = settings.METRICS["TOKEN"]
    if settings.ENVIRONMENT == "production" and not token:
        return False
    if token:
        sent = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(sent.encode(), token.encode())
    return _client_address(request) in settings.METRICS["ALLOWED_IPS"]


def samples(now=None) -> list[tuple[str, dict, float]]:
    now = now or timezone.now()
    out: list[tuple[str, dict, float]] = []
    waiting = (Job.objects.waiting().values("tenant__name", "gpu_model")
               .annotate(n=Count("id"), oldest=Min("submitted_at")))
    for row in waiting.order_by("tenant__name", "gpu_model"):
        labels = {"tenant": row["tenant__name"], "gpu_model": row["gpu_model"]}
        out.append(("gpuportal_queue_depth", labels, row["n"]))
        out.append(("gpuportal_queue_oldest_wait_seconds", labels, round((now - row["oldest"]).total_seconds(), 1)))
    for row in GPU.objects.values("model", "health").annotate(n=Count("id")).order_by("model", "health"):
        out.append(("gpuportal_gpus", {"gpu_model": row["model"], "health": row["health"]}, row["n"]))
    nodes: dict[tuple[str, str], int] = {}
    for node in Node.objects.select_related("cluster").only("cluster__name", "health", "admin_state"):
        key = (node.cluster.name, node.state)
        nodes[key] = nodes.get(key, 0) + 1
    out.extend(("gpuportal_nodes", {"cluster": c, "state": s}, n) for (c, s), n in sorted(nodes.items()))
    for row in Job.objects.active().values("status").annotate(n=Count("id")).order_by("status"):
        out.append(("gpuportal_jobs_active", {"status": row["status"]}, row["n"]))
    for counter in OperationalCounter.objects.order_by("name", "labels"):
        out.append((counter.name, counter.labels, counter.value))
    return out


def render(sample_list) -> str:
    lines, described = [], set()
    # A metric's samples must be one group in the text format: order by name (stable, so labels keep order).
    for name, labels, value in sorted(sample_list, key=lambda sample: sample[0]):
        if name not in described and name in HELP:
            kind, text = HELP[name]
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            described.add(name)
        text = labels if isinstance(labels, str) else label_text(labels)
        lines.append(f"{name}{{{text}}} {value:g}" if text else f"{name} {value:g}")
    return "\n".join(lines) + "\n"


@require_GET
def metrics(request):
    if not allowed(request):
        text = (_("metrics: set GPUPORTAL_METRICS_TOKEN and send it as a bearer token") if not
                settings.METRICS["TOKEN"] and settings.ENVIRONMENT == "production"
                else _("metrics: send the configured bearer token, or scrape from an allowed address"))
        return HttpResponse(text + "\n", status=403, content_type="text/plain; charset=utf-8")
    return HttpResponse(render(samples()), content_type="text/plain; version=0.0.4; charset=utf-8")
