"""Reading improvement actions: the one rule for a metric's value in a monthly report, and the follow-up rows
a month's review pack shows.

``metric_value`` is the only place that knows where each ``ImprovementMetric`` lives in a report dict, so the
baseline stored when an action is created and the value a later pack compares it with are read the same
way. Values are in the report's own units (seconds for waits, fractions for shares and rates); the
``*_text`` helpers turn them into hours and percents for people, and ``shown_value``/``stored_value``
convert what a form shows and takes.
"""

import math
from datetime import date, datetime
from typing import NotRequired, TypedDict

from django.db.models import Q
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _

from gpuportal.text.dates import day_start, local_day, month_start
from gpuportal.text.formatting import figure_text
from metering.models import (
    CapacityAction,
    ImprovementAction,
    ImprovementDirection,
    ImprovementMetric,
    ImprovementStatus,
)
from metering.reports import monthly as reports
from metering.reports.contract import MonthlyReportData
from tenants.models import Tenant

M = ImprovementMetric
#: Metrics shown as percents (the report holds fractions 0..1).
SHARE_METRICS = frozenset({M.EFFICIENCY, M.FAILED_SHARE, M.RESOURCE_FAILURE_SHARE, M.ALLOCATION_RATE,
                           M.IDLE_SHARE})
#: Metrics shown in hours (the report holds seconds).
HOUR_METRICS = frozenset({M.WAIT_P95})
#: Figures of the capacity advice: only the platform report has them.
CAPACITY_METRICS = frozenset({M.ALLOCATION_RATE, M.DAYS_OVER_CAPACITY, M.IDLE_SHARE})
#: Metrics a report has no per-model figure for.
PLATFORM_ONLY_METRICS = frozenset({M.FAILED_SHARE})
#: Statuses after which an action is no longer followed.
CLOSED_STATUSES = frozenset({ImprovementStatus.DONE, ImprovementStatus.DROPPED})
#: What each piece of capacity advice promises to move, used to prefill an action made from it.
ADVICE_METRIC = {
    CapacityAction.ADD: (M.DAYS_OVER_CAPACITY, ImprovementDirection.DOWN),
    CapacityAction.SPREAD: (M.DAYS_OVER_CAPACITY, ImprovementDirection.DOWN),
    CapacityAction.LEND_OR_MOVE: (M.IDLE_SHARE, ImprovementDirection.DOWN),
    CapacityAction.KEEP: (M.ALLOCATION_RATE, ImprovementDirection.UP),
}


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _row(rows, key: str, name: str) -> dict | None:
    return next((row for row in rows or [] if isinstance(row, dict) and row.get(key) == name), None)


def metric_value(report: MonthlyReportData, metric: str, gpu_model: str = "") -> float | None:
    """``metric`` read from a monthly report dict (``reports.report_for(...)[0]``); None when it lacks it.

    Without ``gpu_model`` the figure is platform- (or tenant-) wide; the capacity figures are then summed over
    the models. With one, the figure of that model: its capacity row and capacity advice, its waits, its
    usage row."""
    if not isinstance(report, dict):
        return None
    if gpu_model:
        return _model_value(report, metric, gpu_model)
    if metric in (M.GPU_HOURS_ALLOCATED, M.EFFICIENCY, M.WAIT_P95):
        return _number(report.get(metric))
    if metric == M.FAILED_SHARE:
        jobs = report.get("jobs") or {}
        submitted, failed = _number(jobs.get("submitted")), _number(jobs.get("failed"))
        return round(failed / submitted, 4) if submitted and failed is not None else None
    if metric == M.RESOURCE_FAILURE_SHARE:
        return _resource_share(report)
    if metric in (M.ALLOCATION_RATE, M.IDLE_SHARE):
        models = report.get("utilisation_by_gpu_model")
        capacity = sum(_number(m.get("capacity_gpu_hours")) or 0 for m in models or [])
        if not capacity:
            return None
        rate = sum(_number(m.get("allocated_gpu_hours")) or 0 for m in models) / capacity
        return round(rate if metric == M.ALLOCATION_RATE else 1 - rate, 4)
    if metric == M.DAYS_OVER_CAPACITY:
        daily = report.get("capacity_daily")
        if daily is None:
            return None
        return float(len({d.get("day") for d in daily
                          if (_number(d.get("peak_demand_gpus")) or 0) > (_number(d.get("capacity_gpus")) or 0)}))
    return None


