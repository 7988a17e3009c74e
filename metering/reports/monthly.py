"""Monthly reports built from the rollups, frozen once the month has closed, and the capacity advice.

``build_report(month, tenant)`` reads only the fact tables (``UsageMonthly``, ``UsageDaily``, ``JobFact``,
``CapacityDaily``) and returns plain JSON data, typed and documented in ``metering.reports.contract``
(``MonthlyReportData``); the page, the API and ``monthly_report --format json`` all show that same dictionary.
A tenant report filters every query by that tenant, so it cannot carry another tenant's figures.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from gpuportal.storage.db import percentile
from gpuportal.text import phrases
from gpuportal.text.dates import day_start, local_day, month_start, next_month
from gpuportal.text.formatting import figure_text
from gpuportal.text.phrases import Phrase
from gpuportal.web.validation import calendar_month
from metering.models import (
    CapacityAction,
    CapacityDaily,
    ClusterAccountingDaily,
    JobFact,
    MonthlyReport,
    UsageDaily,
    UsageMonthly,
    WhatIfRun,
)
from metering.reports import capacity_plan, sizing
from metering.reports.contract import (
    Advice,
    CapacityPlan,
    LeastEfficientJob,
    MonthlyReportData,
    QuotaUse,
    SlurmClusterUsage,
    SlurmOwnerUsage,
    TopUserRow,
    UsageRow,
    WaitRow,
)
from metering.reports.sizing import ADD_COVERS_EXCESS_SHARE, is_closed, whole_nodes
from metering.usage.rollup import rollup
from metering.whatif import services as whatif
from scheduling.jobs.efficiency import summaries_of
from scheduling.models import FailureCategory, Job
from tenants.models import Project, Quota, Tenant

#: Failure categories that more or better hardware would have avoided.
RESOURCE_FAILURES = (FailureCategory.OUT_OF_MEMORY, FailureCategory.NODE_FAULT, FailureCategory.GPU_FAULT)
#: Capacity advice thresholds (docs/metering-and-reports.md, "Capacity advice").
ADD_WHEN_OVER_DAYS_SHARE = 0.2
ADD_WHEN_P95_WAIT_HOURS = 4.0
ADD_WHEN_ALLOCATION_RATE = 0.8
#: Below this allocated share, peaks above capacity call for spreading them out, not for buying.
SPREAD_BELOW_ALLOCATION_RATE = 0.5
LEND_WHEN_IDLE_SHARE = 0.5

#: The longest reason a freeze or regeneration records (the snapshot's column): the form says it, the write keeps it.
MAX_REASON = MonthlyReport._meta.get_field("reason").max_length


def resource_failure_share(failures) -> float | None:
    """Of ``failures`` (counts by failure category), the share in ``RESOURCE_FAILURES``; None with no failure.
    One rule for the advice (per model), the pack's conclusion (all models) and the improvement metric."""
    failed = sum(failures.values())
    return sum(failures.get(str(c.value), 0) for c in RESOURCE_FAILURES) / failed if failed else None


def parse_month(text: str) -> date:
    """``YYYY-MM`` -> the first day of that month; ValueError naming the expected form (and the years a month
    may have: ``9999-12`` has no next month) otherwise."""
    return calendar_month(text)


def last_closed_month(now: datetime | None = None) -> date:
    """The first day of the month that closed last (the one the beat task freezes)."""
    return month_start(month_start(local_day(now or timezone.now())) - timedelta(days=1))


def _hours(seconds) -> float:
    return round((seconds or 0) / 3600, 2)


def _usage_row(name: str, row: dict) -> UsageRow:
    allocated, used = row["allocated"] or 0, row["used"] or 0
    return {"name": name, "gpu_hours_allocated": _hours(allocated), "gpu_hours_used": _hours(used),
            "efficiency": round(used / allocated, 4) if allocated else None,
            "measured_share": round((row["measured"] or 0) / allocated, 4) if allocated else None,
            "cost": round(float(row["cost"] or 0), 2)}


def _grouped(queryset, field: str, label=None) -> list[UsageRow]:
    rows = queryset.values(field).annotate(allocated=Sum("allocated_gpu_seconds"), used=Sum("used_gpu_seconds"),
                                           measured=Sum("measured_gpu_seconds"), cost=Sum("cost"))
    result = [_usage_row(label(row[field]) if label else row[field], row) for row in rows]
    return sorted(result, key=lambda r: -r["gpu_hours_allocated"])


