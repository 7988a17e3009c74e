"""The usage groups of the review pack (resources, tasks), each answering one question of a monthly review from data;
the oversight groups (governance, improvements) and the appendix are in ``oversight``.

Each function takes the ``ReviewContext`` (the month's report and the previous month's, already read) and adds
only aggregate queries of its own, a fixed number whatever the jobs: the pack of a busy month costs the same
handful of queries as a quiet one. Sentences are computed from the figures next to them, so a reader can
check each conclusion against its table.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date

from django.db.models import Count, DurationField, Exists, ExpressionWrapper, F, OuterRef, Q, Sum
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from fleet.catalogue import gpu_model_catalogue
from fleet.models import Vendor
from gpuportal.storage.db import PercentileCont
from gpuportal.text.dates import day_start, next_month
from metering.models import JobFact
from metering.reports.contract import JobOutcomes, ModelCapacity, QuotaUse, WaitRow
from metering.reports.monthly import LEND_WHEN_IDLE_SHARE, resource_failure_share
from metering.reports.presentation import owner_label, slurm_cluster_note
from metering.review.contract import Chart, Section
from metering.review.parts import (
    ReviewContext,
    chart,
    choice_label,
    figure,
    group,
    hours,
    percent,
    percent_text,
    share,
    table,
    whole,
    yes_no,
)
from scheduling.models import FailureCategory, JobArtifact, JobCheckpoint, TaskType

# --- resources -------------------------------------------------------------------------------------------


def resources(ctx: ReviewContext) -> Section:
    """Nodes, models, queues, quotas and usage peaks: do resources match the work?"""
    report, previous = ctx.report, ctx.previous
    catalogue = gpu_model_catalogue()
    fleet = table("fleet", _("Accelerators"), [
        _("GPU model"), _("Vendor"), _("Memory per GPU (GB)"), _("Interconnect"), _("Nodes"), _("GPUs"),
        _("Most GPUs on a node")], [
        [m.gpu_model, choice_label(Vendor, m.vendor), m.memory_gb or None, m.interconnect, m.nodes, m.total_gpus,
         m.max_gpus_per_node] for m in sorted(catalogue.values(), key=lambda m: m.gpu_model)])
    usage = {row["name"]: row for row in report.get("by_task_type") or []}
    waits = {row["name"]: row for row in report.get("wait_by_task_type") or []}
    queues = table("queues", _("Task types (queues)"), [
        _("Task type"), _("Name"), _("Priority"), _("Preemptible"), _("Requires approval"),
        _("GPU-hours allocated"), _("Jobs admitted or waiting"), _("p95 wait (h)")], [
        [t.code, t.name, t.priority, yes_no(t.preemptible), yes_no(t.requires_approval),
         (usage.get(t.code) or {}).get("gpu_hours_allocated", 0.0), (waits.get(t.code) or {}).get("jobs", 0),
         hours((waits.get(t.code) or {}).get("wait_seconds_p95"))] for t in TaskType.objects.all()])
    quota_rows = report.get("quota_vs_use") or []
    quotas = table("quotas", _("Quota versus use"), [
        _("Tenant"), _("GPU model"), _("Guaranteed GPUs"), _("Limit GPUs"), _("Average GPUs allocated"),
        _("Share of guarantee (%)")], [
        [q["tenant"], q["gpu_model"], q["guaranteed"], q["limit"], q["average_gpus_allocated"],
         percent(q.get("share_of_guarantee"))] for q in quota_rows])
    models = report.get("utilisation_by_gpu_model") or []
    peaks = table("peaks", _("Usage peaks per GPU model"), [
        _("GPU model"), _("GPUs"), _("Peak demand (GPUs)"), _("Days demand > capacity"), _("Days"),
        _("Allocated share (%)"), _("Mean utilisation (%)"), _("Idle GPU-hours")], [
        [m["gpu_model"], m["capacity_gpus"], m["peak_demand_gpus"], m["days_over_capacity"], m["days"],
         percent(m.get("allocation_rate")), m.get("mean_utilization_pct"), m.get("idle_gpu_hours")]
        for m in models]) if ctx.platform else None
    by_model = table("by_gpu_model", _("GPU-hours per GPU model"), [
        _("GPU model"), _("GPU-hours allocated"), _("GPU-hours used"), _("Efficiency (%)")], [
        [r["name"], r["gpu_hours_allocated"], r["gpu_hours_used"], percent(r.get("efficiency"))]
        for r in report.get("by_gpu_model") or []])
    figures = [
        figure("nodes", _("Nodes") if ctx.platform else _("Nodes (shared fleet)"),
               sum(m.nodes for m in catalogue.values()), ""),
        figure("gpus", _("GPUs") if ctx.platform else _("GPUs (shared fleet)"),
               sum(m.total_gpus for m in catalogue.values()), ""),
        figure("gpu_hours_allocated", _("GPU-hours allocated"), report.get("gpu_hours_allocated"), _("GPU-hours"),
               previous.get("gpu_hours_allocated")),
        figure("gpu_hours_used", _("GPU-hours used"), report.get("gpu_hours_used"), _("GPU-hours"),
               previous.get("gpu_hours_used")),
        figure("efficiency", _("Efficiency (used / allocated)"), percent(report.get("efficiency")), "%",
               percent(previous.get("efficiency"))),
    ]
    clusters = report.get("slurm") or []
    slurm = table("slurm", _("Slurm clusters: portal and outside work"), [
        _("Cluster"), _("Tenant or account"), _("Portal GPU-hours"), _("Outside GPU-hours"), _("GPU-hours in all"),
        _("Outside jobs started")], [
        [c["cluster"], owner_label(o), o["portal_gpu_hours"], o["outside_gpu_hours"], o["total_gpu_hours"],
         o["outside_jobs"]] for c in clusters for o in c["owners"]]) if clusters else None
    conclusions = [*_resource_conclusions(ctx, catalogue, models, quota_rows),
                   *(slurm_cluster_note(c, None if ctx.platform else ctx.tenant.name) for c in clusters)]
    return group("resources", _("Resources"), _("Do resources match the work? Was the plan right?"),
                 conclusions, figures, [fleet, queues, quotas, peaks, by_model, slurm],
                 [_daily_chart(ctx), _capacity_chart(ctx, models)])


def _resource_conclusions(ctx: ReviewContext, catalogue, models: list[ModelCapacity],
                          quota_rows: list[QuotaUse]) -> list[str]:
    """The month's GPU-hours first (the figure ``monthly_report`` prints, as it prints it), then what most needs
    a decision (demand above capacity, idle models), then the fleet and tenants above their guarantee."""
    report = ctx.report
    efficiency = report.get("efficiency")
    lines = [_("%(hours)s GPU-hours allocated and %(used)s used in %(month)s (efficiency %(eff)s).") % {
        "hours": str(report.get("gpu_hours_allocated")), "used": str(report.get("gpu_hours_used")),
        "month": ctx.month_text, "eff": "—" if efficiency is None else f"{percent_text(efficiency)} %"}]
    # Most days over capacity first, most idle first: the summary quotes the first line, the worst case.
    over = sorted((m for m in models if m["days_over_capacity"]), key=lambda m: (-m["days_over_capacity"],
                                                                               -m["peak_demand_gpus"]))
    idle = sorted((m for m in models if m.get("allocation_rate") is not None
                   and 1 - m["allocation_rate"] >= LEND_WHEN_IDLE_SHARE),  # idle as the advice calls it
                  key=lambda m: m["allocation_rate"])
    lines += [_("%(model)s demand exceeded capacity on %(over)d of %(days)d days (peak demand %(peak)s GPUs, "
                "%(cap)s installed).")
              % {"model": m["gpu_model"], "over": m["days_over_capacity"], "days": m["days"],
                 "peak": whole(m["peak_demand_gpus"]), "cap": whole(m["capacity_gpus"])} for m in over]
    idle_text = (_("%(model)s has been %(idle)s %% idle so far.") if ctx.is_open
                 else _("%(model)s was %(idle)s %% idle."))
    lines += [idle_text % {"model": m["gpu_model"], "idle": percent_text(1 - m["allocation_rate"])} for m in idle]
    nodes = sum(m.nodes for m in catalogue.values())
    fleet_nodes = ngettext("%(n)d node", "%(n)d nodes", nodes) % {"n": nodes}
    fleet_models = ngettext("%(n)d model", "%(n)d models", len(catalogue)) % {"n": len(catalogue)}
    fleet = {"nodes": fleet_nodes, "gpus": sum(m.total_gpus for m in catalogue.values()), "models": fleet_models}
    if ctx.platform:
        lines.append(_("The fleet has %(nodes)s with %(gpus)d GPUs of %(models)s.") % fleet)
    else:  # the fleet is shared: a tenant's pack says whose it is
        lines.append(_("The platform's shared fleet has %(nodes)s with %(gpus)d GPUs of %(models)s.") % fleet)
    for q in quota_rows:
        used = q.get("share_of_guarantee")
        if used is not None and used > 1:
            lines.append(_("%(tenant)s used %(share)s %% of its %(model)s guarantee on average.") % {
                "tenant": q["tenant"], "share": percent_text(used), "model": q["gpu_model"]})
    return lines


def _daily_chart(ctx: ReviewContext) -> Chart | None:
    by_model: dict[str, dict[str, float]] = defaultdict(dict)
    for row in ctx.report.get("daily") or []:
        by_model[row["gpu_model"]][row["day"]] = row["gpu_hours_allocated"]
    days = sorted({day for values in by_model.values() for day in values})
    return chart("daily_allocated", _("GPU-hours allocated per day and GPU model"), "line",
                 _("Day of %(month)s") % {"month": ctx.month_text}, _("GPU-hours"), [d[8:] for d in days],
                 [(model, [values.get(d, 0.0) for d in days]) for model, values in sorted(by_model.items())])


def _capacity_chart(ctx: ReviewContext, models: list[ModelCapacity]) -> Chart | None:
    if ctx.platform:
        return chart("capacity_vs_demand", _("Capacity versus peak demand per GPU model"), "bar", _("GPU model"),
                     _("GPUs"), [m["gpu_model"] for m in models],
                     [(_("capacity"), [m["capacity_gpus"] for m in models]),
                      (_("peak demand"), [m["peak_demand_gpus"] for m in models])])
    quotas = ctx.report.get("quota_vs_use") or []
    return chart("quota_vs_use", _("Guarantee versus average use per GPU model"), "bar", _("GPU model"), _("GPUs"),
                 [q["gpu_model"] for q in quotas], [(_("guaranteed"), [q["guaranteed"] for q in quotas]),
                                                    (_("average allocated"),
                                                     [q["average_gpus_allocated"] for q in quotas])])


# --- tasks -----------------------------------------------------------------------------------------------


def _run_times(ctx: ReviewContext, month: date | None = None) -> tuple[float | None, float | None]:
    """Median and p95 run time (first admission to the end, in hours) of the jobs that finished in ``ctx``'s
    month, or in ``month`` (the previous one, for the comparison)."""
    start, end = ctx.window if month is None else (month, next_month(month))
    jobs = JobFact.objects.filter(finished_at__gte=day_start(start), finished_at__lt=day_start(end),
                                  first_admitted_at__isnull=False)
    if ctx.tenant is not None:
        jobs = jobs.filter(tenant=ctx.tenant)
    run = ExpressionWrapper(F("finished_at") - F("first_admitted_at"), output_field=DurationField())
    values = jobs.aggregate(median=PercentileCont(run, 0.5, output_field=DurationField()),
                            p95=PercentileCont(run, 0.95, output_field=DurationField()))
    if values["median"] is None:
        return None, None
    return hours(values["median"].total_seconds()), hours(values["p95"].total_seconds())


def _month_jobs(ctx: ReviewContext):
    start, end = ctx.window
    jobs = JobFact.objects.filter(submitted_at__gte=day_start(start), submitted_at__lt=day_start(end))
    return jobs if ctx.tenant is None else jobs.filter(tenant=ctx.tenant)


@dataclass(frozen=True, slots=True)
class _Kept:
    """Checkpoints and artifacts of the month's jobs: jobs with a checkpoint, jobs retried, retried jobs with a
    checkpoint to resume from, artifacts kept, jobs with artifacts and the artifacts' size (GB)."""

    with_checkpoint: int
    retried: int
    retried_with_checkpoint: int
    artifacts: int
    jobs_with_artifacts: int
    artifact_gb: float