def _resource_share(report: MonthlyReportData) -> float | None:
    """Resource-related failures over all failures; 0 when jobs ran and none failed (nothing left to avoid)."""
    failures = report.get("failures_by_category")
    if not isinstance(failures, dict):
        return None
    share = reports.resource_failure_share({code: _number(n) or 0 for code, n in failures.items()})
    if share is None:
        return 0.0 if (report.get("jobs") or {}).get("submitted") else None
    return round(share, 4)


def _model_value(report: MonthlyReportData, metric: str, model: str) -> float | None:
    capacity = _row(report.get("utilisation_by_gpu_model"), "gpu_model", model)
    advice = _row(report.get("recommendations"), "gpu_model", model)
    figures = (advice or {}).get("figures") or {}
    if metric in (M.ALLOCATION_RATE, M.DAYS_OVER_CAPACITY):
        value = _number((capacity or {}).get(metric))
        return value if value is not None else _number(figures.get(metric))
    if metric == M.IDLE_SHARE:
        rate = _model_value(report, M.ALLOCATION_RATE, model)
        return None if rate is None else round(1 - rate, 4)
    if metric == M.WAIT_P95:
        waits = _row(report.get("wait_by_gpu_model"), "name", model)
        value = _number((waits or {}).get("wait_seconds_p95"))
        # The advice counts a model nobody waited for as 0 s; the wait table has no row for it.
        return value if value is not None else _number(figures.get("wait_seconds_p95"))
    if metric in (M.GPU_HOURS_ALLOCATED, M.EFFICIENCY):
        return _number((_row(report.get("by_gpu_model"), "name", model) or {}).get(metric))
    if metric == M.RESOURCE_FAILURE_SHARE:
        return _number(figures.get("resource_failure_share"))
    return None


# --- units ---------------------------------------------------------------------------------------------


def shown_value(metric: str, value: float | None) -> float | None:
    """A stored value in the unit people read and type (hours, percent)."""
    if value is None:
        return None
    if metric in HOUR_METRICS:
        return round(value / 3600, 2)
    if metric in SHARE_METRICS:
        return round(value * 100, 2)
    return value


def stored_value(metric: str, shown: float | None) -> float | None:
    """What a person typed (hours, percent) in the report's unit (seconds, fraction)."""
    if shown is None:
        return None
    if metric in HOUR_METRICS:
        return shown * 3600
    if metric in SHARE_METRICS:
        return shown / 100
    return shown


def edited_value(metric: str, typed: float | None, stored: float | None) -> float | None:
    """What an edit form's field holds in the report's unit, ``stored`` itself where ``typed`` is what the form
    showed for it: ``shown_value`` rounds, and converting the rounded figure back would differ from
    ``stored`` and record a change nobody made."""
    shown = shown_value(metric, stored)
    if typed is not None and shown is not None and math.isclose(typed, shown, rel_tol=1e-9, abs_tol=1e-9):
        return stored
    return stored_value(metric, typed)


def metric_text(metric: str, value: float | None) -> str:
    """``14400`` wait -> "4.0 h"; ``0.42`` share -> "42.0 %"; a dash for no value."""
    if value is None:
        return "—"
    if metric in HOUR_METRICS:
        return _("%(h)s h") % {"h": number_format(value / 3600, 1)}
    if metric in SHARE_METRICS:
        return _("%(p)s %%") % {"p": number_format(value * 100, 1)}
    if metric == M.DAYS_OVER_CAPACITY:
        return _("%(n)s d") % {"n": figure_text(int(round(value)))}
    return _("%(n)s GPU-h") % {"n": figure_text(round(value, 1))}


def metric_label(metric: str, gpu_model: str = "") -> str:
    label = str(M(metric).label) if metric in M.values else metric
    return _("%(metric)s (%(model)s)") % {"metric": label, "model": gpu_model} if gpu_model else label