def _wait_rows(facts: list[dict], field: str) -> list[WaitRow]:
    groups: dict[str, list[float]] = defaultdict(list)
    for fact in facts:
        groups[fact[field]].append(fact["wait"])
    return sorted(({"name": name, "jobs": len(waits), "wait_seconds_median": _round(percentile(waits, 0.5)),
                    "wait_seconds_p95": _round(percentile(waits, 0.95))} for name, waits in groups.items()),
                  key=lambda r: -(r["wait_seconds_p95"] or 0))


def _round(value, digits: int = 1):
    return None if value is None else round(value, digits)


def _waits(jobs, t0: datetime, t1: datetime, now: datetime) -> list[dict]:
    """Waits of jobs first admitted in the month, plus jobs still waiting at its end (counted until then)."""
    cutoff = min(t1, now)
    admitted = jobs.filter(first_admitted_at__gte=t0, first_admitted_at__lt=t1)
    still_waiting = (jobs.filter(submitted_at__lt=cutoff).filter(Q(first_admitted_at__isnull=True)
                                                                  | Q(first_admitted_at__gte=t1))
                     .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=t1)))
    fields = ("tenant__name", "task_type__code", "gpu_model", "wait_seconds", "submitted_at")
    names = ("tenant", "task_type", "gpu_model", "wait")
    rows = [dict(zip(names, values[:4], strict=True)) for values in admitted.values_list(*fields)]
    for values in still_waiting.values_list(*fields):
        rows.append(dict(zip(names, (*values[:3], (cutoff - values[4]).total_seconds()), strict=True)))
    return rows


def build_report(month: date, tenant: Tenant | None = None, now: datetime | None = None) -> MonthlyReportData:
    """Every figure of the monthly report for ``tenant`` (None: platform-wide), from the rollups."""
    now = now or timezone.now()
    month = month_start(month)
    following = next_month(month)
    t0, t1 = day_start(month), day_start(following)
    usage = UsageMonthly.objects.filter(month=month)
    daily = UsageDaily.objects.filter(day__gte=month, day__lt=following)
    jobs = JobFact.objects.all()
    if tenant is not None:
        usage, daily, jobs = usage.filter(tenant=tenant), daily.filter(tenant=tenant), jobs.filter(tenant=tenant)
    totals = usage.aggregate(allocated=Sum("allocated_gpu_seconds"), used=Sum("used_gpu_seconds"),
                             measured=Sum("measured_gpu_seconds"), cost=Sum("cost"))
    overall = _usage_row("total", totals)

    submitted = jobs.filter(submitted_at__gte=t0, submitted_at__lt=t1)
    outcome = submitted.aggregate(
        submitted=Count("job_id"), succeeded=Count("job_id", filter=Q(status="succeeded")),
        failed=Count("job_id", filter=Q(status="failed")), cancelled=Count("job_id", filter=Q(status="cancelled")),
        preempted=Count("job_id", filter=Q(preemptions__gt=0)), reclaimed=Count("job_id", filter=Q(reclaimed=True)),
        retries=Sum("retries"))
    outcome["retries"] = outcome["retries"] or 0
    failures = dict(Counter(submitted.filter(status="failed").values_list("failure_category", flat=True)))
    failures = {(category or "unclassified"): n for category, n in sorted(failures.items(), key=lambda i: -i[1])}

    waits = _waits(jobs, t0, t1, now)
    all_waits = [w["wait"] for w in waits]
    elapsed = (min(t1, now) - t0).total_seconds()
    report: MonthlyReportData = {
        "month": f"{month:%Y-%m}", "scope": "tenant" if tenant else "platform",
        "tenant": tenant.name if tenant else None, "currency": settings.METERING["CURRENCY"],
        "generated_at": now.isoformat(timespec="seconds"), "closed": is_closed(month, now),
        "gpu_hours_allocated": overall["gpu_hours_allocated"], "gpu_hours_used": overall["gpu_hours_used"],
        "efficiency": overall["efficiency"], "measured_share": overall["measured_share"], "cost": overall["cost"],
        "by_project": _grouped(usage, "project_id", label=_project_label()),
        "by_task_type": _grouped(usage, "task_type__code"),
        "by_gpu_model": _grouped(usage, "gpu_model"),
        "jobs": outcome, "failures_by_category": failures,
        "wait_seconds_median": _round(percentile(all_waits, 0.5)),
        "wait_seconds_p95": _round(percentile(all_waits, 0.95)),
        "wait_by_task_type": _wait_rows(waits, "task_type"), "wait_by_gpu_model": _wait_rows(waits, "gpu_model"),
        "top_users": _top_users(usage, submitted),
        "least_efficient_jobs": least_efficient_jobs(jobs, t0, t1, now),
        "quota_vs_use": _quota_vs_use(usage, tenant, elapsed),
        "daily": [{"day": row["day"].isoformat(), "gpu_model": row["gpu_model"],
                   "gpu_hours_allocated": _hours(row["allocated"]), "gpu_hours_used": _hours(row["used"])}
                  for row in daily.values("day", "gpu_model").annotate(
                      allocated=Sum("allocated_gpu_seconds"), used=Sum("used_gpu_seconds"),
                  ).order_by("day", "gpu_model")],
    }
    report["slurm"] = slurm_usage(month, following, tenant, usage)
    report["outside_gpu_hours"] = _hours(sum(c["outside_gpu_seconds"] for c in report["slurm"]))
    if tenant is None:
        report["by_tenant"] = _grouped(usage, "tenant__name")
        report["longest_waiting_tenants"] = _wait_rows(waits, "tenant")[:5]
        capacity = _capacity(month, following, now)
        report["utilisation_by_gpu_model"] = capacity["models"]
        report["capacity_daily"] = capacity["daily"]
        advice = recommendations(capacity["models"], waits, submitted, capacity_plan.plan(month, now=now),
                                 whatif.latest_sizing(month) if report["closed"] else None)
        report["recommendations"] = advice if report["closed"] else so_far(advice, month, now)
    return report


