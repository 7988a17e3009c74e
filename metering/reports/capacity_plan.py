"""Capacity planning from the daily capacity facts: per GPU model, demand month by month, a simple forecast
with its past error, and "add N GPUs by month M" with the figures behind it.

Why this is deliberately simple: the plan is read by managers who must be able to check it by hand. The
figure planned with is the 95th percentile of the daily peak demand (held plus asked for by waiting jobs),
so a few exceptional days do not buy hardware but a busy month does. The trend is an ordinary least-squares
line through those monthly figures (three months or more), otherwise the last month is carried forward. Each
past month is then forecast again from the months before it, with the method the plan would have used at that
point (a backtest), so the error the reader sees is the error of this method, not of another one. "Add N" is
sized for the largest excess over the whole horizon, not only the first month over capacity, so the advice
does not have to be repeated a month later.

The plan's shape is ``contract.CapacityPlan`` (its fields and units are documented there). Everything comes
from one aggregate query over ``CapacityDaily`` for the window (months x models rows, never
per day) plus the fleet catalogue for the node size the advice is rounded to. Its "add N" is the one
number the report gives: the month's advice (``monthly.recommendations``) quotes it through ``addition``.
"""

from __future__ import annotations

from datetime import date, datetime

from django.db.models import Avg, Count, Max
from django.db.models.functions import TruncMonth
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from gpuportal.storage.db import PercentileCont
from gpuportal.text.dates import local_day, month_start, next_month
from metering.models import CapacityAction, CapacityDaily
from metering.reports import sizing
from metering.reports.contract import Advice, Backtest, CapacityPlan, ModelPlan
from metering.review.parts import whole

#: The share of days whose peak demand the plan covers.
PLAN_PERCENTILE = 0.95
#: A trend needs at least this many months; fewer and the last month is carried forward.
LINEAR_MIN_MONTHS = 3


class Method:
    """The forecast methods (plain strings: they travel in the JSON-ready plan)."""

    LINEAR = "linear"
    CARRY_FORWARD = "carry_forward"


def _add_months(month: date, count: int) -> date:
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def _index(month: date) -> int:
    return month.year * 12 + month.month - 1


def _label(month: date) -> str:
    return f"{month:%Y-%m}"


def _r(value, digits: int = 1):
    return None if value is None else round(value, digits)


