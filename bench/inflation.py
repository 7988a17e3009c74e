"""The workload-inflation experiment of Weng et al. (USENIX ATC '23, "Beware of Fragmentation") on the Alibaba
``openb`` trace (``../shared/traces/openb/``), with the published placement policies as baselines and our
engine's own placement as ``default``.

Why this and not the time-based replay (bench/trace.py): a replay with departures measures waits, and on this
trace our placement came out within 2 % of naive first-fit there. Inflation isolates *placement quality*:
tasks drawn (seeded, with replacement) from a pod list arrive one after another and never leave, until their
GPU requests reach ``inflation`` x the cluster's GPU capacity; each is placed at once by the policy or, if it
fits on no node, skipped (counted as failed) while arrivals go on. A policy that strands less capacity in
unusable fragments allocates more GPUs by the time the arrived requests equal the capacity.

Figures (per policy, :func:`run`): ``allocation_ratio`` = allocated GPUs / total GPUs when the arrived
requests first reach 100 % of the capacity; ``unallocated_gpus`` = total - allocated GPUs then;
``unallocated_gpus_fragmentation`` = the cluster's fragmentation then (scheduling/engine/fragmentation.py:
the expected free GPU capacity that a task drawn from the pod list's task shapes — the target workload — could
not use: all of a node's free GPUs for a task that cannot be placed there, the too-small GPU fragments for one
that can); the rest of the unallocated GPUs is capacity such a task could still use. ``curve`` lists
``[arrived_ratio, allocation_ratio]`` along the way.

Policies (from the paper's descriptions; every one places a task only where it fits — GPU model, free CPU
and memory, whole free GPUs or a GPU with the share free — and breaks equal scores at random, seeded, as the
Kubernetes scheduler under the paper's simulator does):

- ``random``: a uniformly random node that fits (its own seeded generator), a random GPU that fits.
- ``first-fit``: the first node in the node list that fits, its first GPU that fits.
- ``best-fit``: the node with the least resources left after placing it, ``0.5 x CPU left / largest node's CPU
  + 0.5 x GPUs left / largest node's GPUs``; a shared task on the fullest GPU that fits.
- ``dot-product`` (Tetris): the node whose free resources, normalised by the node's capacity, have the
  smallest dot product with the task's demand (CPU, GPU); a shared task scored per GPU.
- ``gpu-packing``: a shared task on an already shared GPU (fullest first); else whole free GPUs on a node
  already in use; else an idle node (the smallest).
- ``clustering`` (Gandiva-style affinity): tasks are classed as shared-GPU, 1-GPU, 2-GPU, ...; nodes whose GPU
  tasks are all of the task's class first, then nodes that hold that class among others, then nodes without
  GPU tasks, then nodes of other classes only; the fullest first within each.
- ``fgd``: Fragmentation Gradient Descent: the node, and for a shared task the GPU, where the node's
  fragmentation under the target workload grows least.
- ``default``: our engine's placement — :meth:`scheduling.engine.Capacity.place_gang` with the default
  policy's placement ("pack") on a :class:`WaitingJob` built from the task.

Pure Python, no Django: ``replay_trace --mode inflation`` wires it to the command line.
"""

from __future__ import annotations

import csv
import math
import random
import time
from dataclasses import dataclass

from bench.trace import load_nodes
from scheduling.engine import ANY_MODEL, WHOLE, Capacity, NodeSnapshot, Placement, Policy, WaitingJob
from scheduling.engine.fragmentation import TaskShape, Workload

POLICIES = ("random", "first-fit", "best-fit", "dot-product", "gpu-packing", "clustering", "fgd", "default")
CURVE_STEP = 0.05
#: The share of the pod list ``default`` is given as the site's history unless told otherwise.
HISTORY_SHARE = 0.25


@dataclass(frozen=True)
class Task:
    """One row of a pod list: its shape (GPUs, share, CPU, memory, accepted models) and name."""

    name: str
    shape: TaskShape


def load_tasks(path: str, limit: int = 0) -> list[Task]:
    """Every row of a pod list, in file order (CPU-only tasks included: they take CPU and memory on GPU nodes,
    as in the paper). ``gpu_milli`` counts only for single-GPU tasks; multi-GPU tasks take whole GPUs."""
    tasks = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            gpus = int(row["num_gpu"] or 0)
            milli = max(1, min(WHOLE, int(row["gpu_milli"] or WHOLE))) if gpus == 1 else WHOLE
            models = tuple(sorted(m for m in (row.get("gpu_spec") or "").split("|") if m))
            tasks.append(Task(row["name"], TaskShape(gpus, milli if gpus else 0, int(row["cpu_milli"] or 0),
                                                     int(row["memory_mib"] or 0), models)))
            if limit and len(tasks) >= limit:
                break
    return tasks