def slurm_usage(month: date, following: date, tenant: Tenant | None, usage) -> list[SlurmClusterUsage]:
    """Each Slurm cluster with accounting in the month: the portal's allocations on it (``usage``, already
    scoped), the work submitted to Slurm directly per tenant and per unmapped account, and slurmdb's own
    totals. A tenant's report sees its own rows only (unmapped accounts are nobody's)."""
    accounting = ClusterAccountingDaily.objects.filter(day__gte=month, day__lt=following)
    if tenant is not None:
        accounting = accounting.filter(tenant=tenant)
    rows = list(accounting.values("cluster__name", "tenant__name", "account", "from_portal").annotate(
        seconds=Sum("gpu_seconds"), started=Sum("jobs_started")))
    clusters = sorted({row["cluster__name"] for row in rows})
    portal = {(row["cluster__name"], row["tenant__name"]): row["seconds"] or 0.0 for row in usage.filter(
        cluster__name__in=clusters).values("cluster__name", "tenant__name").annotate(
        seconds=Sum("allocated_gpu_seconds"))}
    result = []
    for cluster in clusters:
        mine = [row for row in rows if row["cluster__name"] == cluster]
        owners: dict[tuple[str | None, str | None], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for (name, tenant_name), seconds in portal.items():
            if name == cluster:
                owners[(tenant_name, None)][0] += seconds
        for row in mine:
            if not row["from_portal"]:
                key = (row["tenant__name"], None) if row["tenant__name"] else (None, row["account"])
                owners[key][1] += row["seconds"] or 0.0
                owners[key][2] += row["started"] or 0
        portal_seconds = sum(p for p, _o, _j in owners.values())
        outside_seconds = sum(o for _p, o, _j in owners.values())
        slurmdb_seconds = sum(row["seconds"] or 0.0 for row in mine)
        slurmdb_portal = sum(row["seconds"] or 0.0 for row in mine if row["from_portal"])
        owner_rows: list[SlurmOwnerUsage] = [
            {"tenant": tenant_name, "account": account, "portal_gpu_hours": _hours(p), "outside_gpu_hours": _hours(o),
             "total_gpu_hours": _hours(p + o), "outside_jobs": int(jobs)}
            for (tenant_name, account), (p, o, jobs) in owners.items()]
        owner_rows.sort(key=lambda r: (-r["total_gpu_hours"], r["tenant"] or "", r["account"] or ""))
        result.append({"cluster": cluster, "portal_gpu_hours": _hours(portal_seconds),
                       "outside_gpu_hours": _hours(outside_seconds),
                       "total_gpu_hours": _hours(portal_seconds + outside_seconds),
                       "slurmdb_gpu_hours": _hours(slurmdb_seconds), "slurmdb_portal_gpu_hours": _hours(slurmdb_portal),
                       "portal_gpu_seconds": round(portal_seconds, 3), "outside_gpu_seconds": round(outside_seconds, 3),
                       "slurmdb_gpu_seconds": round(slurmdb_seconds, 3), "owners": owner_rows})
    return result


#: A job is large for the report's least efficient jobs from this many GPUs asked and GPU-hours held.
LARGE_JOB_GPUS = 4
LARGE_JOB_GPU_HOURS = 8
#: How many of the month's largest jobs are measured for the least efficient ones, and how many are listed.
LARGE_JOBS_MEASURED = 50
LEAST_EFFICIENT_LISTED = 10


def least_efficient_jobs(jobs, t0: datetime, t1: datetime, now: datetime) -> list[LeastEfficientJob]:
    """The large jobs that ended in the month with the lowest mean utilisation of what they held (their GPUs'
    readings, ``scheduling.jobs.efficiency``): the month's largest ``LARGE_JOBS_MEASURED`` by GPUs asked, those
    that held ``LARGE_JOB_GPU_HOURS`` or more and were measured, least efficient first, each with its hint."""
    largest = (jobs.filter(finished_at__gte=t0, finished_at__lt=t1, gpus__gte=LARGE_JOB_GPUS)
               .order_by("-gpus", "job_id").values("job_id")[:LARGE_JOBS_MEASURED])
    found = list(Job.objects.filter(pk__in=largest).select_related("owner", "tenant"))  # one query, none more
    measured = summaries_of(found, now)  # when no job is large
    rows: list[LeastEfficientJob] = []
    for job in found:
        summary = measured[job.pk]
        if summary.mean_gpu_utilization is None or summary.gpu_hours_held < LARGE_JOB_GPU_HOURS:
            continue
        rows.append({"job": job.pk, "name": job.name, "user": job.owner.get_username(), "tenant": job.tenant.name,
                     "gpus": job.total_gpus, "gpu_hours_held": round(summary.gpu_hours_held, 2),
                     "gpu_hours_used": round(summary.gpu_hours_held * summary.mean_gpu_utilization / 100, 2),
                     "mean_gpu_utilization": summary.mean_gpu_utilization,
                     "idle_share": summary.idle_share, "hint": summary.hint})
    return sorted(rows, key=lambda row: (row["mean_gpu_utilization"], -row["gpu_hours_held"]))[
        :LEAST_EFFICIENT_LISTED]


def _project_label():
    names = {pk: f"{t}/{p}" for pk, t, p in Project.objects.values_list("pk", "tenant__name", "name")}
    return lambda pk: names.get(pk, str(pk))


def _top_users(usage, submitted) -> list[TopUserRow]:
    jobs = dict(submitted.values("user__username").annotate(n=Count("job_id")).values_list("user__username", "n"))
    rows = _grouped(usage, "user__username")[:10]
    for row in rows:
        row["jobs"] = jobs.get(row["name"], 0)
    return rows


def _quota_vs_use(usage, tenant, elapsed_seconds: float) -> list[QuotaUse]:
    quotas = Quota.objects.select_related("tenant")
    if tenant is not None:
        quotas = quotas.filter(tenant=tenant)
    used = {(row["tenant__name"], row["gpu_model"]): row["allocated"] for row in usage.values(
        "tenant__name", "gpu_model").annotate(allocated=Sum("allocated_gpu_seconds"))}
    rows = []
    for quota in quotas:
        average = (used.get((quota.tenant.name, quota.gpu_model)) or 0) / elapsed_seconds if elapsed_seconds > 0 else 0
        rows.append({"tenant": quota.tenant.name, "gpu_model": quota.gpu_model, "guaranteed": quota.guaranteed_gpus,
                     "limit": quota.limit_gpus, "average_gpus_allocated": round(average, 2),
                     "share_of_guarantee": (round(average / quota.guaranteed_gpus, 3)
                                            if quota.guaranteed_gpus else None)})
    return rows


def _capacity(month: date, following: date, now: datetime) -> dict:
    rows = list(CapacityDaily.objects.filter(day__gte=month, day__lt=following))
    per_node, default_step = sizing.gpus_per_node(), sizing.DEFAULT_GPUS_PER_NODE
    models: dict[str, dict] = {}
    today = local_day(now)
    for row in rows:
        day_hours = 24.0 if row.day < today else max((now - day_start(row.day)).total_seconds() / 3600, 0)
        entry = models.setdefault(row.gpu_model, {"gpu_model": row.gpu_model, "capacity_gpus": 0, "days": 0,
                                                   "capacity_gpu_hours": 0.0, "allocated_gpu_hours": 0.0,
                                                   "used_gpu_hours": 0.0, "peak_demand_gpus": 0.0,
                                                   "days_over_capacity": 0, "excess": [], "util": [],
                                                   "gpus_per_node": per_node.get(row.gpu_model, default_step)})
        entry["capacity_gpus"] = max(entry["capacity_gpus"], row.capacity_gpus)
        entry["days"] += 1
        entry["capacity_gpu_hours"] += row.capacity_gpus * day_hours
        entry["allocated_gpu_hours"] += row.allocated_gpu_seconds / 3600
        entry["used_gpu_hours"] += row.used_gpu_seconds / 3600
        entry["peak_demand_gpus"] = max(entry["peak_demand_gpus"], row.peak_demand_gpus)
        if row.peak_demand_gpus > row.capacity_gpus:
            entry["days_over_capacity"] += 1
            entry["excess"].append(row.peak_demand_gpus - row.capacity_gpus)
        if row.mean_utilization_pct is not None:
            entry["util"].append(row.mean_utilization_pct)
    for entry in models.values():
        capacity_hours = entry["capacity_gpu_hours"]
        entry["allocation_rate"] = round(entry["allocated_gpu_hours"] / capacity_hours, 4) if capacity_hours else None
        entry["idle_gpu_hours"] = round(max(capacity_hours - entry["allocated_gpu_hours"], 0), 1)
        entry["mean_utilization_pct"] = _round(sum(entry["util"]) / len(entry["util"])) if entry["util"] else None
        for key in ("capacity_gpu_hours", "allocated_gpu_hours", "used_gpu_hours"):
            entry[key] = round(entry[key], 1)
        del entry["util"]
    daily = [{"day": row.day.isoformat(), "gpu_model": row.gpu_model, "capacity_gpus": row.capacity_gpus,
              "peak_allocated_gpus": row.peak_allocated_gpus, "peak_demand_gpus": row.peak_demand_gpus,
              "mean_utilization_pct": _round(row.mean_utilization_pct),
              "gpu_memory_high_water_mb": row.gpu_memory_high_water_mb} for row in rows]
    return {"models": sorted(models.values(), key=lambda m: m["gpu_model"]), "daily": daily}


def recommendations(models: list[dict], waits: list[dict], submitted, plan: CapacityPlan | None = None,
                    sizing: WhatIfRun | None = None) -> list[Advice]:
    """One piece of advice per GPU model (add / spread / lend or move / keep) with the figures behind it.

    Where the month has a what-if ``sizing`` (``metering.whatif``: the month replayed through the engine, nodes
    added until the production p95 wait is under the site's target), it decides: a model it sizes above zero gets
    "add" with that number, quoting the replay, its error against the real month and what the trend forecast
    says beyond it; a model under the target is never "add". Without one (a month still open, or closed before
    what-if runs existed) the month's figures decide whether to add and the capacity ``plan`` says how many
    (``capacity_plan.addition``); where the month was over capacity but the plan forecasts no shortfall, the
    advice is to spread the peaks. Only a model the plan has no history of is sized from the month's excesses."""
    sized = (sizing.result or {}).get("models", {}) if sizing is not None else {}
    failures = defaultdict(Counter)
    for model, category in submitted.filter(status="failed").values_list("gpu_model", "failure_category"):
        failures[model][category] += 1
    wait_by_model = defaultdict(list)
    for wait in waits:
        wait_by_model[wait["gpu_model"]].append(wait["wait"])
    advice = []
    for entry in models:
        model = entry["gpu_model"]
        planned = capacity_plan.addition(plan, model) if plan else None
        p95 = percentile(wait_by_model[model], 0.95) or 0
        resource_share = resource_failure_share(failures[model]) or 0.0
        idle_share = 1 - entry["allocation_rate"] if entry["allocation_rate"] is not None else 0.0
        figures = {"days": entry["days"], "days_over_capacity": entry["days_over_capacity"],
                   "wait_seconds_p95": round(p95, 1), "resource_failure_share": round(resource_share, 3),
                   "idle_share": round(idle_share, 3), "allocation_rate": entry["allocation_rate"],
                   "capacity_gpus": entry["capacity_gpus"], "peak_demand_gpus": entry["peak_demand_gpus"]}
        over_often = entry["days_over_capacity"] >= max(1, math.ceil(entry["days"] * ADD_WHEN_OVER_DAYS_SHARE))
        long_waits = (p95 >= ADD_WHEN_P95_WAIT_HOURS * 3600
                      and (entry["allocation_rate"] or 0) >= ADD_WHEN_ALLOCATION_RATE)
        replayed = sized.get(model) if sizing is not None else None
        if replayed is not None and replayed["add_gpus"] > 0:
            action, evidence = CapacityAction.ADD, _what_if_evidence(model, replayed, sizing, planned)
            figures.update(add_gpus=replayed["add_gpus"], what_if=sizing.pk,
                           what_if_p95_wait_seconds=replayed["p95_wait_seconds"],
                           what_if_p95_wait_seconds_after=replayed["p95_wait_seconds_after"])
        elif replayed is not None and not replayed["enough"]:
            action = CapacityAction.KEEP
            evidence = Phrase(gettext_noop(
                "%(model)s: replaying %(month)s (what-if #%(run)d), even %(nodes)d more nodes leave the p95 wait of "
                "production jobs at %(after)s h (now %(wait)s h; target %(target)s h): the waits are for quotas or "
                "the policy, not for GPUs -> keep, and look at the quotas"), {
                "model": model, "month": sizing.result["month"], "run": sizing.pk, "nodes": replayed["tried_nodes"],
                "after": _hours_text(replayed["p95_wait_seconds_after"]),
                "wait": _hours_text(replayed["p95_wait_seconds"]),
                "target": _hours_text(sizing.result["target_p95_wait_seconds"])})
            figures["what_if"] = sizing.pk
        elif replayed is not None and idle_share < LEND_WHEN_IDLE_SHARE:
            action = CapacityAction.SPREAD if over_often else CapacityAction.KEEP
            evidence = Phrase(gettext_noop(
                "%(model)s: the replay of %(month)s (what-if #%(run)d) keeps the p95 wait of production jobs at "
                "%(wait)s h, under the target of %(target)s h, with the GPUs there were -> %(what)s"), {
                "model": model, "month": sizing.result["month"], "run": sizing.pk,
                "wait": _hours_text(replayed["p95_wait_seconds"]),
                "target": _hours_text(sizing.result["target_p95_wait_seconds"]),
                "what": Phrase(gettext_noop("spread the peaks (reservations, backfill) rather than buy"))
                if over_often else Phrase(gettext_noop("keep"))})
            figures["what_if"] = sizing.pk
        elif (replayed is None and over_often and not long_waits
              and (entry["allocation_rate"] or 0) < SPREAD_BELOW_ALLOCATION_RATE):
            action = CapacityAction.SPREAD
            evidence = Phrase(gettext_noop(
                "%(model)s: demand above capacity on %(over)d of %(days)d days but %(idle).0f %% idle -> spread the "
                "peaks (reservations, backfill) before buying"), {
                "model": model, "over": entry["days_over_capacity"], "days": entry["days"], "idle": idle_share * 100})
        elif replayed is None and (over_often or long_waits) and planned is not None and not planned["add_gpus"]:
            action = CapacityAction.SPREAD
            evidence = Phrase(gettext_noop(
                "%(model)s: demand above capacity on %(over)d of %(days)d days, p95 wait %(wait).1f h, but the "
                "capacity plan forecasts no shortfall through %(until)s -> spread the peaks (reservations, "
                "backfill) before buying"), {
                "model": model, "over": entry["days_over_capacity"], "days": entry["days"], "wait": p95 / 3600,
                "until": planned["forecast"][-1]["month"] if planned["forecast"] else plan["month"]})
        elif replayed is None and (over_often or long_waits):
            action = CapacityAction.ADD
            params = {"model": model, "over": entry["days_over_capacity"], "days": entry["days"],
                      "wait": p95 / 3600, "res": resource_share * 100}
            if planned is not None:
                add = planned["add_gpus"]
                evidence = Phrase(gettext_noop(
                    "%(model)s: demand above capacity on %(over)d of %(days)d days, p95 wait %(wait).1f h, "
                    "%(res).0f %% of %(model)s failures resource-related -> add %(add)s %(model)s GPUs (nodes of "
                    "%(per_node)d) before %(by)s, as the capacity plan sizes it"), {
                    **params, "add": figure_text(add), "per_node": planned["gpus_per_node"],
                    "by": planned["add_by"]})
            else:
                add = whole_nodes(percentile(entry["excess"], ADD_COVERS_EXCESS_SHARE) or 1, entry["gpus_per_node"])
                evidence = Phrase(gettext_noop(
                    "%(model)s: demand above capacity on %(over)d of %(days)d days, p95 wait %(wait).1f h, %(res).0f "
                    "%% of %(model)s failures resource-related -> add %(add)s %(model)s GPUs"), {
                    **params, "add": figure_text(add)})
            figures["add_gpus"] = add
        elif idle_share >= LEND_WHEN_IDLE_SHARE:
            action = CapacityAction.LEND_OR_MOVE
            evidence = Phrase(gettext_noop("%(model)s: %(idle).0f %% idle -> lend or move"), {
                "model": model, "idle": idle_share * 100})
        else:
            action = CapacityAction.KEEP
            evidence = Phrase(gettext_noop(
                "%(model)s: %(alloc).0f %% allocated, demand above capacity on %(over)d of %(days)d days, p95 wait "
                "%(wait).1f h -> keep"), {
                "model": model, "alloc": (entry["allocation_rate"] or 0) * 100, "over": entry["days_over_capacity"],
                "days": entry["days"], "wait": p95 / 3600})
        # Kept as English with its phrase: a frozen report is read long after, in each reader's language.
        advice.append({"gpu_model": model, "action": str(action.value), "evidence": str(evidence),
                       "figures": figures, **evidence.as_data()})
    for entry in models:
        entry.pop("excess", None)
    return advice


def _hours_text(seconds) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.1f}"


