"""``GET /metrics``: the platform's state in Prometheus text format.

Gauges are read from the live tables at scrape time (queue, GPU health, agents, jobs in transit, waits,
holdings and quotas); counters that many processes add to (pass durations, dispatch errors, poll failures) come
from ``OperationalCounter``. ``METRICS`` declares every family; ``deploy/prometheus`` and ``deploy/grafana``
build on those names only.
"""

from __future__ import annotations

import hmac
import math
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Exists, Min, OuterRef, Q, Subquery, Sum
from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from fleet.models import GPU, Cluster, Node
from gpuportal.models import OperationalCounter
from gpuportal.observability.telemetry import label_text
from gpuportal.storage.db import percentile
from gpuportal.text.dates import local_day, month_start
from metering.models import ClusterAccountingDaily
from scheduling.models import Job, JobAllocation, JobEvent, JobStatus
from scheduling.passes.fragmentation import fragmentation_now
from tenants.models import Quota

#: Every family ``/metrics`` exports: name -> (Prometheus type, help). The one list the Grafana dashboard and the
#: alerting rules under ``deploy/`` are checked against (tests/deploy/test_observability.py), so a name used
#: there is one that exists here. Names follow Prometheus' rules as ``promtool check metrics`` enforces them:
#: counters end in ``_total``, only summaries have ``_sum``/``_count`` samples, units (seconds, GPUs) are in
#: the name.
METRICS = {
    "gpuportal_queue_depth": ("gauge", "Jobs waiting (queued or pending approval) per tenant and GPU model."),
    "gpuportal_queue_oldest_wait_seconds": ("gauge", "Age of the oldest waiting job per tenant and GPU model."),
    "gpuportal_jobs_pending_approval": ("gauge", "Jobs waiting for an approver per tenant."),
    "gpuportal_gpus": ("gauge", "GPUs per model and health state."),
    "gpuportal_nodes": ("gauge", "Nodes per cluster and state (health, or the admin state when set)."),
    "gpuportal_agent_up": ("gauge", "1 when the node agent answered the portal's last poll, 0 when it missed it "
                                    "(or never answered); nodes with an agent URL only."),
    "gpuportal_agent_last_seen_timestamp_seconds": ("gauge", "When the node agent last answered a poll (Unix "
                                                             "time)."),
    "gpuportal_jobs_active": ("gauge", "Jobs holding GPUs per status."),
    "gpuportal_jobs_oldest_in_status_seconds": ("gauge", "How long the oldest job in this status (admitted, "
                                                         "dispatching) has been in it; 0 when none is."),
    "gpuportal_job_wait_p95_seconds": ("gauge", "95th percentile of the wait from submission to first admission "
                                                "of the jobs first admitted in the last hour, per GPU model."),
    "gpuportal_jobs_first_admitted_last_hour": ("gauge", "Jobs first admitted in the last hour per GPU model (the "
                                                         "jobs behind gpuportal_job_wait_p95_seconds)."),
    "gpuportal_tenant_held_gpus": ("gauge", "GPUs held now per tenant and GPU model (shares of a GPU as "
                                            "fractions)."),
    "gpuportal_quota_guaranteed_gpus": ("gauge", "GPUs guaranteed to a tenant per GPU model by its quota."),
    "gpuportal_free_gpus": ("gauge", "Free GPU capacity on schedulable nodes' healthy GPUs per cluster and GPU "
                                     "model (shares of a GPU as fractions)."),
    "gpuportal_fragmented_gpus": ("gauge", "Of the free GPU capacity, what the last week's job shapes could not "
                                           "use (FGD's fragmentation measure) per cluster and GPU model."),
    "gpuportal_quota_limit_gpus": ("gauge", "GPUs a tenant may hold at most per GPU model (its quota limit, "
                                            "without temporary bursts)."),
    "gpuportal_outside_gpu_seconds": ("gauge", "GPU-seconds held this month by work submitted to Slurm directly, "
                                               "as slurmdb accounted it, per cluster, tenant and account (tenant "
                                               "empty: no tenant is mapped to the account)."),
    "gpuportal_scheduling_pass_duration_seconds": ("summary", "Time spent in completed scheduling passes."),
    "gpuportal_scheduling_last_pass_duration_seconds": ("gauge", "Duration of the last completed scheduling "
                                                                 "pass."),
    "gpuportal_scheduling_pass_failures_total": ("counter", "Scheduling passes that raised (rolled back)."),
    "gpuportal_scheduling_snapshot_mismatches_total": ("counter", "Rows the scheduler's kept view held differently "
                                                                  "from the database at its periodic check."),
    "gpuportal_cache_failures_total": ("counter", "Shared-cache operations that failed (timed out, refused), per "
                                                  "operation; the request went on without the cache."),
    "gpuportal_metrics_write_failures_total": ("counter", "Operational samples that could not be written (the "
                                                          "database failed under them), per metric."),
    "gpuportal_dispatch_errors_total": ("counter", "Dispatches that failed, per cluster."),
    "gpuportal_agent_poll_failures_total": ("counter", "Node-agent polls that got no answer."),
    "gpuportal_agent_poll_cycles_skipped_total": ("counter", "Agent poll cycles skipped because another cycle "
                                                             "was still running."),
    "gpuportal_reconcile_repairs_total": ("counter", "Repairs made by the reconciler, per kind (released, "
                                                     "redispatched, recreated, deleted)."),
    "gpuportal_enqueue_failures_total": ("counter", "Tasks the broker could not take, per task (the reconciler "
                                                    "and the next beat tick do their work)."),
}

