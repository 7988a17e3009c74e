"""A what-if run's figures: a stretch replayed as it was (the baseline) and with one change, beside what
really happened, per GPU model, tenant and task type, and the change's effect as sentences with units.

The baseline against the real month is the method's own error: it is shown with every answer, so that nobody
trusts a difference smaller than it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from django.utils.translation import gettext_noop

from gpuportal.storage.db import percentile
from gpuportal.text.phrases import Phrase
from metering.whatif.change import Change, apply
from scheduling.engine.simulation import SimulationResult, World, simulate
from scheduling.passes.history import History

#: A difference in a wait smaller than this (seconds) or than this share of the wait reads "unchanged".
SAME_WAIT_SECONDS = 300.0
SAME_WAIT_SHARE = 0.1
#: Seconds between simulated passes: the portal's pass runs on every change and at least once a minute.
PASS_INTERVAL = 60.0


class Figures(TypedDict):
    jobs: int
    median_wait_seconds: float | None
    p95_wait_seconds: float | None
    gpu_hours: float
    allocation: float | None  # GPU-hours held over the GPU-hours the fleet (of the model) offered
    preemptions: int
    never_started: int  # jobs of the month that had not started when it ended


class Side(TypedDict):
    total: Figures
    by_model: dict[str, Figures]
    by_tenant: dict[str, Figures]
    by_task_type: dict[str, Figures]
    by_tenant_model: dict[str, Figures]  # "tenant/model"


@dataclass(frozen=True)
class JobResult:
    tenant: str
    task_type: str
    gpu_model: str
    arrival: float
    start: float | None
    preemptions: int
    gpu_seconds: float


def actual_results(history: History) -> list[JobResult]:
    return [JobResult(d.job.tenant, d.job.task_type, d.actual.gpu_model, d.job.submitted_at, d.actual.start,
                      d.actual.preemptions, d.actual.gpu_seconds) for d in history.jobs]


def simulated_results(history: History, result: SimulationResult) -> list[JobResult]:
    rows = []
    for d in history.jobs:
        outcome = result.outcomes[d.job.id]
        model = outcome.gpu_model or d.actual.gpu_model
        rows.append(JobResult(d.job.tenant, d.job.task_type, model, d.job.submitted_at, outcome.start,
                              outcome.preemptions, outcome.gpu_seconds))
    return rows


def figures(rows: list[JobResult], end: float, capacity_seconds: float) -> Figures:
    """A job not started by the end counts its wait until the end (as the monthly report does)."""
    waits = [(r.start if r.start is not None else end) - r.arrival for r in rows]
    held = sum(r.gpu_seconds for r in rows)
    return {"jobs": len(rows), "median_wait_seconds": _round(percentile(waits, 0.5)),
            "p95_wait_seconds": _round(percentile(waits, 0.95)), "gpu_hours": round(held / 3600, 1),
            "allocation": round(held / capacity_seconds, 4) if capacity_seconds else None,
            "preemptions": sum(r.preemptions for r in rows),
            "never_started": sum(1 for r in rows if r.start is None)}


def side(rows: list[JobResult], end: float, capacity: dict[str, float]) -> Side:
    total = sum(capacity.values())
    groups: dict[str, dict[str, list[JobResult]]] = {k: defaultdict(list) for k in (
        "by_model", "by_tenant", "by_task_type", "by_tenant_model")}
    for r in rows:
        groups["by_model"][r.gpu_model].append(r)
        groups["by_tenant"][r.tenant].append(r)
        groups["by_task_type"][r.task_type].append(r)
        groups["by_tenant_model"][f"{r.tenant}/{r.gpu_model}"].append(r)
    data: Side = {"total": figures(rows, end, total)}  # type: ignore[typeddict-item]
    for key, grouped in groups.items():
        data[key] = {name: figures(found, end, capacity.get(name.split("/")[-1], 0.0) if key in (
            "by_model", "by_tenant_model") else total) for name, found in sorted(grouped.items())}
    return data


def _round(value):
    return None if value is None else round(value, 1)


def replay(history: History, world: World, progress: Callable[[float], None] | None = None) -> SimulationResult:
    return simulate(world, [d.sim for d in history.jobs], history.start, history.end, pass_interval=PASS_INTERVAL,
                    progress=progress, clock=time.perf_counter)


def run(history: History, change: Change, progress: Callable[[float], None] | None = None,
        shapes: dict[str, int] | None = None) -> dict:
    """Baseline and changed replays of ``history`` with the real figures, the baseline's error and the effect."""
    def part(offset):
        return (lambda share: progress(offset + share / 2)) if progress else None

    started = time.perf_counter()
    baseline = replay(history, history.world, part(0.0))
    changed_world = apply(change, history.world, shapes)
    changed = baseline if change.empty else replay(history, changed_world, part(0.5))
    actual = side(actual_results(history), history.end, baseline.capacity_gpu_seconds)
    base = side(simulated_results(history, baseline), history.end, baseline.capacity_gpu_seconds)
    after = side(simulated_results(history, changed), history.end, changed.capacity_gpu_seconds)
    return {"jobs": len(history.jobs), "change": change.as_data(), "actual": actual, "baseline": base,
            "changed": after, "baseline_error": baseline_error(base, actual), "effects": effects(base, after),
            "capacity_gpus": _gpus(history.world), "changed_capacity_gpus": _gpus(changed_world),
            "seconds": round(time.perf_counter() - started, 2),
            "engine_seconds": round(baseline.engine_seconds + (0 if changed is baseline else changed.engine_seconds),
                                    2), "passes": baseline.passes + (0 if changed is baseline else changed.passes)}