def _what_if_evidence(model: str, replayed: dict, sizing: WhatIfRun, planned) -> Phrase:
    """"Add N" as the what-if sizing found it, with the replay's error and the trend forecast beyond it."""
    error = sizing.result.get("baseline_error", {}).get("by_model", {}).get(model, {}).get("p95_wait_seconds", {})
    if planned is not None and planned["add_gpus"] and planned["add_gpus"] > replayed["add_gpus"]:
        trend = Phrase(gettext_noop("the trend forecast sees demand outgrow that: %(add)s GPUs by %(by)s"), {
            "add": figure_text(planned["add_gpus"]), "by": planned["add_by"]})
    else:
        trend = Phrase(gettext_noop("the trend forecast sees no shortfall beyond it"))
    return Phrase(gettext_noop(
        "%(model)s: replaying %(month)s through the scheduler (what-if #%(run)d), the p95 wait of production jobs is "
        "%(wait)s h (the month really had %(actual)s h) -> add %(add)s %(model)s GPUs (%(nodes)d nodes of "
        "%(per_node)d), which brings it to %(after)s h, under the target of %(target)s h; %(trend)s"), {
        "model": model, "month": sizing.result["month"], "run": sizing.pk,
        "wait": _hours_text(replayed["p95_wait_seconds"]),
        "actual": _hours_text(error.get("actual", replayed.get("actual_p95_wait_seconds"))),
        "add": figure_text(replayed["add_gpus"]), "nodes": replayed["add_nodes"], "per_node": replayed["gpus_per_node"],
        "after": _hours_text(replayed["p95_wait_seconds_after"]),
        "target": _hours_text(sizing.result["target_p95_wait_seconds"]), "trend": trend})