def _checkpoints(ctx: ReviewContext) -> _Kept:
    """Checkpoints and artifacts of the month's jobs: two aggregate queries."""
    jobs = _month_jobs(ctx)
    has_checkpoint = Exists(JobCheckpoint.objects.filter(job_id=OuterRef("job_id")))
    retried = Q(retries__gt=0)
    counts = jobs.aggregate(with_checkpoint=Count("job_id", filter=has_checkpoint),
                            retried=Count("job_id", filter=retried),
                            retried_with_checkpoint=Count("job_id", filter=retried & has_checkpoint))
    artifacts = JobArtifact.objects.filter(job_id__in=jobs.values("job_id")).aggregate(
        artifacts=Count("id"), jobs=Count("job_id", distinct=True), size=Sum("size_bytes"))
    return _Kept(**counts, artifacts=artifacts["artifacts"], jobs_with_artifacts=artifacts["jobs"],
                 artifact_gb=round((artifacts["size"] or 0) / 1e9, 2))


def tasks(ctx: ReviewContext) -> Section:
    """Submissions, run times, failures, retries, waits, checkpoints: can failures and waits be explained?"""
    report, previous = ctx.report, ctx.previous
    jobs, before = report.get("jobs") or {}, previous.get("jobs") or {}
    failures = report.get("failures_by_category") or {}
    failed_total = sum(failures.values())
    run_median, run_p95 = _run_times(ctx)
    run_median_before, run_p95_before = _run_times(ctx, ctx.previous_month) if previous else (None, None)
    state = _checkpoints(ctx)
    outcomes = table("outcomes", _("Submissions and outcomes"), [_("Outcome"), _("Jobs")], [
        [pgettext("job outcome", "submitted"), jobs.get("submitted", 0)], [_("succeeded"), jobs.get("succeeded", 0)],
        [_("failed"), jobs.get("failed", 0)], [_("cancelled"), jobs.get("cancelled", 0)],
        [_("preempted at least once"), jobs.get("preempted", 0)], [_("reclaimed when idle"), jobs.get("reclaimed", 0)],
        [_("retries"), jobs.get("retries", 0)]])
    reasons = table("failures", _("Failure reasons"), [_("Category"), _("Jobs"), _("Share (%)")], [
        [choice_label(FailureCategory, code if code != "unclassified" else ""), n, share(n, failed_total)]
        for code, n in failures.items()])
    wait_rows = report.get("wait_by_gpu_model") or []
    waits = table("waits", _("Waits per GPU model"), [_("GPU model"), _("Jobs"), _("Median wait (h)"),
                                                      _("p95 wait (h)")], [
        [w["name"], w["jobs"], hours(w.get("wait_seconds_median")), hours(w.get("wait_seconds_p95"))]
        for w in wait_rows])
    kept = table("checkpoints", _("Checkpoints and artifacts"), [_("Measure"), _("Value")], [
        [_("Jobs with checkpoints"), state.with_checkpoint], [_("Retried jobs"), state.retried],
        [_("Retried jobs with a checkpoint to resume from"), state.retried_with_checkpoint],
        [_("Artifacts kept"), state.artifacts], [_("Jobs with artifacts"), state.jobs_with_artifacts],
        [_("Artifact size (GB)"), state.artifact_gb]])
    figures = [
        figure("jobs_submitted", _("Jobs submitted"), jobs.get("submitted"), "", before.get("submitted")),
        figure("jobs_failed", _("Jobs failed"), jobs.get("failed"), "", before.get("failed")),
        figure("jobs_preempted", _("Jobs preempted at least once"), jobs.get("preempted"), "",
               before.get("preempted")),
        figure("retries", _("Retries"), jobs.get("retries"), "", before.get("retries")),
        figure("run_median", _("Median run time"), run_median, _("hours"), run_median_before),
        figure("run_p95", _("95th percentile run time"), run_p95, _("hours"), run_p95_before),
        figure("wait_median", _("Median wait"), hours(report.get("wait_seconds_median")), _("hours"),
               hours(previous.get("wait_seconds_median"))),
        figure("wait_p95", _("95th percentile wait"), hours(report.get("wait_seconds_p95")), _("hours"),
               hours(previous.get("wait_seconds_p95"))),
    ]
    charts = [
        chart("failures", _("Failed jobs by reason"), "bar", _("Reason"), _("jobs"),
              [row[0] for row in reasons.rows], [(_("failed jobs"), [row[1] for row in reasons.rows])]),
        chart("waits", _("Wait per GPU model"), "bar", _("GPU model"), _("hours"), [row[0] for row in waits.rows],
              [(_("median"), [row[2] for row in waits.rows]), (_("p95"), [row[3] for row in waits.rows])]),
    ]
    conclusions = _task_conclusions(ctx, jobs, failures, failed_total, (run_median, run_p95), state, wait_rows)
    return group("tasks", _("Tasks"), _("Can failures and waits be explained?"), conclusions, figures,
                 [outcomes, reasons, waits, kept], charts)