def _gpus(world: World) -> dict[str, int]:
    gpus: dict[str, int] = defaultdict(int)
    for n in world.nodes:
        gpus[n.node.gpu_model] += n.node.total_gpus
    return dict(sorted(gpus.items()))


ERROR_FIGURES = ("jobs", "median_wait_seconds", "p95_wait_seconds", "gpu_hours", "allocation", "preemptions",
                 "never_started")


def error_of(simulated: Figures, actual: Figures) -> dict:
    """Per figure: the simulated value minus the real one, and that against the real one (None where it is 0)."""
    found = {}
    for name in ERROR_FIGURES:
        a, b = simulated.get(name), actual.get(name)
        if a is None or b is None:
            found[name] = {"simulated": a, "actual": b, "error": None, "relative_error": None}
            continue
        found[name] = {"simulated": a, "actual": b, "error": round(a - b, 4),
                       "relative_error": round((a - b) / b, 4) if b else None}
    return found


def baseline_error(base: Side, actual: Side) -> dict:
    return {"total": error_of(base["total"], actual["total"]),
            **{key: {name: error_of(base[key][name], actual[key][name]) for name in base[key] if name in actual[key]}
               for key in ("by_model", "by_tenant", "by_task_type")}}


def _changed(before: float | None, after: float | None) -> bool:
    if before is None or after is None:
        return before != after
    return abs(after - before) >= max(SAME_WAIT_SECONDS, SAME_WAIT_SHARE * max(before, after))


def effects(base: Side, after: Side) -> list[dict]:
    """The change's effect per model and tenant: "median H100 wait 3.1 h -> 0.4 h for vision"; a tenant whose
    waits moved on no model: "nlp unchanged". Stored as English with its phrase (read in the reader's language)."""
    found, moved = [], set()
    for key, before in base["by_tenant_model"].items():
        now = after["by_tenant_model"].get(key)
        if now is None:
            continue
        tenant, model = key.split("/", 1)
        for figure, msgid in (("median_wait_seconds", gettext_noop("median %(model)s wait %(before)s h → %(after)s h "
                                                                   "for %(tenant)s")),
                              ("p95_wait_seconds", gettext_noop("p95 %(model)s wait %(before)s h → %(after)s h for "
                                                                "%(tenant)s"))):
            if _changed(before[figure], now[figure]):
                moved.add(tenant)
                phrase = Phrase(msgid, {"model": model, "tenant": tenant, "before": _hours(before[figure]),
                                        "after": _hours(now[figure])})
                found.append({"tenant": tenant, "gpu_model": model, "figure": figure, "before": before[figure],
                              "after": now[figure], "text": str(phrase), **phrase.as_data()})
    for tenant in sorted(base["by_tenant"]):
        if tenant not in moved:
            phrase = Phrase(gettext_noop("%(tenant)s unchanged"), {"tenant": tenant})
            found.append({"tenant": tenant, "gpu_model": "", "figure": "", "before": None, "after": None,
                          "text": str(phrase), **phrase.as_data()})
    return found


def _hours(seconds) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.1f}"