#: ``OperationalCounter`` rows whose stored name is not the exported one. ``telemetry.observe`` stores a
#: duration as ``<name>_last``, ``<name>_sum`` and ``<name>_count``: the last two are the samples of the summary
#: ``<name>`` as they are; the first is a gauge of its own, exported with its unit last. Renaming here, where
#: the rows are read, leaves every writer and every stored row as it is.
EXPORTED_NAME = {
    "gpuportal_scheduling_pass_duration_seconds_last": "gpuportal_scheduling_last_pass_duration_seconds",
}

#: Counters (and summary samples) exported at 0 before anything added to them: ``increase()`` and ``rate()``
#: in the alerting rules see the first error only when a series existed before it.
ZERO_UNTIL_COUNTED = ("gpuportal_scheduling_pass_failures_total", "gpuportal_scheduling_snapshot_mismatches_total",
                      "gpuportal_cache_failures_total",
                      "gpuportal_metrics_write_failures_total",
                      "gpuportal_agent_poll_failures_total", "gpuportal_agent_poll_cycles_skipped_total",
                      "gpuportal_scheduling_pass_duration_seconds_sum",
                      "gpuportal_scheduling_pass_duration_seconds_count")

#: Statuses a job should pass through in seconds; the age of the oldest one in each is what "stuck" alerts read.
TRANSIT_STATUSES = (JobStatus.ADMITTED, JobStatus.DISPATCHING)

#: The window of ``gpuportal_job_wait_p95_seconds``: the first admissions of the last hour (read through the
#: index on ``JobEvent.at``, so a scrape costs the admissions of one hour, not the whole job history).
WAIT_WINDOW = timedelta(hours=1)


def family_of(sample_name: str) -> str:
    """The metric family a sample belongs to: a summary's ``_sum`` and ``_count`` belong to the summary."""
    for suffix in ("_sum", "_count"):
        base = sample_name.removesuffix(suffix)
        if base != sample_name and METRICS.get(base, ("",))[0] == "summary":
            return base
    return sample_name


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


def samples(now=None) -> list[tuple[str, dict | str, float]]:
    """Every sample of ``/metrics`` as (name, labels, value): live gauges from the tables, then the shared
    counters of ``OperationalCounter`` under their exported names."""
    now = now or timezone.now()
    out: list[tuple[str, dict | str, float]] = []
    _queue(out, now)
    models = set()
    for row in GPU.objects.values("model", "health").annotate(n=Count("id")).order_by("model", "health"):
        out.append(("gpuportal_gpus", {"gpu_model": row["model"], "health": row["health"]}, row["n"]))
        models.add(row["model"])
    nodes: dict[tuple[str, str], int] = {}
    for node in Node.objects.select_related("cluster").only("cluster__name", "health", "admin_state"):
        key = (node.cluster.name, node.state)
        nodes[key] = nodes.get(key, 0) + 1
    out.extend(("gpuportal_nodes", {"cluster": c, "state": s}, n) for (c, s), n in sorted(nodes.items()))
    _agents(out)
    for row in Job.objects.active().values("status").annotate(n=Count("id")).order_by("status"):
        out.append(("gpuportal_jobs_active", {"status": row["status"]}, row["n"]))
    _jobs_in_transit(out, now)
    _waits(out, now, models)
    _holdings(out)
    for figure in fragmentation_now(now):
        labels = {"cluster": figure.cluster, "gpu_model": figure.gpu_model}
        out.append(("gpuportal_free_gpus", labels, figure.free_gpus))
        out.append(("gpuportal_fragmented_gpus", labels, figure.fragmented_gpus))
    _outside(out, now)
    _counters(out)
    return out