def _task_conclusions(ctx: ReviewContext, jobs: JobOutcomes, failures: dict[str, int], failed_total: int,
                      run_times: tuple[float | None, float | None], state: _Kept,
                      wait_rows: list[WaitRow]) -> list[str]:
    submitted = jobs.get("submitted") or 0
    if not submitted:
        return [_("No job was submitted in %(month)s.") % {"month": ctx.month_text}]
    lines = [ngettext("%(n)s job was submitted in %(month)s; %(failed)s failed (%(share)s %%).",
                      "%(n)s jobs were submitted in %(month)s; %(failed)s failed (%(share)s %%).", submitted) % {
        "n": whole(submitted), "month": ctx.month_text, "failed": whole(jobs.get("failed") or 0),
        "share": percent_text((jobs.get("failed") or 0) / submitted)}]
    if failed_total:
        lines.append(_("%(share)s %% of failures were resource-related (out of memory, node or GPU faults).") % {
            "share": percent_text(resource_failure_share(failures))})
        ranked = sorted(failures.items(), key=lambda item: -item[1])
        top, count = ranked[0]
        if len(ranked) == 1 or count > ranked[1][1]:  # a tie names no "most common" reason
            lines.append(_("The most common failure reason was %(reason)s (%(n)s of %(total)s).") % {
                "reason": choice_label(FailureCategory, top if top != "unclassified" else ""), "n": whole(count),
                "total": whole(failed_total)})
    if run_times[0] is not None:
        lines.append(_("Run times: median %(median)s h, 95th percentile %(p95)s h.") % {
            "median": whole(run_times[0]), "p95": whole(run_times[1])})
    if wait_rows and wait_rows[0].get("wait_seconds_p95"):
        lines.append(_("The longest waits were on %(model)s: 95th percentile %(p95)s h.") % {
            "model": wait_rows[0]["name"], "p95": whole(hours(wait_rows[0]["wait_seconds_p95"]))})
    preempted, retries = jobs.get("preempted") or 0, jobs.get("retries") or 0
    if preempted:
        lines.append(ngettext("%(n)s job was preempted at least once.", "%(n)s jobs were preempted at least once.",
                              preempted) % {"n": whole(preempted)})
    if retries:
        lines.append(ngettext("%(n)s retry was made after a failure.", "%(n)s retries were made after failures.",
                              retries) % {"n": whole(retries)})
    if state.retried:
        lines.append(ngettext("%(ck)s of %(n)s retried job had a checkpoint to resume from.",
                              "%(ck)s of %(n)s retried jobs had a checkpoint to resume from.", state.retried) % {
            "ck": whole(state.retried_with_checkpoint), "n": whole(state.retried)})
    return lines
