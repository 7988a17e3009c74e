"""Estimated start times, like Slurm's ``squeue --start`` (Kueue has none).

Each GPU of a model is a slot that frees at a known time (now when idle, else when the jobs on it are
expected to end: started + runtime estimate, never beyond the max runtime). Waiting jobs take, in queue
order, the earliest ``k`` slots of their model and of their tenant's quota; their start is when the last
of those frees, and they hand the slots back at start + their own runtime estimate. Topology and shares
are ignored here: an estimate, cheap enough (O(k log n) per job) for 10,000 waiting jobs.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict

from scheduling.engine.model import ANY_MODEL, WHOLE, OutsideHold, RunningJob

#: Runtime estimates are this percentile of the runtimes of finished jobs of the same class and size.
RUNTIME_PERCENTILE = 0.9


def runtime_from_history(samples: list[float], percentile: float = RUNTIME_PERCENTILE) -> float | None:
    """A runtime estimate from past runtimes of similar jobs; None with fewer than 3 samples."""
    if len(samples) < 3:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(percentile * (len(ordered) - 1) + 0.5))]


def expected_end(job: RunningJob, now: float, use_expected: bool = True) -> float:
    """When a running job should end: start + its runtime estimate (or max runtime), and not before now.

    (Assuming that a job past its estimate runs as long again as it already has made the replay's estimates
    worse: 35 % within 20 % instead of 47 %.)"""
    return max(job.end(use_expected), now)


def slot_heaps(capacity, running: list[RunningJob], extra_busy: dict, now: float, use_expected: bool = True,
               outside: tuple[OutsideHold, ...] = ()):
    """Per model key: a heap of the times each schedulable GPU frees. ``extra_busy`` maps (node, gpu) to a
    time (admissions of this pass). ``outside``: GPUs held by work the portal did not submit, freeing at their
    time limit (never, when none is known). ``"*"`` pools all models."""
    ends: dict[tuple[int, int], float] = {}
    for job in running:
        end = expected_end(job, now, use_expected)
        for p in job.placements:
            for index in p.gpu_indices:
                key = (p.node_id, index)
                ends[key] = max(ends.get(key, now), end)
    for hold in outside:
        end = max(hold.end(), now)
        for index in hold.gpu_indices:
            key = (hold.node_id, index)
            ends[key] = max(ends.get(key, now), end)
    ends.update({k: max(ends.get(k, now), v) for k, v in extra_busy.items()})
    heaps: dict[str, list[float]] = defaultdict(list)
    for node_id, gpus in capacity.free.items():
        model = capacity.nodes[node_id].gpu_model
        for index in gpus:
            t = ends.get((node_id, index), now)
            heaps[model].append(t)
            heaps[ANY_MODEL].append(t)
    for heap in heaps.values():
        heapq.heapify(heap)
    return heaps


def take_slots(heap: list[float], k: int) -> float | None:
    """Pop the ``k`` earliest slots; the time the last of them frees (None if the heap is too small)."""
    if len(heap) < k:
        return None
    times = [heapq.heappop(heap) for _ in range(k)]
    return times[-1] if times else None


def give_slots(heap: list[float], k: int, at: float) -> None:
    for _ in range(k):
        heapq.heappush(heap, at)


def shadow(heap: list[float], k: int) -> tuple[float, int]:
    """EASY backfill: when the head job can start (its ``k``-th slot frees) and how many more slots are free
    by then (the "extra" GPUs a backfilled job may keep beyond that time)."""
    if len(heap) < k:
        return math.inf, 0
    ordered = heapq.nsmallest(len(heap), heap) if len(heap) < 4 * k else sorted(heap)
    start = ordered[k - 1]
    extra = sum(1 for t in ordered[k:] if t <= start)
    return start, extra


def quota_heaps(quotas, running: list[RunningJob], now: float, use_expected: bool = True):
    """Per (tenant, model): the limit as slots that free when the tenant's running jobs end."""
    heaps: dict[tuple[str, str], list[float]] = {}
    busy: dict[tuple[str, str], list[float]] = defaultdict(list)
    for job in running:
        end = expected_end(job, now, use_expected)
        busy[(job.tenant, job.gpu_model)] += [end] * job.quota_gpus
    for (tenant, model), quota in quotas.items():
        limit = int(quota.limit + 1e-9)
        ends = sorted(busy.get((tenant, model), []))[:limit]
        heap = ends + [now] * max(0, limit - len(ends))
        heapq.heapify(heap)
        heaps[(tenant, model)] = heap
    return heaps


__all__ = ["RUNTIME_PERCENTILE", "WHOLE", "give_slots", "quota_heaps", "runtime_from_history", "shadow",
           "slot_heaps", "take_slots"]