def _outside(out: list, now) -> None:
    """The month's GPU-seconds of work submitted to Slurm directly (``ClusterAccountingDaily``, the accounting
    import's rows): a gauge, since a re-import replaces a day's figure rather than adding to it."""
    rows = (ClusterAccountingDaily.objects.filter(day__gte=month_start(local_day(now)), from_portal=False)
            .values("cluster__name", "tenant__name", "account").annotate(seconds=Sum("gpu_seconds"))
            .order_by("cluster__name", "tenant__name", "account"))
    for row in rows:
        labels = {"cluster": row["cluster__name"], "tenant": row["tenant__name"] or "", "account": row["account"]}
        out.append(("gpuportal_outside_gpu_seconds", labels, round(row["seconds"] or 0.0, 3)))


def _queue(out: list, now) -> None:
    waiting = (Job.objects.waiting().values("tenant__name", "gpu_model")
               .annotate(n=Count("id"), oldest=Min("submitted_at"),
                         pending=Count("id", filter=Q(status=JobStatus.PENDING))))
    pending: dict[str, int] = {}
    for row in waiting.order_by("tenant__name", "gpu_model"):
        labels = {"tenant": row["tenant__name"], "gpu_model": row["gpu_model"]}
        out.append(("gpuportal_queue_depth", labels, row["n"]))
        out.append(("gpuportal_queue_oldest_wait_seconds", labels, round((now - row["oldest"]).total_seconds(), 1)))
        pending[row["tenant__name"]] = pending.get(row["tenant__name"], 0) + row["pending"]
    out.extend(("gpuportal_jobs_pending_approval", {"tenant": tenant}, n) for tenant, n in sorted(pending.items()))


def _agents(out: list) -> None:
    """Whether each node agent answered the last poll, and when it last did (nodes of a simulated cluster have
    no agent and no series)."""
    rows = (Node.objects.exclude(agent_url="").order_by("cluster__name", "name")
            .values_list("cluster__name", "name", "missed_polls", "last_seen"))
    for cluster, name, missed, last_seen in rows:
        labels = {"cluster": cluster, "node": name}
        out.append(("gpuportal_agent_up", labels, int(last_seen is not None and missed == 0)))
        if last_seen is not None:
            out.append(("gpuportal_agent_last_seen_timestamp_seconds", labels, round(last_seen.timestamp(), 3)))


def _jobs_in_transit(out: list, now) -> None:
    """Age of the oldest job in each transit status, from the event that moved it there (``admitted_at`` for a
    job without one); only jobs in those statuses are read, a few per GPU at most."""
    entered = (JobEvent.objects.filter(job=OuterRef("pk"), kind=JobEvent.Kind.STATUS, to_status=OuterRef("status"))
               .order_by("-at", "-id").values("at")[:1])
    oldest: dict[str, float] = dict.fromkeys(TRANSIT_STATUSES, 0.0)
    rows = (Job.objects.filter(status__in=TRANSIT_STATUSES).annotate(entered=Subquery(entered))
            .values_list("status", "entered", "admitted_at", "submitted_at"))
    for status, entered_at, admitted_at, submitted_at in rows:
        since = entered_at or admitted_at or submitted_at
        oldest[status] = max(oldest[status], round((now - since).total_seconds(), 1))
    out.extend(("gpuportal_jobs_oldest_in_status_seconds", {"status": status}, age) for status, age in oldest.items())


