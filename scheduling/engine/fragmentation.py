"""GPU fragmentation of a node, measured against a target workload (Weng et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23).

Why a statistical measure: whether free GPU capacity is "fragmented" depends on what will ask for it. Half a
free GPU is useful to a stream of 0.3-GPU inference tasks and useless to 8-GPU training gangs. So the measure
takes a *target workload* M — task shapes with their probabilities (the popularity of each shape in the tasks
seen so far, or in a trace's pod list) — and asks, for each shape m, how much of the node's free GPU capacity
a task of shape m could not use:

- the task cannot be placed on the node at all (a GPU model it does not accept, not enough free CPU or
  memory, fewer whole free GPUs than it asks for, no GPU with its share free): **all** the node's free GPU
  capacity is unusable to it;
- it can be placed: the free capacity of each GPU whose free share is smaller than what the task needs of one
  GPU (``min(its share, 1 GPU)``) is unusable to it — half a free GPU is a fragment for a whole-GPU task, and
  0.2 of a GPU is a fragment for a 0.3-GPU task. A task that asks for no GPU leaves nothing fragmented where
  it fits.

The node's fragmentation is the expectation over the workload: ``F_n(M) = sum_m p_m * F_n(m)``, in GPUs; it
lies between 0 and the node's free GPU capacity. A cluster's fragmentation is the sum over its nodes, and the
unallocated GPUs that are *not* fragmented are capacity a typical task could still use. Fragmentation
Gradient Descent (FGD) places each task where ``F`` grows least.

Worked examples (tests/scheduling/engine/test_fragmentation.py): 8 whole free GPUs under a workload of 8-GPU tasks:
0. Half of one GPU free under whole-GPU tasks: 0.5. Half of one GPU free under a 50/50 mix of 1-GPU and
0.3-GPU tasks: 0.5 x 0.5 + 0.5 x 0 = 0.25.

Pure Python: the engine, the inflation experiment (bench/inflation.py), and later ``/metrics`` share it.
Shares are in thousandths of a GPU (1000 = a whole GPU), as everywhere in the engine.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WHOLE = 1000


@dataclass(frozen=True)
class TaskShape:
    """What one task asks for: ``gpus`` GPUs (0: none) of ``gpu_milli`` thousandths each (below 1000 only
    with one GPU: a shared GPU), CPU and memory on the node, and the GPU models it accepts (empty: any)."""

    gpus: int
    gpu_milli: int = WHOLE
    cpu_milli: int = 0
    memory_mib: int = 0
    models: tuple[str, ...] = ()

    @property
    def gpu_request(self) -> float:
        """GPUs requested, a share counted as its fraction."""
        return self.gpus * self.gpu_milli / WHOLE if self.gpus else 0.0


class Workload:
    """A target workload: task shapes and their probabilities (normalised to sum to 1).

    :meth:`node_fragmentation` is memoised on the node's state, coarsened exactly: whether a shape fits
    depends on free CPU only through how many of the workload's distinct CPU demands it covers (likewise
    memory), so nodes that differ only within those steps share one entry. FGD evaluates every candidate
    node for every task; the memo makes that affordable on a few thousand nodes.
    """

    def __init__(self, weighted: Iterable[tuple[TaskShape, float]]):
        counts: Counter[TaskShape] = Counter()
        for shape, weight in weighted:
            if weight < 0:
                raise ValueError("a workload weight must not be negative")
            counts[shape] += weight
        total = sum(counts.values())
        if total <= 0:
            raise ValueError("a workload needs at least one task shape with a positive weight")
        self.shapes: tuple[tuple[TaskShape, float], ...] = tuple(
            (shape, weight / total) for shape, weight in sorted(counts.items(), key=lambda item: -item[1]))
        self._cpu_steps = sorted({s.cpu_milli for s, _p in self.shapes})
        self._memory_steps = sorted({s.memory_mib for s, _p in self.shapes})
        self._by_model: dict[str, tuple[float, tuple[tuple[TaskShape, float], ...]]] = {}
        self._memo: dict[tuple, float] = {}

    @classmethod
    def from_tasks(cls, shapes: Iterable[TaskShape]) -> Workload:
        """The workload whose probabilities are the popularity of each shape among ``shapes``."""
        return cls((shape, 1.0) for shape in shapes)

    def _for_model(self, model: str) -> tuple[float, tuple[tuple[TaskShape, float], ...]]:
        """The probability of shapes that cannot use a GPU of ``model`` at all, and the other shapes."""
        found = self._by_model.get(model)
        if found is None:
            barred = sum(p for s, p in self.shapes if s.gpus and s.models and model not in s.models)
            usable = tuple((s, p) for s, p in self.shapes if not (s.gpus and s.models and model not in s.models))
            found = self._by_model[model] = (barred, usable)
        return found

    def node_fragmentation(self, free: Sequence[int], cpu_free: float = math.inf, memory_free: float = math.inf,
                           model: str = "") -> float:
        """``F_n(M)`` in GPUs: the expected free GPU capacity of the node that a task drawn from the workload
        could not use."""
        ordered = tuple(sorted(free))
        cpu_step = bisect.bisect_right(self._cpu_steps, cpu_free)
        memory_step = bisect.bisect_right(self._memory_steps, memory_free)
        key = (model, ordered, cpu_step, memory_step)
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = self._compute(ordered, cpu_free, memory_free, model)
        return value

    def _compute(self, free: tuple[int, ...], cpu_free: float, memory_free: float, model: str) -> float:
        total = sum(free)
        if total == 0:
            return 0.0
        barred, usable = self._for_model(model)
        whole = sum(1 for f in free if f >= WHOLE)
        largest = free[-1]
        unusable = barred * total
        for shape, p in usable:
            if cpu_free < shape.cpu_milli or memory_free < shape.memory_mib:
                unusable += p * total
            elif not shape.gpus:
                continue
            elif shape.gpu_milli >= WHOLE:
                unusable += p * (total if whole < shape.gpus else total - whole * WHOLE)
            elif largest < shape.gpu_milli:
                unusable += p * total
            else:
                unusable += p * sum(f for f in free if f < shape.gpu_milli)
        return unusable / WHOLE


def target_workload(waiting: Iterable, running: Iterable = (),
                    history: Sequence[tuple[TaskShape, float]] = ()) -> Workload | None:
    """The workload a pass places against: the site's own recent history when it has one (``history``: the
    shapes of the jobs submitted in its last days, with their counts — what a site asks for over days, not
    the minute's queue); else the shapes of the waiting jobs (what will ask next) and of the running ones, by
    popularity; None without any job. Jobs are counted by their raw fields first and a shape built once per
    distinct one: a pass sees ten thousand jobs and few shapes."""
    if sum(weight for _shape, weight in history) > 0:
        return Workload(history)
    counts: Counter = Counter((j.gpus_per_node, j.gpu_milli, j.cpu_milli, j.memory_mib, j.accept_models, j.gpu_model)
                              for j in waiting)
    ran: Counter = Counter(((len(j.placements[0].gpu_indices), j.placements[0].gpu_milli) if j.placements else (0, 0),
                            j.cpu_milli, j.memory_mib) for j in running)
    weighted: list[tuple[TaskShape, float]] = []
    for (gpus, milli, cpu, memory, accept, model), n in counts.items():
        models = tuple(accept) or (() if model == "*" else (model,))
        weighted.append((TaskShape(gpus, milli if gpus else 0, cpu, memory, models if gpus else ()), n))
    for ((gpus, milli), cpu, memory), n in ran.items():
        weighted.append((TaskShape(gpus, milli if gpus else 0, cpu, memory), n))
    return Workload(weighted) if weighted else None