def moved(direction: str, baseline: float | None, current: float | None) -> bool | None:
    """True when ``current`` moved from ``baseline`` the expected way; None when either is unknown."""
    if baseline is None or current is None:
        return None
    return current < baseline if direction == ImprovementDirection.DOWN else current > baseline


def moved_text(metric: str, gpu_model: str, direction: str, baseline, current, target=None) -> str:
    """"95th percentile wait (A100): 5.2 h → 3.1 h, moved as expected (target 2.0 h)"."""
    result = moved(direction, baseline, current)
    if result is None:
        verdict = _("no figure to compare yet")
    elif result:
        verdict = _("moved as expected")
    elif current == baseline:
        verdict = _("did not move")
    else:
        verdict = _("moved the wrong way")
    text = _("%(metric)s: %(before)s → %(after)s, %(verdict)s") % {
        "metric": metric_label(metric, gpu_model), "before": metric_text(metric, baseline),
        "after": metric_text(metric, current), "verdict": verdict}
    return text + _target_text(metric, target)


def _target_text(metric: str, target) -> str:
    return "" if target is None else " " + _("(target %(target)s)") % {"target": metric_text(metric, target)}


def follow_up(action: ImprovementAction, month: date, current: float | None, closed: bool) -> tuple[bool | None, str]:
    """Whether ``action``'s metric moved as of ``month`` (``current`` its value there), and the sentence for it.

    No verdict (None) where comparing would mislead: in the action's own month the baseline is compared with
    itself and reads "did not move", and an open month's partial figures against a full month's baseline
    read as a drop in anything that adds up over the month."""
    label, before = metric_label(action.metric, action.gpu_model), metric_text(action.metric, action.baseline)
    if action.month == month:
        text = _("%(metric)s: %(before)s in %(month)s, the baseline month; the following months are compared "
                 "with it") % {"metric": label, "before": before, "month": f"{month:%Y-%m}"}
        return None, text + _target_text(action.metric, action.target)
    if not closed:
        text = _("%(metric)s: %(before)s → %(after)s so far in %(month)s (the month is still open)") % {
            "metric": label, "before": before, "after": metric_text(action.metric, current),
            "month": f"{month:%Y-%m}"}
        return None, text + _target_text(action.metric, action.target)
    return (moved(action.direction, action.baseline, current),
            moved_text(action.metric, action.gpu_model, action.direction, action.baseline, current, action.target))


# --- rows ----------------------------------------------------------------------------------------------


def is_overdue(action: ImprovementAction, month: date) -> bool:
    return action.due_month < month_start(month) and action.status not in CLOSED_STATUSES


class ActionRow(TypedDict):
    """An improvement action as the action list, its page and the review pack show it. Metric values
    (``baseline``, ``target``, ``current``) are in the report's own units (seconds, fractions 0..1, days,
    GPU-hours: ``metric_value``), the ``*_text`` beside each in hours and percents for people; months are
    "YYYY-MM"."""

    id: int
    title: str
    #: The owner's username ("" when none).
    owner: str
    #: The tenant's name; None for a platform action.
    tenant: str | None
    due_month: str
    status: str
    status_text: str
    #: Due before the month it is judged in and neither done nor dropped.
    overdue: bool
    metric: str
    metric_label: str
    gpu_model: str
    direction: str
    direction_text: str
    baseline: float | None
    baseline_text: str
    target: float | None
    target_text: str
    recommendation: str
    notes: str
    #: The month of the report the action was made from.
    month_from: str
    #: Set by ``actions_for_review`` only: the metric in the month reviewed, and whether it moved as expected
    #: (None: no verdict yet, ``moved_text`` says why).
    current: NotRequired[float | None]
    current_text: NotRequired[str]
    moved: NotRequired[bool | None]
    moved_text: NotRequired[str]