def so_far(advice: list[Advice], month: date, now: datetime) -> list[Advice]:
    """The advice of a month still open, each sentence followed by how much of the month has passed.

    On its first day the advice counted "1 of 1 days", true of the data but read as a whole month: the reader
    is told that the day is the first of 31, so the advice is a start, not a verdict."""
    total = (next_month(month) - month).days
    passed = max(0, min((local_day(now) - month).days + 1, total))
    result = []
    for entry in advice:
        stored = entry[phrases.DATA_KEY]
        evidence = Phrase(gettext_noop("%(advice)s (%(month)s is still open: %(passed)d of its %(total)d days have "
                                       "passed)"), {"advice": Phrase(stored["msgid"], stored["params"]),
                                                    "month": f"{month:%Y-%m}", "passed": passed, "total": total})
        result.append({**entry, "evidence": str(evidence), **evidence.as_data()})
    return result


# --- frozen snapshots ------------------------------------------------------------------------------------


def current_snapshot(month: date, tenant: Tenant | None):
    return MonthlyReport.objects.filter(month=month, tenant=tenant, superseded_at__isnull=True).first()


def report_for(month: date, tenant: Tenant | None = None,
               now: datetime | None = None) -> tuple[MonthlyReportData, MonthlyReport | None]:
    """The report to show: the frozen snapshot of a closed month, else the live figures (snapshot None).

    Reading never writes: a GET that froze snapshots let any reader decide when a month's figures were
    fixed, and parallel first reads raced to freeze several. Freezing is ``freeze`` (the beat task) or
    ``regenerate`` (an admin's explicit action); until then a closed month shows its live rollups."""
    now = now or timezone.now()
    month = month_start(month)
    snapshot = current_snapshot(month, tenant) if is_closed(month, now) else None
    if snapshot is None:
        return in_reader_language(build_report(month, tenant, now)), None
    return in_reader_language(snapshot.data), snapshot