def arrivals(tasks: list[Task], capacity_gpus: int, inflation: float, seed: int, order: str = "sample") -> list[Task]:
    """The arrival sequence: tasks drawn uniformly with replacement (seeded) until their GPU requests reach
    ``inflation`` x ``capacity_gpus`` (the task that crosses the line arrives too); ``order="file"``: each
    task of the list once, in file order, stopping at the same line if the list is longer."""
    target = inflation * capacity_gpus
    sequence: list[Task] = []
    arrived = 0.0
    if order == "file":
        for task in tasks:
            if arrived >= target:
                break
            sequence.append(task)
            arrived += task.shape.gpu_request
        return sequence
    if not any(t.shape.gpus for t in tasks):
        raise ValueError("the pod list has no task that asks for a GPU")
    rng = random.Random(seed)
    while arrived < target:
        task = tasks[rng.randrange(len(tasks))]
        sequence.append(task)
        arrived += task.shape.gpu_request
    return sequence


class Cluster:
    """Free capacity per node: each GPU's free share (thousandths), free CPU and memory; plus, for the
    clustering policy, the shapes of the GPU tasks each node holds."""

    def __init__(self, nodes: tuple[NodeSnapshot, ...]):
        self.nodes = nodes
        self.index = {n.id: i for i, n in enumerate(nodes)}
        self.model = [n.gpu_model for n in nodes]
        self.size = [len(n.gpu_indices) for n in nodes]
        self.free = [[WHOLE] * len(n.gpu_indices) for n in nodes]
        self.cpu = [n.cpu_milli if n.cpu_milli else math.inf for n in nodes]
        self.mem = [n.memory_mib if n.memory_mib else math.inf for n in nodes]
        self.cpu_cap = [n.cpu_milli or 1 for n in nodes]
        self.whole = list(self.size)  # whole free GPUs per node
        self.affinity: list[dict[int, int]] = [{} for _ in nodes]
        self.by_model: dict[str, list[int]] = {}
        for i, node in enumerate(nodes):
            self.by_model.setdefault(node.gpu_model, []).append(i)
        self.capacity_gpus = sum(self.size)
        self.max_cpu = max((n.cpu_milli for n in nodes), default=1) or 1
        self.max_gpus = max(self.size, default=1) or 1
        self.allocated_milli = 0

    def candidates(self, shape: TaskShape) -> list[int]:
        """Nodes, in node order, where a task of ``shape`` fits now."""
        if shape.gpus and shape.models:
            pool = sorted(i for m in shape.models for i in self.by_model.get(m, ()))
        else:
            pool = range(len(self.nodes))
        cpu, mem, gpus, milli = shape.cpu_milli, shape.memory_mib, shape.gpus, shape.gpu_milli
        cpus, mems = self.cpu, self.mem
        if not gpus:
            return [i for i in pool if cpus[i] >= cpu and mems[i] >= mem]
        if milli >= WHOLE:
            whole = self.whole
            return [i for i in pool if whole[i] >= gpus and cpus[i] >= cpu and mems[i] >= mem]
        free = self.free
        return [i for i in pool if cpus[i] >= cpu and mems[i] >= mem and (self.whole[i] or max(free[i]) >= milli)]

    def fitting_gpus(self, i: int, shape: TaskShape) -> list[int]:
        """GPU indices of node ``i`` that a shared task fits on."""
        return [g for g, f in enumerate(self.free[i]) if f >= shape.gpu_milli]

    def whole_gpus(self, i: int, count: int) -> tuple[int, ...]:
        return tuple(g for g, f in enumerate(self.free[i]) if f == WHOLE)[:count]

    def take(self, i: int, gpus: tuple[int, ...], shape: TaskShape) -> None:
        milli = shape.gpu_milli if shape.gpus else 0
        for g in gpus:
            if self.free[i][g] < milli:
                raise ValueError(f"GPU {g} of node {self.nodes[i].name} has not {milli} thousandths free")
            if self.free[i][g] == WHOLE:
                self.whole[i] -= 1
            self.free[i][g] -= milli
            self.allocated_milli += milli
        self.cpu[i] -= shape.cpu_milli
        self.mem[i] -= shape.memory_mib
        if shape.gpus:
            key = _affinity(shape)
            self.affinity[i][key] = self.affinity[i].get(key, 0) + 1

    def fragmentation(self, workload: Workload) -> float:
        """The cluster's fragmentation under ``workload``, in GPUs."""
        return sum(workload.node_fragmentation(self.free[i], self.cpu[i], self.mem[i], self.model[i])
                   for i in range(len(self.nodes)))


