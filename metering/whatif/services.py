"""What-if runs: started (page, API, command), run by a Celery task that writes its progress, and stored.

A run reads a closed month as it was (``scheduling.passes.history``), replays it through the engine as it was
(the baseline) and with its change (``replay.run``), and keeps the figures. The capacity sizing (``sizing``) and
the backtest of a real fleet change (``backtest``) are runs too, so the advice that quotes them can be read again.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from gpuportal.text.dates import day_start, local_day, month_start, next_month
from metering.models import WhatIfRun
from metering.reports.sizing import DEFAULT_GPUS_PER_NODE, gpus_per_node, is_closed
from metering.whatif import replay
from metering.whatif.change import Change, apply
from scheduling import triggers
from scheduling.passes.history import History, fleet_changes, read_history
from tenants import access

logger = logging.getLogger(__name__)

#: The task that runs a stored what-if (``metering.tasks.run_what_if``), queued by name (``scheduling.triggers``).
RUN_WHAT_IF = "metering.tasks.run_what_if"
#: Why a run failed, stored as message ids and read in the reader's language (``WhatIfRun.error_text``); what
#: went wrong inside is in the server's log, never shown.
QUEUE_REFUSED = gettext_noop("The task queue could not take the run; start it again.")
RUN_FAILED = gettext_noop("The run failed; the error was recorded in the server's log for the platform admins.")
#: The most nodes the sizing adds to one model before it says "more than this".
MAX_SIZING_NODES = 16
#: Progress is written at most this often (seconds), so a run does not spend its time writing it.
PROGRESS_EVERY = 1.0


def may_run(user) -> bool:
    """Managers and platform admins: a what-if replays every tenant's jobs."""
    return access.sees_all_tenants(user)


def check_month(month: date, now: datetime | None = None) -> date:
    month = month_start(month)
    if not is_closed(month, now):
        raise ValidationError({"month": _("Only a closed month can be replayed; %(m)s is still open.") % {
            "m": f"{month:%Y-%m}"}})
    return month


def start(user, month: date, change: Change, kind: str = WhatIfRun.Kind.CHANGE) -> WhatIfRun:
    """A stored run, queued once the transaction commits (run inline where tasks run in this process)."""
    if not may_run(user):
        raise PermissionDenied(_("What-if runs are for managers and platform admins."))
    month = check_month(month)
    run = WhatIfRun.objects.create(month=month, kind=kind, change=change.as_data(), created_by=user)
    transaction.on_commit(lambda: _queue(run.pk))
    return run


def _queue(run_id: int) -> None:
    if not triggers.send(RUN_WHAT_IF, run_id):
        WhatIfRun.objects.filter(pk=run_id, status=WhatIfRun.Status.QUEUED).update(
            status=WhatIfRun.Status.FAILED, error=QUEUE_REFUSED)


def execute(run_id: int) -> WhatIfRun:
    """Run a stored what-if (the task's body): progress written as it goes, the figures or the error kept."""
    run = WhatIfRun.objects.get(pk=run_id)
    if run.status not in (WhatIfRun.Status.QUEUED, WhatIfRun.Status.RUNNING):
        return run
    WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfRun.Status.RUNNING, started_at=timezone.now())
    progress = _progress_writer(run.pk)
    try:
        if run.kind == WhatIfRun.Kind.SIZING:
            result = sizing(run.month, progress=progress)
        elif run.kind == WhatIfRun.Kind.BACKTEST:
            result = backtest_change(run.change, progress=progress)
        else:
            result = run_month(run.month, Change.from_data(run.change), progress=progress)
    except Exception:  # a run that fails says so on its page; the worker goes on
        logger.exception("what-if #%s failed", run.pk)
        WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfRun.Status.FAILED, error=RUN_FAILED,
                                                   finished_at=timezone.now())
    else:
        WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfRun.Status.DONE, result=result, progress=1.0,
                                                   finished_at=timezone.now())
    run.refresh_from_db()
    return run