def action_row(action: ImprovementAction, month: date) -> ActionRow:
    """An action as plain data, judged as of ``month`` (without its current value: see ``actions_for_review``)."""
    return {
        "id": action.pk, "title": action.title, "owner": action.owner.get_username() if action.owner else "",
        "tenant": action.tenant.name if action.tenant_id else None,
        "due_month": f"{action.due_month:%Y-%m}", "status": action.status,
        "status_text": str(ImprovementStatus(action.status).label), "overdue": is_overdue(action, month),
        "metric": action.metric, "metric_label": metric_label(action.metric, action.gpu_model),
        "gpu_model": action.gpu_model, "direction": action.direction,
        "direction_text": str(ImprovementDirection(action.direction).label),
        "baseline": action.baseline, "baseline_text": metric_text(action.metric, action.baseline),
        "target": action.target, "target_text": metric_text(action.metric, action.target),
        "recommendation": action.recommendation, "notes": action.notes, "month_from": f"{action.month:%Y-%m}",
    }


def _scoped(tenant: Tenant | None):
    actions = ImprovementAction.objects.select_related("owner", "tenant")
    return actions.filter(tenant__isnull=True) if tenant is None else actions.filter(tenant=tenant)


def actions_for_review(month: date, tenant: Tenant | None = None, *, report: MonthlyReportData | None = None,
                       now: datetime | None = None) -> list[ActionRow]:
    """The actions the review pack of ``month`` follows up, with the metric's value in that month.

    Those made from an earlier month's report that were still open when ``month`` began (planned or in
    progress, or done/dropped with their last change in or after ``month``), those due in ``month``, and those
    made from ``month``'s own report: what changes next month is part of the month's review.
    ``report`` is ``month``'s report when the caller has it already (else ``reports.report_for``). ``moved``
    is None, with ``moved_text`` saying why, while ``month`` is still open (as of ``now``) and for an action
    made from ``month``'s own report: see ``follow_up``."""
    month = month_start(month)
    still_open = Q(status__in=[ImprovementStatus.PLANNED, ImprovementStatus.IN_PROGRESS]) | Q(
        last_updated__gte=day_start(month))
    actions = list(_scoped(tenant).filter((Q(month__lt=month) & still_open) | Q(due_month=month) | Q(month=month))
                   .order_by("month", "due_month", "pk"))
    if not actions:
        return []
    now = now or timezone.now()
    if report is None:
        report = reports.report_for(month, tenant, now)[0]
    closed = reports.is_closed(month, now)
    rows = []
    for action in actions:
        row = action_row(action, month)
        current = metric_value(report, action.metric, action.gpu_model)
        verdict, text = follow_up(action, month, current, closed)
        row.update(current=current, current_text=metric_text(action.metric, current), moved=verdict,
                   moved_text=text)
        rows.append(row)
    return rows


def action_list(user, status: str = "", due: date | None = None, today: date | None = None) -> list[ActionRow]:
    """Every action ``user`` may see (platform and tenant ones), filtered by status and due month."""
    actions = ImprovementAction.objects.visible_to(user).select_related("owner", "tenant").order_by(
        "due_month", "pk")
    if status:
        actions = actions.filter(status=status)
    if due is not None:
        actions = actions.filter(due_month=month_start(due))
    this_month = month_start(today or local_day(timezone.now()))
    return [action_row(action, this_month) for action in actions[:500]]


def advice_prefill(month: date, tenant: Tenant | None, gpu_model: str, recommendation: str) -> dict:
    """Initial values of an action made from a report's recommendation.

    ``recommendation`` is the advice's action (``add``, ``spread``, ``lend_or_move``, ``keep``): its evidence
    is looked up in ``month``'s report for ``gpu_model``; any other text is taken as the recommendation."""
    initial = {"month": f"{month:%Y-%m}", "due_month": f"{month:%Y-%m}", "gpu_model": gpu_model,
               "tenant": tenant.name if tenant else ""}
    if recommendation in CapacityAction.values:
        advice = CapacityAction(recommendation)
        metric, direction = ADVICE_METRIC[advice]
        found = _row(reports.report_for(month, tenant)[0].get("recommendations"), "gpu_model", gpu_model) or {}
        evidence = found.get("evidence") if found.get("action") == advice.value else ""
        initial.update(metric=metric.value, direction=direction.value, recommendation=(evidence or "")[:500],
                       title=(_("%(advice)s: %(model)s") % {"advice": advice.label, "model": gpu_model}
                              if gpu_model else str(advice.label))[:200])
    elif recommendation:
        initial.update(recommendation=recommendation[:500], title=recommendation[:200])
    return initial