def _affinity(shape: TaskShape) -> int:
    """The clustering policy's task class: 0 for a shared GPU, else the number of whole GPUs."""
    return 0 if shape.gpu_milli < WHOLE else shape.gpus


# -- policies: each returns (node index, GPU indices) or None ------------------------------------------------

def _tightest(cluster: Cluster, i: int, shape: TaskShape) -> tuple[int, ...]:
    """A shared task's GPU on node ``i``: the fullest that fits (lowest index among equals)."""
    return (min(cluster.fitting_gpus(i, shape), key=lambda g: (cluster.free[i][g], g)),)


def _gpus_for(cluster: Cluster, i: int, shape: TaskShape) -> tuple[int, ...]:
    if not shape.gpus:
        return ()
    if shape.gpu_milli >= WHOLE:
        return cluster.whole_gpus(i, shape.gpus)
    return _tightest(cluster, i, shape)


class Placer:
    """One policy's placement over one experiment (the random policy's generator and the engine's capacity
    view live here)."""

    def __init__(self, name: str, cluster: Cluster, workload: Workload, seed: int = 0,
                 history: tuple[TaskShape, ...] = ()):
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
        self.name, self.cluster, self.workload = name, cluster, workload
        self.rng = random.Random(f"placement-{seed}")
        self.capacity = _engine_view(cluster) if name == "default" else None
        self._next_id = 0
        self._shape: TaskShape | None = None
        self._history = history
        self._seen: list[TaskShape] = []
        self._refresh_at = 1

    def place(self, shape: TaskShape) -> tuple[int, tuple[int, ...]] | None:
        if self.name == "default":
            return self._default(shape)
        nodes = self.cluster.candidates(shape)
        if not nodes:
            return None
        self._shape = shape
        return getattr(self, "_" + self.name.replace("-", "_"))(nodes, shape)

    def _pick(self, scored):
        """The candidate ``(score, node, gpus)`` with the lowest score; equal scores broken uniformly at random
        (seeded), as the Kubernetes scheduler the paper's simulator builds on does. Without that, ties pile onto
        the first nodes of the list: FGD left a quarter more GPUs unallocated with node-order tie-breaking."""
        best, ties = None, 0
        for candidate in scored:
            if best is None or candidate[0] < best[0]:
                best, ties = candidate, 1
            elif candidate[0] == best[0]:
                ties += 1
                if self.rng.randrange(ties) == 0:
                    best = candidate
        _score, i, gpus = best
        return i, gpus if gpus is not None else _gpus_for(self.cluster, i, self._shape)

    def _random(self, nodes, shape):
        i = nodes[self.rng.randrange(len(nodes))]
        if shape.gpus and shape.gpu_milli < WHOLE:
            fitting = self.cluster.fitting_gpus(i, shape)
            return i, (fitting[self.rng.randrange(len(fitting))],)
        return i, _gpus_for(self.cluster, i, shape)

    def _first_fit(self, nodes, shape):
        i = nodes[0]
        if shape.gpus and shape.gpu_milli < WHOLE:
            return i, (self.cluster.fitting_gpus(i, shape)[0],)
        return i, _gpus_for(self.cluster, i, shape)

    def _best_fit(self, nodes, shape):
        c = self.cluster
        request = shape.gpu_request * WHOLE
        return self._pick((round(0.5 * (c.cpu[i] - shape.cpu_milli) / c.max_cpu
                                 + 0.5 * (sum(c.free[i]) - request) / (c.max_gpus * WHOLE), 9), i, None)
                          for i in nodes)

    def _dot_product(self, nodes, shape):
        c = self.cluster

        def scored():
            for i in nodes:
                cpu_term = (shape.cpu_milli / c.cpu_cap[i]) * (c.cpu[i] / c.cpu_cap[i])
                if shape.gpus and shape.gpu_milli < WHOLE:
                    for g in c.fitting_gpus(i, shape):
                        yield round(cpu_term + (shape.gpu_milli / WHOLE) * (c.free[i][g] / WHOLE), 9), i, (g,)
                else:
                    size = c.size[i] * WHOLE
                    yield round(cpu_term + (shape.gpu_request * WHOLE / size) * (sum(c.free[i]) / size), 9), i, None
        return self._pick(scored())

    def _gpu_packing(self, nodes, shape):
        c = self.cluster
        if not shape.gpus:
            return self._pick((0, i, ()) for i in nodes)

        def scored():
            for i in nodes:
                if shape.gpu_milli < WHOLE:
                    shared = [g for g in c.fitting_gpus(i, shape) if c.free[i][g] < WHOLE]
                    if shared:  # tier 0: a GPU that is already shared, the fullest
                        g = min(shared, key=lambda g: (c.free[i][g], g))
                        yield (0, c.free[i][g]), i, (g,)
                        continue
                idle = c.whole[i] == c.size[i]  # tier 1: a node in use, by the whole GPUs it would take
                yield ((2, c.size[i]) if idle else (1, shape.gpus if shape.gpu_milli >= WHOLE else 1)), i, None
        return self._pick(scored())

    def _clustering(self, nodes, shape):
        c = self.cluster
        if not shape.gpus:
            return self._pick((0, i, ()) for i in nodes)
        key = _affinity(shape)

        def scored():
            for i in nodes:
                held = c.affinity[i]
                # 0: only this shape here; 1: this shape among others; 2: no GPU task yet; 3: other shapes only
                tier = (0 if len(held) == 1 else 1) if held.get(key) else (2 if not held else 3)
                yield (tier, sum(c.free[i])), i, None
        return self._pick(scored())

    def _fgd(self, nodes, shape):
        c, workload = self.cluster, self.workload
        cpu, mem = shape.cpu_milli, shape.memory_mib
        seen: dict[tuple, tuple[float, tuple[int, ...]]] = {}

        def outcome(i):
            """The least growth of node ``i``'s fragmentation, and the GPUs that give it."""
            free = c.free[i]
            before = workload.node_fragmentation(free, c.cpu[i], c.mem[i], c.model[i])
            if shape.gpus and shape.gpu_milli < WHOLE:
                found, tried = None, set()
                for g in c.fitting_gpus(i, shape):
                    if free[g] in tried:
                        continue  # the same free share: the same outcome
                    tried.add(free[g])
                    after = list(free)
                    after[g] -= shape.gpu_milli
                    delta = workload.node_fragmentation(after, c.cpu[i] - cpu, c.mem[i] - mem, c.model[i]) - before
                    if found is None or round(delta, 9) < found[0]:
                        found = (round(delta, 9), (g,))
                return found
            gpus = c.whole_gpus(i, shape.gpus) if shape.gpus else ()
            after = list(free)
            for g in gpus:
                after[g] = 0
            delta = workload.node_fragmentation(after, c.cpu[i] - cpu, c.mem[i] - mem, c.model[i]) - before
            return round(delta, 9), gpus

        def scored():
            for i in nodes:
                state = (c.model[i], tuple(c.free[i]), c.cpu[i], c.mem[i])
                found = seen.get(state)
                if found is None:
                    found = seen[state] = outcome(i)
                yield found[0], i, found[1]
        return self._pick(scored())

    def _default(self, shape):
        self._next_id += 1
        job = WaitingJob(self._next_id, "trace", shape.models[0] if shape.gpus and shape.models else ANY_MODEL,
                         shape.gpus, nodes=1, gpu_milli=shape.gpu_milli if shape.gpus else WHOLE,
                         cpu_milli=shape.cpu_milli, memory_mib=shape.memory_mib,
                         accept_models=shape.models if shape.gpus else ())
        self._seen.append(shape)
        if len(self._seen) >= self._refresh_at:  # the engine's target workload: the site's history and the
            self.capacity.set_workload(Workload.from_tasks((*self._history, *self._seen)))  # shapes arrived so far
            self._refresh_at = max(len(self._seen) + 16, int(len(self._seen) * 1.25))
        placements = self.capacity.place_gang(job)
        if placements is None:
            return None
        placement = placements[0]
        self.capacity.take(placements, shape.cpu_milli, shape.memory_mib)
        return self.cluster.index[placement.node_id], tuple(placement.gpu_indices)