def _waits(out: list, now, models: set[str]) -> None:
    """p95 of submission-to-first-admission over the jobs first admitted in ``WAIT_WINDOW`` (the definition of
    the monthly report's waits), per GPU model; every model of the fleet gets its job count, 0 included."""
    earlier = JobEvent.objects.filter(job=OuterRef("job"), kind=JobEvent.Kind.STATUS, to_status=JobStatus.ADMITTED,
                                      at__lt=OuterRef("at"))
    firsts = (JobEvent.objects.filter(at__gt=now - WAIT_WINDOW, at__lte=now, kind=JobEvent.Kind.STATUS,
                                      to_status=JobStatus.ADMITTED)
              .filter(~Exists(earlier)).values_list("job__gpu_model", "at", "job__submitted_at"))
    waits: dict[str, list[float]] = {model: [] for model in models}
    for model, admitted_at, submitted_at in firsts:
        waits.setdefault(model, []).append(max(0.0, (admitted_at - submitted_at).total_seconds()))
    for model, seconds in sorted(waits.items()):
        out.append(("gpuportal_jobs_first_admitted_last_hour", {"gpu_model": model}, len(seconds)))
        if seconds:
            out.append(("gpuportal_job_wait_p95_seconds", {"gpu_model": model}, round(percentile(seconds, 0.95), 1)))


def _holdings(out: list) -> None:
    held = (JobAllocation.objects.filter(released_at__isnull=True).values("job__tenant__name", "gpu__model")
            .annotate(gpus=Sum("fraction")).order_by("job__tenant__name", "gpu__model"))
    for row in held:
        out.append(("gpuportal_tenant_held_gpus", {"tenant": row["job__tenant__name"], "gpu_model": row["gpu__model"]},
                    float(row["gpus"])))
    for tenant, model, guaranteed, limit in (Quota.objects.order_by("tenant__name", "gpu_model")
                                             .values_list("tenant__name", "gpu_model", "guaranteed_gpus",
                                                          "limit_gpus")):
        labels = {"tenant": tenant, "gpu_model": model}
        out += [("gpuportal_quota_guaranteed_gpus", labels, guaranteed), ("gpuportal_quota_limit_gpus", labels, limit)]


def _counters(out: list) -> None:
    """The shared counters under their exported names, with 0 for those nothing has added to yet."""
    seen = set()
    for counter in OperationalCounter.objects.order_by("name", "labels"):
        name = EXPORTED_NAME.get(counter.name, counter.name)
        seen.add((name, counter.labels))
        out.append((name, counter.labels, counter.value))
    expected = [(name, "") for name in ZERO_UNTIL_COUNTED]
    expected += [("gpuportal_dispatch_errors_total", label_text({"cluster": cluster}))
                 for cluster in Cluster.objects.order_by("name").values_list("name", flat=True)]
    out.extend((name, labels, 0) for name, labels in expected if (name, labels) not in seen)


def number_text(value) -> str:
    """A sample value in full: ``%g`` would keep 6 digits and turn a Unix time or a large counter into a
    rounded one (1796061471.24 -> 1.79606e+09)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def render(sample_list) -> str:
    """The text format: each family once, with its HELP and TYPE, and all its samples together after them
    (a summary's ``_sum`` and ``_count`` under the summary's name)."""
    lines, described = [], set()
    # Sorting by family is stable, so each family's samples keep the order they were collected in.
    for name, labels, value in sorted(sample_list, key=lambda sample: (family_of(sample[0]), sample[0])):
        family = family_of(name)
        if family not in described and family in METRICS:
            kind, text = METRICS[family]
            lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}"]
            described.add(family)
        text = labels if isinstance(labels, str) else label_text(labels)
        lines.append(f"{name}{{{text}}} {number_text(value)}" if text else f"{name} {number_text(value)}")
    return "\n".join(lines) + "\n"


@require_GET
def metrics(request):
    if not allowed(request):
        text = (_("metrics: set GPUPORTAL_METRICS_TOKEN and send it as a bearer token") if not
                settings.METRICS["TOKEN"] and settings.ENVIRONMENT == "production"
                else _("metrics: send the configured bearer token, or scrape from an allowed address"))
        return HttpResponse(text + "\n", status=403, content_type="text/plain; charset=utf-8")
    return HttpResponse(render(samples()), content_type="text/plain; version=0.0.4; charset=utf-8")