def _progress_writer(run_id: int):
    last = [0.0]

    def write(share: float) -> None:
        moment = timezone.now().timestamp()
        if moment - last[0] >= PROGRESS_EVERY or share >= 1:
            last[0] = moment
            WhatIfRun.objects.filter(pk=run_id).update(progress=round(min(share, 0.99), 3))
    return write


def window(month: date) -> tuple[datetime, datetime]:
    return day_start(month_start(month)), day_start(next_month(month_start(month)))


def run_month(month: date, change: Change, progress=None) -> dict:
    """The what-if of ``change`` on ``month`` (synchronous: the task's, the command's and the benchmark's)."""
    t0, t1 = window(month)
    history = read_history(t0, t1)
    return {"month": f"{month_start(month):%Y-%m}", **replay.run(history, change, progress=progress)}


def production(task_type: str) -> bool:
    return task_type in settings.METERING["WHAT_IF_PRODUCTION_TASK_TYPES"]


def production_p95(history: History, result) -> dict[str, float | None]:
    """The 95th percentile wait of production task types per model in a replay (``SimulationResult``)."""
    rows = [r for r in replay.simulated_results(history, result) if production(r.task_type)]
    by_model: dict[str, list] = {}
    for r in rows:
        by_model.setdefault(r.gpu_model, []).append(r)
    return {model: replay.figures(found, history.end, 0)["p95_wait_seconds"] for model, found in by_model.items()}


def sizing(month: date, target_hours: float | None = None, progress=None) -> dict:
    """Per GPU model: the fewest whole nodes that, added, bring the replayed month's p95 wait of production task
    types under the target (``METERING["WHAT_IF_TARGET_P95_HOURS"]``), with the baseline's error against the
    real month. A model at a time (the others as they were): ``MAX_SIZING_NODES`` first (when even they leave the
    target missed, ``enough`` is False and nothing is to be bought: the waits are for quotas or policy), then
    bisection for the fewest, about five replays a model."""
    target = (settings.METERING["WHAT_IF_TARGET_P95_HOURS"] if target_hours is None else target_hours) * 3600
    t0, t1 = window(month)
    history = read_history(t0, t1)
    shapes = gpus_per_node()
    baseline = replay.replay(history, history.world)
    base_p95 = production_p95(history, baseline)
    actual = replay.side(replay.actual_results(history), history.end, baseline.capacity_gpu_seconds)
    base_side = replay.side(replay.simulated_results(history, baseline), history.end, baseline.capacity_gpu_seconds)
    actual_p95 = _actual_production_p95(history)
    models = {}
    over = sorted(m for m, p95 in base_p95.items() if p95 is not None and p95 > target and m in shapes)
    for done, model in enumerate(over):
        per_node = shapes.get(model, DEFAULT_GPUS_PER_NODE)

        def p95_with(nodes, model=model, per_node=per_node):
            changed = replay.replay(history, apply(Change(add={model: nodes * per_node}), history.world, shapes))
            return production_p95(history, changed).get(model)

        # the most first: when even that leaves the target missed, the waits are not for GPUs (quotas, policy)
        most = p95_with(MAX_SIZING_NODES)
        enough = most is not None and most <= target
        low, high, best = 0, MAX_SIZING_NODES, most
        while enough and high - low > 1:  # waits shrink as nodes are added: the fewest that meet the target
            middle = (low + high) // 2
            p95 = p95_with(middle)
            if p95 is not None and p95 <= target:
                high, best = middle, p95
            else:
                low = middle
        models[model] = {"p95_wait_seconds": base_p95[model], "actual_p95_wait_seconds": actual_p95.get(model),
                         "gpus_per_node": per_node, "enough": enough, "add_nodes": high if enough else 0,
                         "add_gpus": high * per_node if enough else 0, "p95_wait_seconds_after": best,
                         "tried_nodes": MAX_SIZING_NODES}
        if progress:
            progress((done + 1) / len(over))
    for model, p95 in base_p95.items():
        models.setdefault(model, {"p95_wait_seconds": p95, "actual_p95_wait_seconds": actual_p95.get(model),
                                  "gpus_per_node": shapes.get(model, DEFAULT_GPUS_PER_NODE), "enough": True,
                                  "add_nodes": 0, "add_gpus": 0, "p95_wait_seconds_after": p95,
                                  "tried_nodes": 0})
    return {"month": f"{month_start(month):%Y-%m}", "target_p95_wait_seconds": target,
            "production_task_types": list(settings.METERING["WHAT_IF_PRODUCTION_TASK_TYPES"]),
            "models": dict(sorted(models.items())), "baseline": base_side, "actual": actual,
            "baseline_error": replay.baseline_error(base_side, actual), "jobs": len(history.jobs)}