def _engine_view(cluster: Cluster) -> Capacity:
    """The engine's capacity view of the cluster as it is now, with the default policy's placement."""
    capacity = Capacity(cluster.nodes, placement=Policy().placement)
    for i, node in enumerate(cluster.nodes):
        used = tuple(Placement(node.id, (g,), WHOLE - f) for g, f in enumerate(cluster.free[i]) if f < WHOLE)
        cpu = node.cpu_milli - cluster.cpu[i] if node.cpu_milli else 0
        memory = node.memory_mib - cluster.mem[i] if node.memory_mib else 0
        capacity.take(used or (Placement(node.id, ()),), cpu, memory)
    return capacity


def _run_one(name: str, nodes: tuple[NodeSnapshot, ...], sequence: list[Task], workload: Workload, seed: int,
             curve_step: float, history: tuple[TaskShape, ...] = ()) -> dict:
    cluster = Cluster(nodes)
    placer = Placer(name, cluster, workload, seed, history)
    capacity = cluster.capacity_gpus
    started = time.perf_counter()
    curve: list[list[float]] = []
    next_point = curve_step
    arrived = 0.0
    failed = failed_gpus = 0
    at_full: dict | None = None
    for task in sequence:
        shape = task.shape
        placed = placer.place(shape)
        if placed is None:
            failed += 1
            failed_gpus += shape.gpu_request
        else:
            cluster.take(placed[0], placed[1], shape)
        arrived += shape.gpu_request
        ratio = arrived / capacity
        allocation = cluster.allocated_milli / WHOLE / capacity
        while ratio >= next_point - 1e-9:
            curve.append([round(ratio, 4), round(allocation, 4)])
            next_point += curve_step
        if at_full is None and ratio >= 1 - 1e-9:
            at_full = _snapshot(cluster, workload, ratio, failed)
    if at_full is None:  # the arrivals never reached the capacity (a short list in file order)
        at_full = _snapshot(cluster, workload, arrived / capacity, failed)
    final_ratio = arrived / capacity
    if not curve or curve[-1][0] != round(final_ratio, 4):
        curve.append([round(final_ratio, 4), round(cluster.allocated_milli / WHOLE / capacity, 4)])
    return {
        "policy": name, "nodes": len(nodes), "gpus": capacity, **at_full,
        "tasks_arrived": len(sequence), "tasks_failed": failed, "failed_gpu_requests": round(failed_gpus, 2),
        "arrived_ratio_final": round(final_ratio, 4),
        "allocation_ratio_final": round(cluster.allocated_milli / WHOLE / capacity, 4),
        "seconds": round(time.perf_counter() - started, 2), "curve": curve,
    }


