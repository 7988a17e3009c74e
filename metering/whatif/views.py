"""The what-if page (``/reports/what-if/``): choose a closed month and one change, see the run's progress and then
its figures beside the month's real ones. Managers and platform admins (``services.may_run``)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _

from gpuportal.text.phrases import read as read_phrase
from metering.models import WhatIfRun
from metering.reports import monthly as reports
from metering.reports.sizing import is_closed
from metering.whatif import services
from metering.whatif.change import parse_change

#: The figures of a result's tables, in order, with their unit.
FIGURES = ("jobs", "median_wait_seconds", "p95_wait_seconds", "gpu_hours", "allocation", "preemptions",
           "never_started")


def _allowed(user) -> None:
    if not services.may_run(user):
        raise PermissionDenied(_("What-if runs are for managers and platform admins."))


def _months() -> list[str]:
    return [f"{m:%Y-%m}" for m in reports.months_with_data() if is_closed(m)]


@login_required
def what_if_index(request):
    _allowed(request.user)
    errors, typed = {}, {}
    if request.method == "POST":
        typed = {key: request.POST.get(key, "") for key in ("month", "add", "quota", "guarantee", "half_life_hours",
                                                              "backfill", "preemption")}
        try:
            try:
                month = reports.parse_month(typed["month"])
            except ValueError as exc:
                raise ValidationError({"month": str(exc)}) from None
            change = parse_change(add=typed["add"].split(), quota=typed["quota"].split(),
                                  guarantee=typed["guarantee"].split(), half_life_hours=typed["half_life_hours"],
                                  backfill=typed["backfill"] or None, preemption=typed["preemption"] or None)
            run = services.start(request.user, month, change)
            return redirect("metering:what-if-detail", pk=run.pk)
        except ValidationError as exc:
            errors = {key: " ".join(messages) for key, messages in exc.message_dict.items()}
    months = _months()
    return render(request, "metering/what_if.html", {
        "runs": WhatIfRun.objects.select_related("created_by").defer("result")[:50], "months": months,
        "typed": typed or {"month": months[0] if months else ""}, "errors": errors})


@login_required
def what_if_detail(request, pk: int):
    _allowed(request.user)
    run = get_object_or_404(WhatIfRun.objects.select_related("created_by"), pk=pk)
    result = run.result or {}
    tables, heads, sides = [], [], ()
    if run.status == WhatIfRun.Status.DONE and "baseline" in result and result.get("changed"):
        heads = [_("actual"), _("replay"), _("changed")]
        sides = (result["actual"], result["baseline"], result["changed"])
    elif run.status == WhatIfRun.Status.DONE and "baseline" in result:  # a sizing: its additions are below
        heads = [_("actual"), _("replay")]
        sides = (result["actual"], result["baseline"])
    elif run.status == WhatIfRun.Status.DONE and "predicted" in result:  # a backtest
        heads = [_("before, actual"), _("before, replayed with the change"), _("after, actual")]
        sides = (result["before"], result["predicted"], result["after"])
    if sides:
        for key, title in (("by_model", _("By GPU model")), ("by_tenant", _("By tenant")),
                           ("by_task_type", _("By task type"))):
            rows = []
            for name in sorted(set().union(*(side[key] for side in sides))):
                rows.append({"name": name, "figures": [
                    [_shown(figure, side[key].get(name, {}).get(figure)) for side in sides] for figure in FIGURES]})
            tables.append({"title": title, "rows": rows})
    effects = [read_phrase(e["text"], e) for e in result.get("effects", [])]
    sizing = [(model, _shown("p95_wait_seconds", sized["p95_wait_seconds"]),
               _shown("p95_wait_seconds", sized["actual_p95_wait_seconds"]), sized["add_gpus"],
               _shown("p95_wait_seconds", sized["p95_wait_seconds_after"]))
              for model, sized in (result.get("models") or {}).items()]
    return render(request, "metering/what_if_detail.html", {
        "run": run, "result": result, "tables": tables, "effects": effects, "labels": _labels(), "sizing": sizing,
        "heads": heads,
        "running": run.status in (WhatIfRun.Status.QUEUED, WhatIfRun.Status.RUNNING),
        "percent": round(run.progress * 100)})


def _labels() -> list[str]:
    return [_("jobs"), _("median wait (h)"), _("p95 wait (h)"), _("GPU-hours"), _("allocation (%)"),
            _("preemptions"), _("never started")]


def _shown(figure: str, value) -> str:
    """A figure as the tables show it: waits in hours, allocation in percent."""
    if value is None:
        return "—"
    if figure.endswith("wait_seconds"):
        return f"{value / 3600:.1f}"
    if figure == "allocation":
        return f"{value * 100:.0f}"
    return f"{value:g}"
