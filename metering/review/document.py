"""The monthly review pack: one document per month, platform-wide or per tenant, in four groups (resources,
tasks, governance, improvements) that a platform team hands to leadership.

``build_review`` computes everything from data, in the reader's language: the month's figures come from
``reports.report_for`` (the frozen snapshot of a closed month, so the pack says what the report page says),
the previous month the same way for the comparison, and each group adds the few aggregate queries the report
has no figure for (run times, checkpoints, approvals from the audit log, the capacity plan). The document is a
``contract.ReviewDocument`` (its fields are documented there); ``render.pdf`` and ``render.xlsx`` lay it out and
translate only their own chrome, so both formats show the same sentences and numbers.

The groups live in ``groups`` and ``oversight``; this module holds the document's frame: coverage, comparison,
summary.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import cast

from django.conf import settings
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from gpuportal.text.dates import month_start
from gpuportal.text.formatting import list_text
from metering.models import CapacityDaily, MonthlyReport
from metering.reports import monthly as reports
from metering.reports.contract import MonthlyReportData
from metering.review import groups as review_groups
from metering.review import oversight as review_oversight
from metering.review.contract import Comparison, Coverage, ReviewDocument, Section
from metering.review.parts import ReviewContext, change_text, month_open_change
from tenants.models import Tenant

#: The groups' keys in the order the document shows them.
GROUP_KEYS = ("resources", "tasks", "governance", "improvements")


def build_review(month: date, tenant: Tenant | None = None, language: str | None = None,
                 now: datetime | None = None) -> ReviewDocument:
    """The review document of ``month`` for ``tenant`` (None: platform-wide) in ``language`` (default: the
    active one)."""
    now = now or timezone.now()
    month = month_start(month)
    with translation.override(language or translation.get_language() or settings.LANGUAGE_CODE):
        report, snapshot = reports.report_for(month, tenant, now)
        previous_month = month_start(month - timedelta(days=1))
        previous, _previous_snapshot = reports.report_for(previous_month, tenant, now)
        if not CapacityDaily.objects.filter(day__gte=previous_month, day__lt=month).exists():
            previous = cast(MonthlyReportData, {})  # no data: "—" beside each figure, not zeros that read as "new"
        ctx = ReviewContext(month, tenant, now, report, previous, previous_month)
        groups = _changes_while_open(ctx, [review_groups.resources(ctx), review_groups.tasks(ctx),
                                           review_oversight.governance(ctx), review_oversight.improvements(ctx)])
        coverage, comparison = _coverage(ctx), _comparison(ctx, groups)
        return ReviewDocument(
            title=_title(ctx), site=getattr(settings, "SITE_NAME", "") or "GPU Portal",
            month=ctx.month_text, tenant=tenant.name if tenant else None,
            generated_at=now.isoformat(timespec="seconds"),
            snapshot_id=snapshot.pk if isinstance(snapshot, MonthlyReport) else None,
            language=translation.get_language(),
            coverage=coverage, summary=_summary(ctx, groups, coverage),
            comparison=comparison, groups=groups,
            appendix=[review_oversight.acceptance(ctx)] if tenant is None else [],
        )


def _title(ctx: ReviewContext) -> str:
    if ctx.tenant is None:
        return _("Monthly review — %(month)s") % {"month": ctx.month_text}
    return _("Monthly review — %(month)s — tenant %(tenant)s") % {"month": ctx.month_text,
                                                                  "tenant": ctx.tenant.name}


# --- coverage --------------------------------------------------------------------------------------------


def _coverage(ctx: ReviewContext) -> Coverage:
    """Whether the rollup covered every day of the month (of the days elapsed, for an open month).

    A day counts when the rollup wrote its capacity rows, for a tenant's pack too: a day the tenant ran
    nothing is a day without usage, not a day without data (and capacity rows say nothing about tenants)."""
    start = ctx.month
    expected, in_month = ctx.days_elapsed, ctx.days_in_month
    last = start + timedelta(days=expected - 1)
    rows = CapacityDaily.objects.filter(day__gte=start, day__lte=last)
    days = sorted(set(rows.values_list("day", flat=True).distinct()))
    complete = expected > 0 and len(days) >= expected
    if not expected:
        text = _("%(month)s has not started yet: there is no data to review.") % {"month": ctx.month_text}
    elif not days:
        text = _("No data for %(month)s: none of its %(n)d days was rolled up.") % {
            "month": ctx.month_text, "n": expected}
    elif complete and expected < in_month:
        text = _("The data covers every day of %(month)s so far; the month is still open (%(n)d of %(total)d "
                 "days).") % {"n": expected, "total": in_month, "month": ctx.month_text}
    elif complete:
        text = _("The data covers all %(n)d days of %(month)s.") % {"n": expected, "month": ctx.month_text}
    else:
        missing = _ranges(sorted(set(_days(start, last)) - set(days)))
        text = _("The data covers %(n)d of %(total)d days of %(month)s (first day with data %(first)s, last "
                 "%(last)s); missing: %(missing)s.") % {
            "n": len(days), "total": expected, "month": ctx.month_text, "first": days[0].isoformat(),
            "last": days[-1].isoformat(), "missing": missing}
    return Coverage(complete=complete, days_with_data=len(days), days_expected=expected, days_in_month=in_month,
                    text=text)


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _ranges(days: list[date]) -> str:
    """``[1, 2, 3, 7]`` October -> "2026-10-01 to 2026-10-03, 2026-10-07"."""
    runs: list[list[date]] = []
    for day in days:
        if runs and day - runs[-1][-1] == timedelta(days=1):
            runs[-1].append(day)
        else:
            runs.append([day])
    parts = [run[0].isoformat() if len(run) == 1 else _("%(first)s to %(last)s") % {
        "first": run[0].isoformat(), "last": run[-1].isoformat()} for run in runs]
    return list_text(parts)


# --- comparison and summary ------------------------------------------------------------------------------


#: The headline figures the comparison puts side by side, in its order; each is built once, by its group.
COMPARISON_KEYS = ("gpu_hours_allocated", "gpu_hours_used", "efficiency", "jobs_submitted", "jobs_failed",
                   "wait_p95", "cost")


def _changes_while_open(ctx: ReviewContext, groups: list[Section]) -> list[Section]:
    """An open month's figures keep the previous month's beside them but no change (``month_open_change``)."""
    open_change = month_open_change(ctx)
    if open_change is None:
        return groups
    return [replace(group, figures=[replace(f, change=open_change, change_number=None) if f.previous is not None else f
                                    for f in group.figures]) for group in groups]


def _comparison(ctx: ReviewContext, groups: list[Section]) -> Comparison:
    """The headline figures of the two months side by side: the groups' own figures (frozen: shared, not
    copied)."""
    by_key = {f.key: f for group in groups for f in group.figures}
    return Comparison(previous_month=f"{ctx.previous_month:%Y-%m}",
                      rows=[by_key[key] for key in COMPARISON_KEYS if key in by_key])


def _summary(ctx: ReviewContext, groups: list[Section], coverage: Coverage) -> list[str]:
    """The headline: the month's GPU-hours against the previous month's, whether the data is whole, then the
    first conclusion of each group. The GPU-hours are printed as ``monthly_report`` prints them (no grouping),
    so a reader can find the one figure in the other."""
    allocated, before = ctx.report.get("gpu_hours_allocated"), ctx.previous.get("gpu_hours_allocated")
    if before and ctx.is_open:
        lines = [_("%(hours)s GPU-hours allocated in %(month)s so far (%(n)d of %(total)d days; %(previous)s "
                   "GPU-hours in the whole of %(before)s).") % {
            "hours": str(allocated), "month": ctx.month_text, "n": ctx.days_elapsed,
            "total": ctx.days_in_month, "previous": str(before), "before": f"{ctx.previous_month:%Y-%m}"}]
    elif before:
        lines = [_("%(hours)s GPU-hours allocated in %(month)s (%(change)s against %(previous)s GPU-hours in "
                   "%(before)s).") % {"hours": str(allocated), "month": ctx.month_text,
                                      "change": change_text(allocated, before), "previous": str(before),
                                      "before": f"{ctx.previous_month:%Y-%m}"}]
    else:
        lines = [_("%(hours)s GPU-hours allocated in %(month)s (no usage in %(before)s to compare with).") % {
            "hours": str(allocated), "month": ctx.month_text, "before": f"{ctx.previous_month:%Y-%m}"}]
    if not coverage.complete:
        lines.append(coverage.text)
    for group in groups:
        # Resources opens with the GPU-hours line the summary has just given: its next conclusion is taken.
        conclusions = group.conclusions[1:] if group.key == "resources" else group.conclusions
        if conclusions:
            lines.append(conclusions[0])
    return lines
