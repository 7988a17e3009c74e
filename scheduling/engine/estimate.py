"""Estimated start times, like Slurm's ``squeue --start`` (Kueue has none).

Each GPU of a model is a slot that frees at a known time (now when idle, else when the jobs on it are
expected to end: started + runtime estimate, never beyond the max runtime). Waiting jobs take, in queue
order (a job held back by a node kept for another right after that one), the earliest ``k`` slots of their
model and of their tenant's quota; their start is when the last
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


class Slots:
    """A multiset of the times slots free, kept as a heap of distinct times with their counts: the queue hands
    back ``k`` slots at one time per job, and idle slots all free "now", so a job's take and give are a few heap
    operations instead of ``2 k`` (100,000 waiting jobs on 80,000 GPUs)."""

    __slots__ = ("_counts", "_heap", "_size")

    def __init__(self, times=()):
        self._counts: dict[float, int] = {}
        for t in times:
            self._counts[t] = self._counts.get(t, 0) + 1
        self._heap = list(self._counts)
        heapq.heapify(self._heap)
        self._size = sum(self._counts.values())

    def __len__(self) -> int:
        return self._size

    def take(self, k: int) -> float | None:
        """Remove the ``k`` earliest slots; the time the last of them frees (None if too few, or ``k`` is 0)."""
        if self._size < k or k <= 0:
            return None
        self._size -= k
        heap, counts = self._heap, self._counts
        while True:
            t = heap[0]
            count = counts[t]
            if count > k:
                counts[t] = count - k
                return t
            heapq.heappop(heap)
            del counts[t]
            k -= count
            if not k:
                return t

    def give(self, k: int, at: float) -> None:
        """Add ``k`` slots that free at ``at``."""
        if k <= 0:
            return
        self._size += k
        if at in self._counts:
            self._counts[at] += k
        else:
            self._counts[at] = k
            heapq.heappush(self._heap, at)

    def ordered(self):
        """(time, count) from the earliest."""
        return sorted(self._counts.items())


def slot_heaps(capacity, running: list[RunningJob], extra_busy: dict, now: float, use_expected: bool = True,
               outside: tuple[OutsideHold, ...] = (), only: str | None = None) -> dict[str, Slots]:
    """Per model key: the times each schedulable GPU frees. ``extra_busy`` maps (node, gpu) to a
    time (admissions of this pass). ``outside``: GPUs held by work the portal did not submit, freeing at their
    time limit (never, when none is known). ``"*"`` pools all models. ``only``: the one key wanted."""
    ends: dict[tuple[int, int], float] = {}
    for job in running:
        end = expected_end(job, now, use_expected)  # never before now: it replaces the default of now
        for p in job.placements:
            for index in p.gpu_indices:
                key = (p.node_id, index)
                known = ends.get(key)
                if known is None or end > known:
                    ends[key] = end
    for hold in outside:
        end = max(hold.end(), now)
        for index in hold.gpu_indices:
            key = (hold.node_id, index)
            ends[key] = max(ends.get(key, now), end)
    ends.update({k: max(ends.get(k, now), v) for k, v in extra_busy.items()})
    times: dict[str, list[float]] = defaultdict(list)
    for node_id, gpus in capacity.free.items():
        model = capacity.nodes[node_id].gpu_model
        if only is None or only in (model, ANY_MODEL):
            times[model].extend(ends.get((node_id, index), now) for index in gpus)
    heaps = {model: Slots(model_times) for model, model_times in times.items() if only in (None, model)}
    if times and only in (None, ANY_MODEL):
        heaps[ANY_MODEL] = Slots(t for model_times in times.values() for t in model_times)
    return heaps


def take_slots(slots: Slots, k: int) -> float | None:
    """Take the ``k`` earliest slots; the time the last of them frees (None if there are too few)."""
    return slots.take(k)


def give_slots(slots: Slots, k: int, at: float) -> None:
    slots.give(k, at)


def shadow(slots: Slots, k: int) -> tuple[float, int]:
    """EASY backfill: when the head job can start (its ``k``-th slot frees, ``k`` >= 1) and how many more slots
    are free by then (the "extra" GPUs a backfilled job may keep beyond that time)."""
    if len(slots) < k:
        return math.inf, 0
    seen = 0
    for t, count in slots.ordered():
        seen += count
        if seen >= k:
            return t, seen - k
    return math.inf, 0  # not reached: the slots number at least k


def quota_heaps(quotas, running: list[RunningJob], now: float, use_expected: bool = True):
    """Per (tenant, model): the limit as slots that free when the tenant's running jobs end."""
    heaps: dict[tuple[str, str], Slots] = {}
    busy: dict[tuple[str, str], list[float]] = defaultdict(list)
    for job in running:
        end = expected_end(job, now, use_expected)
        busy[(job.tenant, job.gpu_model)] += [end] * job.quota_gpus
    for (tenant, model), quota in quotas.items():
        limit = int(quota.limit + 1e-9)
        ends = sorted(busy.get((tenant, model), []))[:limit]
        heaps[(tenant, model)] = Slots(ends + [now] * max(0, limit - len(ends)))
    return heaps


__all__ = ["RUNTIME_PERCENTILE", "WHOLE", "Slots", "give_slots", "quota_heaps", "runtime_from_history", "shadow",
           "slot_heaps", "take_slots"]