def in_reader_language(data: MonthlyReportData) -> MonthlyReportData:
    """``data`` with its advice in the reader's language. The advice is stored as English with its phrase
    (``recommendations``); a snapshot frozen by the beat task, in the site's language, is read in any other.
    The phrase itself is not shown: the report's shape stays what the API documents."""
    advice = [{**{k: v for k, v in entry.items() if k != phrases.DATA_KEY}, "evidence": advice_text(entry)}
              for entry in data.get("recommendations") or []]
    return {**data, "recommendations": advice} if "recommendations" in data else data


def advice_text(entry: dict) -> str:
    """One piece of stored advice (``recommendations``) in the reader's language."""
    return phrases.read(str(entry.get("evidence", "")), entry)


def freeze(month: date, tenant: Tenant | None = None, now: datetime | None = None, actor=None,
           reason: str = "") -> MonthlyReport:
    """Freeze the closed month's report unless it is frozen already; safe to run in parallel.

    The unique constraint on the current snapshot of a month and tenant decides a race: the loser's insert
    fails and it returns the winner's snapshot. ``actor`` (an admin's explicit action) is recorded."""
    now = now or timezone.now()
    month = month_start(month)
    if not is_closed(month, now):
        raise ValueError(_("Only a closed month has a frozen report; %(m)s is still open.") % {"m": f"{month:%Y-%m}"})
    existing = current_snapshot(month, tenant)
    if existing is not None:
        return existing
    last_day = next_month(month) - timedelta(days=1)
    if not MonthlyReport.objects.filter(month=month).exists() and _within_retention(last_day, now):
        rollup(last_day, last_day, now=now)  # the month's last hours, which the hourly rollup may have missed
    try:
        with transaction.atomic():
            snapshot = MonthlyReport.objects.create(
                month=month, tenant=tenant, data=build_report(month, tenant, now), generated_at=now,
                generated_by=actor, reason=(reason.strip() or MonthlyReport.FROZEN_REASON)[:MAX_REASON])
            if actor is not None:
                figures = {"snapshot": snapshot.pk, "gpu_hours_allocated": snapshot.data["gpu_hours_allocated"]}
                audit.record(AuditAction.REPORT_REGENERATE, snapshot, actor=actor, tenant=tenant,
                             reason=snapshot.reason, after=figures)
            return snapshot
    except IntegrityError:
        return current_snapshot(month, tenant)