def _actual_production_p95(history: History) -> dict[str, float | None]:
    rows = [r for r in replay.actual_results(history) if production(r.task_type)]
    by_model: dict[str, list] = {}
    for r in rows:
        by_model.setdefault(r.gpu_model, []).append(r)
    return {model: replay.figures(found, history.end, 0)["p95_wait_seconds"] for model, found in by_model.items()}


def backtest(joined: datetime, added: dict[str, int], days: int | None = None, progress=None) -> dict:
    """A real fleet change (``added``: GPUs per model that joined at ``joined``) checked against the method: the
    weeks before it replayed with the change (the prediction) beside the weeks after it as they really were, and
    the real weeks after replayed too (how far the replay itself is from them). Both stretches last ``days``
    (default: from ``joined`` to the end of its month)."""
    length = timedelta(days=days) if days else day_start(next_month(local_day(joined))) - joined
    before = read_history(joined - length, joined)
    after = read_history(joined, joined + length)
    change = Change(add=dict(added))
    predicted = replay.run(before, change, progress=(lambda s: progress(s / 2)) if progress else None)
    replayed = replay.run(after, Change(), progress=(lambda s: progress(0.5 + s / 2)) if progress else None)
    return {"joined": joined.isoformat(), "days": length.total_seconds() / 86400, "change": change.as_data(),
            "before": predicted["actual"], "predicted": predicted["changed"], "after": replayed["actual"],
            "replayed_after": replayed["baseline"],
            "prediction_error": replay.baseline_error(predicted["changed"], replayed["actual"]),
            "replay_error_after": replayed["baseline_error"], "effects": predicted["effects"]}


def start_backtests(month: date, user=None) -> list[WhatIfRun]:
    """A backtest run (stored, run here) for every fleet change of ``month`` (nodes registered in it)."""
    t0, t1 = window(month)
    runs = []
    for change in fleet_changes(t0, t1):
        run = WhatIfRun.objects.create(month=month_start(month), kind=WhatIfRun.Kind.BACKTEST, created_by=user,
                                       change={"joined": change.joined.isoformat(), "add": change.gpus})
        runs.append(execute(run.pk))
    return runs


def backtest_change(data: dict, progress=None) -> dict:
    return backtest(datetime.fromisoformat(data["joined"]), data["add"], data.get("days"), progress=progress)


def latest_sizing(month: date) -> WhatIfRun | None:
    """The newest finished sizing of ``month``: what the capacity advice cites."""
    return (WhatIfRun.objects.filter(month=month_start(month), kind=WhatIfRun.Kind.SIZING,
                                     status=WhatIfRun.Status.DONE).order_by("-finished_at", "-id").first())


def size_month(month: date, user=None) -> WhatIfRun:
    """A sizing of ``month`` run here and stored (the beat task runs it before it freezes the month's report)."""
    run = WhatIfRun.objects.create(month=month_start(month), kind=WhatIfRun.Kind.SIZING, created_by=user)
    return execute(run.pk)
