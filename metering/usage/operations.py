"""The manager dashboard: resources, jobs and governance over the last days, per GPU model and tenant.

Grouped the way platform teams review a shared cluster: first the resources (to find the bottleneck),
then the jobs (to judge their quality), then governance (who used what, who changed what, what to buy).
Everything is read from the rollups and the job facts, so the page costs the same on a busy platform.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.translation import gettext as _

from fleet.models import NodeEvent
from gpuportal.storage.db import percentile
from gpuportal.text.dates import day_start, local_day
from metering.models import CapacityDaily, JobFact, UsageDaily
from metering.reports import capacity_plan
from metering.reports.monthly import _capacity, recommendations
from metering.reports.presentation import Section, advice_section, bars, lines_by
from scheduling.models import Job, JobStatus
from scheduling.passes.fragmentation import WORKLOAD_DAYS, fragmentation_now
from tenants.models import Membership, PlatformRole

WINDOW_CHOICES = (7, 30, 90)


def window_days(text) -> int:
    try:
        days = int(text)
    except (TypeError, ValueError):
        return 30
    return days if days in WINDOW_CHOICES else 30


def _series(rows, key: str, title: str, y_title: str, columns, name: str, kind="scatter", stacked=False) -> Section:
    return Section(name, title, columns, rows, lines_by(rows, "day", columns[1][0], key, y_title, kind=kind,
                                                        stacked=stacked))


@dataclass(frozen=True, slots=True)
class DashboardGroup:
    """A group of the operations dashboard: ``name`` (its anchor), its translated ``title``, the question it
    answers (``purpose``) and its sections (chart, table and CSV each)."""

    name: str
    title: str
    purpose: str
    sections: list[Section]


def dashboard(days: int = 30, now=None) -> list[DashboardGroup]:
    """The dashboard of the last ``days`` days up to ``now``: resources, jobs, governance."""
    now = now or timezone.now()
    first = local_day(now) - timedelta(days=days - 1)
    t0 = day_start(first)
    capacity = list(CapacityDaily.objects.filter(day__gte=first).values())
    for row in capacity:
        row["day"] = row["day"].isoformat()
        row["network_mb_per_s"] = round(row["network_bytes_per_s"] / 1e6, 2) if row["network_bytes_per_s"] else None
        row["storage_mb_per_s"] = (round(row["storage_read_bytes_per_s"] / 1e6, 2)
                                   if row["storage_read_bytes_per_s"] else None)
    facts = list(JobFact.objects.filter(submitted_at__gte=t0 - timedelta(days=days)).values(
        "job_id", "tenant__name", "task_type__code", "gpu_model", "gpus", "submitted_at", "first_admitted_at",
        "wait_seconds", "finished_at", "status", "failure_category", "retries", "preemptions"))
    day = _("Day")
    model = _("GPU model")
    return [
        DashboardGroup("resources", _("Resources"), _("Where is the bottleneck?"),
                       _resources(capacity, facts, t0, day, model)),
        DashboardGroup("jobs", _("Jobs"), _("How good is the work that runs?"), _jobs(facts, t0, day, model)),
        DashboardGroup("governance", _("Governance"), _("Who used what, who changed what, what to buy?"),
                       _governance(first, t0, now, facts, day)),
    ]


def _fragmentation_section(model: str) -> Section:
    """Free GPUs now and how much of them the last week's job shapes could not use (FGD's measure)."""
    rows = [{"cluster": f.cluster, "gpu_model": f.gpu_model, "free_gpus": f.free_gpus,
             "fragmented_gpus": f.fragmented_gpus,
             "fragmented_pct": round(100 * f.fragmented_share, 1) if f.fragmented_share is not None else None}
            for f in fragmentation_now()]
    return Section("fragmentation", _("Fragmentation now"), [
        ("cluster", _("Cluster")), ("gpu_model", model), ("free_gpus", _("Free GPUs")),
        ("fragmented_gpus", _("Fragmented GPUs")), ("fragmented_pct", _("Fragmented %"))], rows,
        note=_("Fragmented: free GPU capacity that a job shaped like those of the last %(d)d days could not use "
               "(scattered whole GPUs, slivers of shared GPUs). A high share means jobs wait although GPUs are "
               "free; the wait reason of such a job says so.") % {"d": WORKLOAD_DAYS})


def _resources(capacity, facts, t0, day, model) -> list[Section]:
    waits = defaultdict(list)
    for fact in facts:
        if fact["first_admitted_at"] and fact["first_admitted_at"] >= t0:
            waits[(local_day(fact["first_admitted_at"]).isoformat(), fact["gpu_model"])].append(fact["wait_seconds"])
    wait_rows = [{"day": d, "gpu_model": m, "jobs": len(w), "wait_hours_p95": round(percentile(w, 0.95) / 3600, 2)}
                 for (d, m), w in sorted(waits.items())]
    return [
        _fragmentation_section(model),
        _series(capacity, "mean_utilization_pct", _("GPU utilisation"), "%",
                [("day", day), ("gpu_model", model), ("mean_utilization_pct", _("Mean utilisation %"))],
                "gpu_utilisation"),
        _series(capacity, "gpu_memory_high_water_mb", _("GPU memory high-water mark"), "MiB",
                [("day", day), ("gpu_model", model), ("gpu_memory_high_water_mb", _("High-water (MiB)"))],
                "gpu_memory"),
        _series(capacity, "node_cpu_pct", _("Node CPU"), "%",
                [("day", day), ("gpu_model", model), ("node_cpu_pct", _("CPU %")), ("node_memory_pct", _("Memory %"))],
                "node_cpu_memory"),
        _series(capacity, "network_mb_per_s", _("Network and storage read throughput"), "MB/s",
                [("day", day), ("gpu_model", model), ("network_mb_per_s", _("Network MB/s")),
                 ("storage_mb_per_s", _("Storage read MB/s"))], "throughput"),
        _series(wait_rows, "wait_hours_p95", _("Wait time (p95)"), _("hours"),
                [("day", day), ("gpu_model", model), ("jobs", _("Jobs started")),
                 ("wait_hours_p95", _("p95 wait (h)"))],
                "wait"),
    ]


def _jobs(facts, t0, day, model) -> list[Section]:
    submitted = Counter((local_day(f["submitted_at"]).isoformat(), f["tenant__name"]) for f in facts
                        if f["submitted_at"] >= t0)
    submissions = [{"day": d, "tenant": t, "jobs": n} for (d, t), n in sorted(submitted.items())]
    runs = defaultdict(list)
    failures = Counter()
    retries = defaultdict(lambda: [0, 0])
    for fact in facts:
        if fact["finished_at"] and fact["finished_at"] >= t0:
            finished = local_day(fact["finished_at"]).isoformat()
            if fact["first_admitted_at"]:
                ran = fact["finished_at"] - fact["first_admitted_at"]
                runs[(finished, fact["gpu_model"])].append(ran.total_seconds())
            if fact["status"] == "failed":
                failures[(finished, fact["failure_category"] or "unclassified")] += 1
            retries[finished][0] += fact["retries"]
            retries[finished][1] += fact["preemptions"]
    run_rows = [{"day": d, "gpu_model": m, "jobs": len(r), "run_hours_median": round(percentile(r, 0.5) / 3600, 2)}
                for (d, m), r in sorted(runs.items())]
    failure_rows = [{"day": d, "category": c, "jobs": n} for (d, c), n in sorted(failures.items())]
    retry_rows = [{"day": d, "retries": r, "preemptions": p} for d, (r, p) in sorted(retries.items())]
    slowest = sorted((f for f in facts if f["wait_seconds"] is not None and f["first_admitted_at"] >= t0),
                     key=lambda f: -f["wait_seconds"])[:10]
    slow_rows = [{"job": f["job_id"], "tenant": f["tenant__name"], "task_type": f["task_type__code"],
                  "gpu_model": f["gpu_model"], "gpus": f["gpus"], "wait_hours": round(f["wait_seconds"] / 3600, 2)}
                 for f in slowest]
    return [
        _series(submissions, "jobs", _("Submissions per day"), _("jobs"),
                [("day", day), ("tenant", _("Tenant")), ("jobs", _("Jobs"))], "submissions", kind="bar", stacked=True),
        _series(run_rows, "run_hours_median", _("Run time (median, by finish day)"), _("hours"),
                [("day", day), ("gpu_model", model), ("jobs", _("Jobs")), ("run_hours_median", _("Median run (h)"))],
                "run_time"),
        _series(failure_rows, "jobs", _("Failure trend by reason"), _("failed jobs"),
                [("day", day), ("category", _("Category")), ("jobs", _("Jobs"))], "failure_trend", kind="bar",
                stacked=True),
        Section("retries", _("Retries and preemptions (by finish day)"),
                [("day", day), ("retries", _("Retries")), ("preemptions", _("Preemptions"))], retry_rows,
                bars(retry_rows, "day", [("retries", _("retries")), ("preemptions", _("preemptions"))], _("count"))),
        _checkpoint_section(t0),
        Section("slowest_to_start", _("Slowest to start"),
                [("job", _("Job")), ("tenant", _("Tenant")), ("task_type", _("Task type")), ("gpu_model", model),
                 ("gpus", _("GPUs")), ("wait_hours", _("Wait (h)"))], slow_rows),
    ]


def _checkpoint_section(t0) -> Section:
    """Running jobs with a recent checkpoint, running jobs without one, failed jobs that can resume."""
    now = timezone.now()
    running = Job.objects.filter(status=JobStatus.RUNNING)
    recent = running.filter(checkpoints__at__gte=now - timedelta(hours=24)).distinct().count()
    never = running.filter(checkpoints__isnull=True).count()
    resumable = Job.objects.filter(status=JobStatus.FAILED, finished_at__gte=t0,
                                   checkpoints__isnull=False).distinct().count()
    rows = [{"state": _("running, checkpoint in the last 24 h"), "jobs": recent},
            {"state": _("running, checkpoint older than 24 h"), "jobs": running.count() - recent - never},
            {"state": _("running, no checkpoint reported"), "jobs": never},
            {"state": _("failed after a checkpoint (resumable)"), "jobs": resumable}]
    return Section("checkpoints", _("Checkpoint state"), [("state", _("State")), ("jobs", _("Jobs"))], rows,
                   bars(rows, "state", [("jobs", _("jobs"))], _("jobs")),
                   note=_("Jobs report checkpoints to POST /api/jobs/{id}/report/ (see docs/kubernetes.md)."))


def _governance(first, t0, now, facts, day) -> list[Section]:
    tenant_rows = [{"day": r["day"].isoformat(), "tenant": r["tenant__name"], "gpu_hours": round(r["s"] / 3600, 1),
                    "cost": round(float(r["c"] or 0), 2)}
                   for r in UsageDaily.objects.filter(day__gte=first).values("day", "tenant__name").annotate(
                       s=Sum("allocated_gpu_seconds"), c=Sum("cost")).order_by("day", "tenant__name")]
    cost = defaultdict(float)
    for row in tenant_rows:
        cost[row["tenant"]] += row["cost"]
    cost_rows = [{"tenant": t, "cost": round(c, 2)} for t, c in sorted(cost.items(), key=lambda i: -i[1])]
    tz = timezone.get_default_timezone()
    changes = Counter()
    for model_class, label in ((Membership, _("tenant role granted")), (PlatformRole, _("platform role granted"))):
        for row in model_class.objects.filter(created__gte=t0).annotate(d=TruncDate("created", tzinfo=tz)).values(
                "d").annotate(n=Count("id")):
            changes[(row["d"].isoformat(), str(label))] += row["n"]
    for row in NodeEvent.objects.filter(at__gte=t0, kind__in=(NodeEvent.Kind.ADMIN, NodeEvent.Kind.TOKEN)).annotate(
            d=TruncDate("at", tzinfo=tz)).values("d", "kind").annotate(n=Count("id")):
        changes[(row["d"].isoformat(), str(NodeEvent.Kind(row["kind"]).label))] += row["n"]
    change_rows = [{"day": d, "action": a, "records": n} for (d, a), n in sorted(changes.items())]
    capacity = _capacity(first, local_day(now) + timedelta(days=1), now)
    waits = [{"gpu_model": f["gpu_model"], "wait": f["wait_seconds"]} for f in facts
             if f["wait_seconds"] is not None and f["first_admitted_at"] >= t0]
    # "How many to add" is the capacity plan's, as on the report: one number wherever advice is shown.
    advice = recommendations(capacity["models"], waits, JobFact.objects.filter(submitted_at__gte=t0),
                             capacity_plan.plan(local_day(now), now=now))
    return [
        _series(tenant_rows, "gpu_hours", _("Tenant usage"), _("GPU-hours"),
                [("day", day), ("tenant", _("Tenant")), ("gpu_hours", _("GPU-hours")), ("cost", _("Cost"))],
                "tenant_usage", kind="bar", stacked=True),
        Section("cost", _("Cost attribution"), [("tenant", _("Tenant")), ("cost", _("Cost"))], cost_rows,
                bars(cost_rows, "tenant", [("cost", _("cost"))], _("cost"))),
        _series(change_rows, "records", _("Permission changes and administration"), _("records"),
                [("day", day), ("action", _("Action")), ("records", _("Records"))], "changes", kind="bar",
                stacked=True),
        advice_section("capacity_advice", _("Capacity advice"), advice),
    ]