def _within_retention(day: date, now: datetime) -> bool:
    return day >= local_day(now) - timedelta(days=settings.AGENTS["READINGS_RETENTION_DAYS"])


def regenerate(month: date, tenant: Tenant | None, actor, reason: str, now: datetime | None = None,
               force: bool = False) -> MonthlyReport:
    """Roll the month up again and freeze a new snapshot; the old one stays, marked superseded."""
    now = now or timezone.now()
    month = month_start(month)
    if not is_closed(month, now):
        raise ValueError(_("Only a closed month has a frozen report; %(m)s is still open.") % {"m": f"{month:%Y-%m}"})
    if not reason.strip():
        raise ValueError(_("reason: say why the report is regenerated (it is recorded)."))
    try:
        return _refreeze(month, tenant, actor, reason, now, force)
    except IntegrityError:  # another regeneration or the beat task froze this report at the same moment
        raise ValueError(_("The report was frozen by someone else at the same moment; reload and try again.")
                         ) from None


def _refreeze(month, tenant, actor, reason: str, now: datetime, force: bool) -> MonthlyReport:
    with transaction.atomic():
        rollup(month, next_month(month) - timedelta(days=1), now=now, force=force)
        current = MonthlyReport.objects.filter(month=month, tenant=tenant, superseded_at__isnull=True)
        old = current.select_for_update().first()
        current.update(superseded_at=now)
        snapshot = MonthlyReport.objects.create(month=month, tenant=tenant, data=build_report(month, tenant, now),
                                                generated_at=now, generated_by=actor,
                                                reason=reason.strip()[:MAX_REASON])
        audit.record(AuditAction.REPORT_REGENERATE, snapshot, actor=actor, tenant=tenant, reason=snapshot.reason,
                     before={"snapshot": old.pk, "gpu_hours_allocated": old.data.get("gpu_hours_allocated")}
                     if old else None,
                     after={"snapshot": snapshot.pk, "gpu_hours_allocated": snapshot.data["gpu_hours_allocated"]})
        return snapshot


def months_with_data() -> list[date]:
    months = set(UsageMonthly.objects.values_list("month", flat=True).distinct())
    latest = JobFact.objects.aggregate(latest=Max("submitted_at"))["latest"]
    if latest:
        months.add(month_start(local_day(latest)))
    return sorted(months, reverse=True)