def _snapshot(cluster: Cluster, workload: Workload, ratio: float, failed: int) -> dict:
    """The figures at (the first arrival at or beyond) 100 % of the capacity."""
    allocated = cluster.allocated_milli / WHOLE
    unallocated = cluster.capacity_gpus - allocated
    fragmented = min(unallocated, cluster.fragmentation(workload))
    return {"arrived_ratio": round(ratio, 4), "allocation_ratio": round(allocated / cluster.capacity_gpus, 4),
            "allocated_gpus": round(allocated, 2), "unallocated_gpus": round(unallocated, 2),
            "unallocated_gpus_fragmentation": round(fragmented, 2),
            "fragmentation_share": round(fragmented / unallocated, 4) if unallocated > 0 else 0.0,
            "tasks_failed_at_full": failed}


def run(nodes_csv: str, pods_csv: str, policies: tuple[str, ...] | list[str], seed: int = 42,
        inflation: float = 1.3, order: str = "sample", node_fraction: float = 1.0, limit: int = 0,
        curve_step: float = CURVE_STEP, history: float = HISTORY_SHARE) -> list[dict]:
    """Run the experiment for each of ``policies`` on one arrival sequence; one result dict per policy.

    ``history``: the share of the pod list, from its start in file order, that ``default`` is given as the
    site's history (the shapes of its earlier jobs), to which it adds the shapes arrived so far; 0: the
    arrivals alone. The arrivals are drawn as without it, so the history is a warm-up share that the site has
    seen shapes like, not a preview of the order; ``fgd`` is given the whole list's distribution."""
    for name in policies:
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}, all")
    if inflation <= 0:
        raise ValueError("--inflation must be above 0")
    if order not in ("sample", "file"):
        raise ValueError("--order must be sample or file")
    if not 0 <= history <= 1:
        raise ValueError("--history must be in [0, 1]")
    nodes = load_nodes(nodes_csv, node_fraction)
    tasks = load_tasks(pods_csv, limit)
    if not nodes or not tasks:
        raise ValueError("the node list and the pod list must each have at least one row (nodes with GPUs)")
    capacity = sum(len(n.gpu_indices) for n in nodes)
    sequence = arrivals(tasks, capacity, inflation, seed, order)
    workload = Workload.from_tasks(t.shape for t in tasks)
    past = tuple(t.shape for t in tasks[:int(history * len(tasks))])
    extra = {"seed": seed if order == "sample" else None, "inflation": inflation, "order": order,
             "pods": len(tasks), "history_tasks": len(past)}
    return [{**_run_one(name, nodes, sequence, workload, seed, curve_step, past), **extra} for name in policies]