def linear_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line through ``(x, y)`` points -> ``(slope, intercept)``; needs two distinct x."""
    n = len(points)
    mean_x = sum(x for x, _y in points) / n
    mean_y = sum(y for _x, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    return slope, mean_y - slope * mean_x


def method_for(months: int) -> str:
    return Method.LINEAR if months >= LINEAR_MIN_MONTHS else Method.CARRY_FORWARD


def predict(points: list[tuple[int, float]], x: int, method: str) -> float:
    """Demand at month ``x`` from the earlier ``points`` with ``method``; never below 0."""
    if method == Method.LINEAR and len(points) >= 2:
        slope, intercept = linear_fit(points)
        return max(intercept + slope * x, 0.0)
    return max(points[-1][1], 0.0)


def backtest(points: list[tuple[int, float]]) -> Backtest:
    """Forecast each past month from the months before it and compare with what happened.

    Each month is replayed with the method the plan would have used then (``method_for`` the number of
    earlier months): carried forward while fewer than ``LINEAR_MIN_MONTHS`` months came before, a straight
    line from then on, so the error reported is that of the method the forecast uses. Every month after the
    first can be tested. The percentage error leaves out months whose actual demand was 0 (any miss would be
    infinite there)."""
    errors, shares = [], []
    for k in range(1, len(points)):
        x, actual = points[k]
        miss = abs(predict(points[:k], x, method_for(k)) - actual)
        errors.append(miss)
        if actual > 0:
            shares.append(miss / actual * 100)
    if not errors:
        return {"months_tested": 0, "mae_gpus": None, "mape": None, "text": _(
            "No past month can be checked yet: replaying the forecast takes at least 2 months of data.")}
    mae = round(sum(errors) / len(errors), 1)
    mape = round(sum(shares) / len(shares), 1) if shares else None
    figures = {"mae": whole(mae), "n": len(errors), "min": LINEAR_MIN_MONTHS}
    if mape is None:
        text = ngettext(
            "Replayed on %(n)d past month (last month carried forward while fewer than %(min)d months came "
            "before, a straight line from then on): off by %(mae)s GPUs on average.",
            "Replayed on %(n)d past months (last month carried forward while fewer than %(min)d months came "
            "before, a straight line from then on): off by %(mae)s GPUs on average.",
            len(errors)) % figures
    else:
        text = ngettext(
            "Replayed on %(n)d past month (last month carried forward while fewer than %(min)d months came "
            "before, a straight line from then on): off by %(mae)s GPUs (%(mape)s %%) on average.",
            "Replayed on %(n)d past months (last month carried forward while fewer than %(min)d months came "
            "before, a straight line from then on): off by %(mae)s GPUs (%(mape)s %%) on average.",
            len(errors)) % {**figures, "mape": whole(round(mape))}
    return {"months_tested": len(errors), "mae_gpus": mae, "mape": mape, "text": text}


def _monthly_rows(first: date, following: date, last_day: date) -> dict[str, list[dict]]:
    """One aggregate query: per model and month, the demand and capacity figures of the window."""
    rows = (CapacityDaily.objects.filter(day__gte=first, day__lt=following, day__lte=last_day)
            .annotate(month=TruncMonth("day")).values("gpu_model", "month")
            .annotate(demand_mean=Avg("peak_demand_gpus"),
                      demand_p95=PercentileCont("peak_demand_gpus", PLAN_PERCENTILE),
                      held_mean=Avg("peak_allocated_gpus"), capacity=Max("capacity_gpus"), days=Count("id"))
            .order_by("gpu_model", "month"))
    per_model: dict[str, list[dict]] = {}
    for row in rows:
        per_model.setdefault(row["gpu_model"], []).append(row)
    return per_model


def plan(month: date, months_back: int = 6, horizon: int = 3, now: datetime | None = None) -> CapacityPlan:
    """The capacity plan for the report ``month`` (see the module's docstring for the method).

    Uses the ``months_back`` months up to and including ``month`` that have data (never days after today)
    and forecasts the ``horizon`` months after it. A month still open is not history yet (a few days would
    read as a collapse of demand): the plan then stops at the month before and forecasts the open one, and
    ``note`` says so. ``text`` says when there is no history at all."""
    now = now or timezone.now()
    asked = month = month_start(month)
    note = ""
    if not sizing.is_closed(month, now):
        month = _add_months(month, -1)
        note = _("%(month)s is still open: the plan uses the closed months up to %(last)s and forecasts "
                 "%(month)s.") % {"month": _label(asked), "last": _label(month)}
    months_back, horizon = max(1, int(months_back)), max(1, int(horizon))
    first = _add_months(month, -(months_back - 1))
    per_model = _monthly_rows(first, next_month(month), local_day(now))
    months = sorted({row["month"] for rows in per_model.values() for row in rows})
    future = [_add_months(month, i) for i in range(1, horizon + 1)]
    node_sizes = sizing.gpus_per_node() if per_model else {}
    models = [_model_plan(model, rows, future, node_sizes.get(model, sizing.DEFAULT_GPUS_PER_NODE))
              for model, rows in sorted(per_model.items())]
    return {"month": _label(month), "report_month": _label(asked), "note": note,
            "months": [_label(m) for m in months], "models": models,
            "text": "" if models else _("No capacity history yet: nothing to forecast.")}


def _model_plan(model: str, rows: list[dict], future: list[date], step: int) -> ModelPlan:
    history = [{"month": _label(row["month"]), "demand_mean_gpus": _r(row["demand_mean"]),
                "demand_p95_gpus": _r(row["demand_p95"]), "held_mean_gpus": _r(row["held_mean"]),
                "capacity_gpus": row["capacity"], "days": row["days"]} for row in rows]
    points = [(_index(row["month"]), float(row["demand_p95"] or 0)) for row in rows]
    method = method_for(len(points))
    capacity = rows[-1]["capacity"] or 0
    forecast = [{"month": _label(m), "demand_gpus": round(predict(points, _index(m), method), 1)} for m in future]
    trend = round(linear_fit(points)[0], 2) if method == Method.LINEAR else None
    error = backtest(points)
    # When to act: the first month over capacity; how much: enough for the highest month of the horizon
    # (the earliest of equal highs), so the advice holds to its end.
    over = next((f for f in forecast if f["demand_gpus"] > capacity), None)
    peak = max(forecast, key=lambda f: f["demand_gpus"])
    add = 0
    if over is not None:
        add = sizing.whole_nodes(peak["demand_gpus"] - capacity, step)
    entry = {"gpu_model": model, "capacity_gpus": capacity, "gpus_per_node": step, "history": history,
             "trend_per_month": trend, "method": method, "method_text": _method_text(method, len(points)),
             "forecast": forecast, "error": error, "add_gpus": add, "add_by": over["month"] if over else None}
    entry["why"] = _why(entry, over, peak)
    return entry


def addition(plan: CapacityPlan, model: str) -> ModelPlan | None:
    """The plan's entry for ``model`` (its ``add_gpus`` by ``add_by``, whole nodes), None where the plan has no
    history of it. The one "add N" of a report: the month's advice quotes it rather than sizing its own, so the
    advice and the plan never say two numbers (buying is for the months to come, which the plan forecasts)."""
    return next((entry for entry in plan.get("models") or [] if entry["gpu_model"] == model), None)


def with_advice(plan: CapacityPlan, advice: list[Advice]) -> CapacityPlan:
    """``plan`` with a ``beside_advice`` sentence for each model whose month's advice says "add" another number.

    Advice built since it quotes the plan (``addition``) never differs; a month frozen before then stored
    advice sized for the month that was (a share of its days over capacity, ``sizing.ADD_COVERS_EXCESS_SHARE``),
    while the plan sizes for the months to come (the highest forecast peak of its horizon). Such a frozen
    report keeps its words, so the sentence says why the two numbers differ and which one to act on."""
    adds = {a.get("gpu_model"): (a.get("figures") or {}).get("add_gpus") for a in advice
            if a.get("action") == CapacityAction.ADD}
    replayed = {a.get("gpu_model") for a in advice if (a.get("figures") or {}).get("what_if")}
    for entry in plan.get("models") or []:
        advised = adds.get(entry["gpu_model"])
        if not advised or advised == entry["add_gpus"]:
            continue
        figures = {"model": entry["gpu_model"], "advice": whole(advised), "month": plan["report_month"],
                   "share": round(sizing.ADD_COVERS_EXCESS_SHARE * 100), "plan": whole(entry["add_gpus"]),
                   "months": len(entry["forecast"])}
        if entry["gpu_model"] in replayed:  # the advice is the replay's: what the month needed, the plan what comes
            entry["beside_advice"] = _(
                "%(model)s: %(month)s's advice (add %(advice)s) is what the month replayed through the scheduler "
                "needed; this plan (add %(plan)s) is the trend forecast's for the next %(months)d months: it says when "
                "demand outgrows the advice.") % figures
        elif entry["add_gpus"]:
            entry["beside_advice"] = _(
                "%(model)s: %(month)s's advice (add %(advice)s) covers %(share)d %% of that month's days over "
                "capacity; this plan (add %(plan)s) covers the highest forecast peak of the next %(months)d "
                "months: act on the plan.") % figures
        else:
            entry["beside_advice"] = _(
                "%(model)s: %(month)s's advice (add %(advice)s) covers %(share)d %% of that month's days over "
                "capacity; the forecast of the next %(months)d months stays within the installed GPUs: act on "
                "the plan.") % figures
    return plan


def _method_text(method: str, months: int) -> str:
    if method == Method.LINEAR:
        return ngettext(
            "Straight-line trend (least squares) through the monthly p95 demand of the last %(n)d month.",
            "Straight-line trend (least squares) through the monthly p95 demand of the last %(n)d months.",
            months) % {"n": months}
    return ngettext(
        "Last month's p95 demand carried forward: %(n)d month of data is not enough for a trend (it takes %(min)d).",
        "Last month's p95 demand carried forward: %(n)d months of data are not enough for a trend (it takes "
        "%(min)d).",
        months) % {"n": months, "min": LINEAR_MIN_MONTHS}


def _trend_text(trend: float) -> str:
    """The monthly trend with its sign and one decimal ("+2.0", "-0.4"); a trend that rounds to nothing is
    "0.0", never "+0.0" or "-0.0"."""
    shown = round(trend, 1)
    if shown == 0:
        return number_format(0.0, decimal_pos=1, force_grouping=True)
    return ("+" if shown > 0 else "") + number_format(shown, decimal_pos=1, force_grouping=True)


def _why(entry: dict, over: dict | None, peak: dict) -> str:
    """The sentence a manager reads: where demand went, when it passes capacity, what to add, how sure.

    The history part quotes the first and last months and the fitted trend side by side, without a verb
    ("rose", "fell") that one of them could contradict when the months in between swing."""
    history, model = entry["history"], entry["gpu_model"]
    first, last = history[0]["demand_p95_gpus"], history[-1]["demand_p95_gpus"]
    if entry["method"] == Method.LINEAR:
        past = _("%(model)s: p95 demand went from %(first)s to %(last)s GPUs over %(n)d months; trend %(trend)s "
                 "GPUs/month") % {"model": model, "first": whole(first), "last": whole(last), "n": len(history),
                                  "trend": _trend_text(entry["trend_per_month"])}
    else:
        past = _("%(model)s: p95 demand was %(last)s GPUs in %(month)s (too little history for a trend: "
                 "carried forward)") % {"model": model, "last": whole(last), "month": history[-1]["month"]}
    error = entry["error"]
    if error["mae_gpus"] is None:
        accuracy = _("no past forecast could be checked yet")
    else:
        figures = {"mae": whole(error["mae_gpus"]), "n": error["months_tested"]}
        if error["mape"] is None:
            accuracy = ngettext("past forecasts were off by %(mae)s GPUs on average (%(n)d month tested)",
                                "past forecasts were off by %(mae)s GPUs on average (%(n)d months tested)",
                                error["months_tested"]) % figures
        else:
            accuracy = ngettext(
                "past forecasts were off by %(mae)s GPUs (%(mape)s %%) on average (%(n)d month tested)",
                "past forecasts were off by %(mae)s GPUs (%(mape)s %%) on average (%(n)d months tested)",
                error["months_tested"]) % {**figures, "mape": whole(round(error["mape"]))}
    capacity = entry["capacity_gpus"]
    if over is not None:
        nodes = entry["add_gpus"] // entry["gpus_per_node"]
        add = ngettext("add %(add)s GPUs (%(nodes)d node)", "add %(add)s GPUs (%(nodes)d nodes)", nodes) % {
            "add": whole(entry["add_gpus"]), "nodes": nodes}
        figures = {"past": past, "capacity": whole(capacity), "when": over["month"],
                   "demand": whole(over["demand_gpus"]), "peak": whole(peak["demand_gpus"]),
                   "peak_month": peak["month"], "add": add, "accuracy": accuracy}
        if peak["month"] == over["month"]:
            return _("%(past)s; at this rate it exceeds the %(capacity)s installed in %(when)s (%(demand)s GPUs) "
                     "→ %(add)s before %(when)s; %(accuracy)s.") % figures
        return _("%(past)s; at this rate it exceeds the %(capacity)s installed in %(when)s; %(peak)s by "
                 "%(peak_month)s → %(add)s before %(when)s; %(accuracy)s.") % figures
    return _("%(past)s; at this rate it stays under the %(capacity)s installed through %(until)s (at least "
             "%(headroom)s GPUs of headroom) → nothing to add; %(accuracy)s.") % {
        "past": past, "capacity": whole(capacity), "until": entry["forecast"][-1]["month"],
        "headroom": whole(round(capacity - peak["demand_gpus"], 1)), "accuracy": accuracy}
