"""Free capacity of the cluster during a pass, and placement of jobs on it.

Per GPU the free share is kept in thousandths (1000 = whole and idle), per node the free CPU and memory.
Nodes of each GPU model are bucketed by how many whole GPUs they have free, so "the best-fitting node for
g GPUs" is a look into a few buckets rather than a scan of every node.

With a target workload (the "pack" policy in a pass: the shapes of the waiting and running jobs), a
single-node job goes where the node's fragmentation under that workload grows least (Fragmentation Gradient
Descent, scheduling/engine/fragmentation.py), ties to the fullest node: on the Alibaba trace's inflation
experiment that leaves fewer GPUs unallocated than FGD itself (docs/placement.md). Gangs keep their topology
search.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from contextlib import contextmanager

from scheduling.engine.fragmentation import Workload
from scheduling.engine.model import WHOLE, NodeSnapshot, Placement, WaitingJob

#: Topology domains tried for each constraint, tightest first ("cluster" is the loosest: gangs never span
#: clusters).
DOMAIN_LEVELS = {
    "same_node": ("node",),
    "same_rack": ("rack",),
    "same_network_domain": ("rack", "network_domain"),
    "any": ("rack", "network_domain", "cluster"),
}

#: Single-node placement under a workload scores at most this many distinct node states, best fit first: a
#: safety bound for very large fleets (nodes in the same state are scored once, so 1,000 nodes stay far below).
MAX_CANDIDATES = 100000

#: Weight of the alignment term added to the fragmentation growth of a single-node placement: the job's share
#: of the node's GPUs times the node's free GPU share (Tetris's dot product, GPU part). It leans FGD toward
#: nodes whose free GPUs the job fills most; on the inflation experiment (docs/placement.md) it cut the
#: unallocated GPUs on gpuspec33 from 730 to 686 (mean of seeds 42/43) and on the default pod list from 305 to
#: 270. Its CPU part was measured too and made both worse.
ALIGNMENT_WEIGHT = 0.5


class Capacity:
    def __init__(self, nodes: tuple[NodeSnapshot, ...], placement: str = "pack", workload: Workload | None = None):
        self.placement = placement
        self.workload = workload
        self._scores: dict[tuple, tuple[float, int]] = {}
        self._states: dict[int, tuple] = {}
        #: model -> node state -> order indices of the nodes in it, sorted; built at the first single-node
        #: placement under a workload, then kept up to date (most nodes share a few states)
        self._by_state: dict[str, dict[tuple, list[int]]] | None = None
        ordered = sorted(nodes, key=lambda n: (n.cluster, n.datacenter, n.rack, n.name, n.id))
        self.all_nodes = {n.id: n for n in ordered}
        self.order = {n.id: i for i, n in enumerate(ordered)}
        self.nodes = {n.id: n for n in ordered if n.schedulable and n.gpu_indices}
        self.free: dict[int, dict[int, int]] = {n: dict.fromkeys(node.gpu_indices, WHOLE)
                                                for n, node in self.nodes.items()}
        self.cpu = {n: node.cpu_milli for n, node in self.nodes.items()}
        self.mem = {n: node.memory_mib for n, node in self.nodes.items()}
        self.models: dict[str, list[int]] = defaultdict(list)
        for n, node in self.nodes.items():
            self.models[node.gpu_model].append(n)
        self.known_models = {n.gpu_model for n in ordered}
        # model -> whole-free count -> sorted order indices
        self.buckets: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        self.whole_count: dict[int, int] = {}
        self.whole_total: dict[str, int] = defaultdict(int)
        for n in self.nodes:
            count = len(self.free[n])
            self.whole_count[n] = count
            self.whole_total[self.nodes[n].gpu_model] += count
            bisect.insort(self.buckets[self.nodes[n].gpu_model][count], self.order[n])
        self.by_order = {i: n for n, i in self.order.items()}
        self.partial: dict[str, set[tuple[int, int]]] = defaultdict(set)  # model -> {(node, gpu)} shared GPUs
        #: node -> (the id of the waiting job it is kept for, seconds until its GPUs are surely free for it): a
        #: long-waiting job's node (passes.py); another job lands on it only if its max runtime ends before then.
        #: Changed through :meth:`keep`, :meth:`unkeep` and :meth:`ignoring_kept` only (they keep the memo below
        #: true).
        self.kept_for: dict[int, tuple[int, float]] = {}
        self._holders: set[int] = set()  # the ids of the jobs nodes are kept for
        #: Shapes that found no room (Slurm's and Kueue's trick): a pass tries 100,000 jobs of a few hundred
        #: shapes, and once a shape fits nowhere, it fits nowhere until capacity grows again — taking GPUs, CPU
        #: or memory only ever shrinks the places a shape fits. Each entry holds the ``_version`` it failed at;
        #: it holds while no capacity has been freed since (``_valid_since``).
        self._no_room: dict[tuple, int] = {}
        self._version = 0
        self._valid_since = 0
        #: counts every take and release: what was learned from the free capacity holds while it stays put
        self.changes = 0

    # -- bookkeeping --------------------------------------------------------------------------------
    def _recount(self, node_id: int) -> None:
        if self._by_state is not None:
            self._file(node_id, -1)
        self._states.pop(node_id, None)
        model = self.nodes[node_id].gpu_model
        before = self.whole_count[node_id]
        after = sum(1 for v in self.free[node_id].values() if v == WHOLE)
        if after != before:
            bucket = self.buckets[model][before]
            del bucket[bisect.bisect_left(bucket, self.order[node_id])]
            bisect.insort(self.buckets[model][after], self.order[node_id])
            self.whole_count[node_id] = after
            self.whole_total[model] += after - before
        for gpu, share in self.free[node_id].items():
            key = (node_id, gpu)
            if 0 < share < WHOLE:
                self.partial[model].add(key)
            else:
                self.partial[model].discard(key)
        if self._by_state is not None:
            self._file(node_id, +1)

    def _file(self, node_id: int, sign: int) -> None:
        """Add the node to (+1) or remove it from (-1) the nodes of its current state."""
        state = self._node_state(node_id)
        nodes = self._by_state[state[0]].setdefault(state, [])
        if sign > 0:
            bisect.insort(nodes, self.order[node_id])
            return
        del nodes[bisect.bisect_left(nodes, self.order[node_id])]
        if not nodes:
            del self._by_state[state[0]][state]

    def take(self, placements, cpu_milli: int = 0, memory_mib: int = 0) -> None:
        self._shift(placements, cpu_milli, memory_mib, -1)

    def take_many(self, holdings) -> None:
        """:meth:`take` for many (placements, CPU, memory) at once, e.g. a pass's 40,000 running jobs: what each
        node ends with is the same, and each node is recounted once rather than once per job."""
        self.changes += 1
        touched = set()
        for placements, cpu_milli, memory_mib in holdings:
            for p in placements:
                if p.node_id not in self.nodes:
                    continue
                free = self.free[p.node_id]
                for index in p.gpu_indices:
                    if index in free:
                        free[index] -= p.gpu_milli
                self.cpu[p.node_id] -= cpu_milli
                self.mem[p.node_id] -= memory_mib
                touched.add(p.node_id)
        for node_id in touched:
            self._recount(node_id)

    def release(self, placements, cpu_milli: int = 0, memory_mib: int = 0) -> None:
        self._shift(placements, cpu_milli, memory_mib, +1)
        self._grown()

    def _grown(self) -> None:
        """Capacity was freed: shapes that found no room may fit now."""
        self._version += 1
        self._valid_since = self._version

    def checkpoint(self) -> int:
        """A mark to hand :meth:`restored` once capacity is back exactly as it is now."""
        return self._valid_since

    def restored(self, mark: int) -> None:
        """Capacity is exactly as at ``mark`` again (a preemption search gave back every victim it freed): the
        shapes that found no room then still find none, and so do those that found none in between — they
        failed with at least as much free as now."""
        self._valid_since = mark

    def keep(self, node_id: int, job_id: int, seconds: float) -> None:
        """Keep ``node_id`` for waiting job ``job_id``; others land on it only if they end within ``seconds``."""
        self.kept_for[node_id] = (job_id, seconds)
        self._holders.add(job_id)

    def unkeep(self, job_id: int) -> None:
        """``job_id`` no longer holds its kept node back (it was admitted)."""
        if job_id in self._holders:
            self.kept_for = {n: kept for n, kept in self.kept_for.items() if kept[0] != job_id}
            self._holders.discard(job_id)
            self._grown()

    @contextmanager
    def ignoring_kept(self):
        """Place as if no node were kept; a shape that finds no room even so finds none with the nodes kept."""
        kept_for, mark = self.kept_for, self._valid_since
        self.kept_for = {}
        self._grown()
        try:
            yield
        finally:
            self.kept_for = kept_for
            self._valid_since = mark

    def _shift(self, placements, cpu_milli: int, memory_mib: int, sign: int) -> None:
        self.changes += 1
        for p in placements:
            if p.node_id not in self.nodes:
                continue  # a node of another cluster, or one that may take no work
            free = self.free[p.node_id]
            for index in p.gpu_indices:
                if index in free:
                    free[index] += sign * p.gpu_milli
            self.cpu[p.node_id] += sign * cpu_milli
            self.mem[p.node_id] += sign * memory_mib
            self._recount(p.node_id)

    def set_workload(self, workload: Workload | None) -> None:
        """Rank single-node placements by the growth of the node's fragmentation under ``workload`` (the
        shapes of the jobs the scheduler expects: its queue and its recent jobs); None: best fit only."""
        self.workload = workload
        self._scores = {}
        self._no_room = {}

    # -- queries --------------------------------------------------------------------------------------
    def whole_free(self, model: str) -> int:
        return self.whole_total.get(model, 0)

    def best_whole_on_node(self, model: str) -> int:
        return max((c for c, orders in self.buckets[model].items() if orders), default=0)

    def _fits_host(self, node_id: int, job: WaitingJob) -> bool:
        if node_id in job.avoid_nodes:
            return False
        kept = self.kept_for.get(node_id)
        if kept is not None and kept[0] != job.id and job.max_runtime > kept[1]:
            return False
        node = self.nodes[node_id]
        return ((not node.cpu_milli or self.cpu[node_id] >= job.cpu_milli)
                and (not node.memory_mib or self.mem[node_id] >= job.memory_mib))

    def _whole_indices(self, node_id: int, count: int) -> tuple[int, ...]:
        return tuple(sorted(i for i, v in self.free[node_id].items() if v == WHOLE)[:count])

    def _fitting_nodes(self, model: str, g: int, job: WaitingJob):
        """Order indices of nodes of ``model`` with at least ``g`` whole free GPUs, best fit first for
        packing (fewest free), node order for first fit."""
        buckets = self.buckets[model]
        if self.placement == "first_fit":
            orders = sorted(o for count, group in buckets.items() if count >= g for o in group)
            return (o for o in orders if self._fits_host(self.by_order[o], job))
        return (o for count in sorted(c for c in buckets if c >= g) for o in buckets[count]
                if self._fits_host(self.by_order[o], job))

    def place_gang(self, job: WaitingJob, models=None) -> tuple[Placement, ...] | None:
        """Where ``job`` would go now (without taking it), or None; only on ``models`` when given (those of its
        acceptable models its quota admits)."""
        models = job.models(self.models) if models is None else models
        if job.id in self._holders:  # it may use its own kept node, which its shape may not: not memoised
            return self._place(job, models)
        shape = (tuple(models), job.gpus_per_node, job.nodes, job.gpu_milli, job.cpu_milli, job.memory_mib,
                 job.topology, job.avoid_nodes, job.max_runtime)
        failed = self._no_room.get(shape)
        if failed is not None and failed >= self._valid_since:
            return None
        placements = self._place(job, models)
        if placements is None:
            self._no_room[shape] = self._version
        return placements

    def may_fit(self, job: WaitingJob, models) -> bool:
        """False when ``job`` surely fits nowhere now: too few nodes of ``models`` have its GPUs whole and free.
        A cheap test before a search for a placement (True says nothing)."""
        if job.fractional:
            return True
        g = job.gpus_per_node
        return sum(len(group) for m in models for count, group in self.buckets[m].items() if count >= g) >= job.nodes

    def node_fits(self, node_id: int, job: WaitingJob, models) -> bool:
        """Whether one node of ``models`` could hold ``job``'s part on it now (GPUs, CPU, memory, kept nodes).
        Where freeing one node's capacity turned "no room" into room, the room includes that node."""
        node = self.nodes.get(node_id)
        if node is None or node.gpu_model not in models:
            return False
        if job.fractional:
            if not any(v >= job.gpu_milli for v in self.free[node_id].values()):
                return False
        elif self.whole_count[node_id] < job.gpus_per_node:
            return False
        return self._fits_host(node_id, job)

    def _place(self, job: WaitingJob, models) -> tuple[Placement, ...] | None:
        if self.workload is not None and self.placement == "pack" and job.nodes == 1:
            return self._place_by_fragmentation(job, models)
        if job.fractional:
            return self._place_share(job, models)
        best = None
        for model in models:
            found = self._place_whole(job, model)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return best[1] if best else None

    def _node_state(self, node_id: int) -> tuple:
        """What a node's fragmentation depends on: its model, its GPUs' free shares (sorted), free CPU and
        memory (``inf`` where not accounted). Nodes in the same state score alike, so scores are cached by it."""
        state = self._states.get(node_id)
        if state is None:
            node = self.nodes[node_id]
            state = self._states[node_id] = (
                node.gpu_model, tuple(sorted(self.free[node_id].values())),
                self.cpu[node_id] if node.cpu_milli else math.inf,
                self.mem[node_id] if node.memory_mib else math.inf)
        return state

    def _growth(self, state: tuple, g: int, milli: int, job: WaitingJob) -> tuple[float, int]:
        """How much the node's fragmentation grows if ``job`` lands on it, and for a share the free share of
        the GPU it should take (the one with the least growth; -1 for whole GPUs)."""
        model, free, cpu, mem = state
        frag = self.workload.node_fragmentation
        before = frag(free, cpu, mem, model)
        cpu_after, mem_after = cpu - job.cpu_milli, mem - job.memory_mib
        if milli < WHOLE:
            best = None
            for position, f in enumerate(free):
                if f < milli or (position and free[position - 1] == f):
                    continue
                after = free[:position] + (f - milli,) + free[position + 1:]
                delta = round(frag(after, cpu_after, mem_after, model) - before + self._alignment(free, 1, milli), 9)
                if best is None or delta < best[0]:
                    best = (delta, f)
            return best
        after = (0,) * g + free[:len(free) - g] if g else free
        return round(frag(after, cpu_after, mem_after, model) - before + self._alignment(free, g, milli), 9), -1

    @staticmethod
    def _alignment(free: tuple[int, ...], g: int, milli: int) -> float:
        """The weighted dot product of the job's GPU demand and the node's free GPUs, both as shares of the
        node's GPUs: small where the job fills what little the node has left, so ties in fragmentation go to
        the node the job fits most tightly."""
        size = len(free) * WHOLE
        return ALIGNMENT_WEIGHT * (g * milli / size) * (sum(free) / size)

    def _single_candidates(self, job: WaitingJob, models):
        """Nodes a share fits on, in best-fit order: the nodes with a shared GPU it fits on (fullest first), then
        those with a whole free GPU."""
        shared = sorted((self.free[n][gpu], self.order[n], n) for model in models
                        for n, gpu in self.partial[model]
                        if self.free[n][gpu] >= job.gpu_milli and self._fits_host(n, job))
        seen = set()
        for _free, _order, n in shared:
            if n not in seen:
                seen.add(n)
                yield n
        for model in models:
            for o in self._fitting_nodes(model, 1, job):
                n = self.by_order[o]
                if n not in seen:
                    yield n

    def _whole_candidates(self, job: WaitingJob, models) -> list[int]:
        """For whole GPUs on one node: the first node of each state that could hold the job, in best-fit order
        (model, fewest whole free GPUs, node order) — the node a walk of every fitting node would meet first in
        that state. A state scores alike on all its nodes, and 10,000 nodes fall in a few dozen states."""
        if self._by_state is None:
            self._by_state = defaultdict(dict)
            for node_id in self.nodes:
                self._file(node_id, +1)
        g = job.gpus_per_node
        found: dict[tuple, tuple[int, int, int]] = {}
        for rank, model in enumerate(models):
            for state, orders in self._by_state.get(model, {}).items():
                whole = state[1].count(WHOLE)
                if whole < g or state in found:
                    continue
                first = next((o for o in orders if self._fits_host(self.by_order[o], job)), None)
                if first is not None:
                    found[state] = (rank, whole, first)
        return [self.by_order[o] for _rank, _whole, o in sorted(found.values())]

    def _place_by_fragmentation(self, job: WaitingJob, models) -> tuple[Placement, ...] | None:
        """Fragmentation gradient descent (Weng et al., ATC '23) with best-fit ties: the node (and for a share
        the GPU) where the fragmentation under the target workload grows least."""
        g = 1 if job.fractional else job.gpus_per_node
        shape = (g, job.gpu_milli, job.cpu_milli, job.memory_mib)
        best = None
        scored: set[tuple] = set()
        candidates = self._single_candidates(job, models) if job.fractional else self._whole_candidates(job, models)
        for node_id in candidates:
            state = self._node_state(node_id)
            if state in scored:
                continue  # an earlier node in the same state scores the same and comes first
            scored.add(state)
            key = (shape, state)
            found = self._scores.get(key)
            if found is None:
                found = self._scores[key] = self._growth(state, g, job.gpu_milli, job)
            # equal growths: the fullest node (free GPU share, then CPU), then a scatter that is fixed per
            # job and node — ties taken in node order pile onto the first nodes and strand capacity (measured
            # on the inflation experiment: 470 unallocated GPUs against 308)
            tie = (sum(state[1]), state[2], hash((job.id, node_id)) & 0xFFFF)
            if best is None or (found[0], tie) < (best[0], best[3]):
                best = (found[0], found[1], node_id, tie)
            if len(scored) >= MAX_CANDIDATES:
                break
        if best is None:
            return None
        _delta, share_free, node_id, _tie = best
        if job.fractional:
            gpu = min(i for i, v in self.free[node_id].items() if v == share_free)
            return (Placement(node_id, (gpu,), job.gpu_milli),)
        return (Placement(node_id, self._whole_indices(node_id, g)),)

    def _place_share(self, job: WaitingJob, models) -> tuple[Placement, ...] | None:
        candidates = []
        for model in models:
            for node_id, gpu in self.partial[model]:
                if self.free[node_id][gpu] >= job.gpu_milli and self._fits_host(node_id, job):
                    candidates.append((self.free[node_id][gpu], self.order[node_id], gpu, node_id))
        if candidates:  # pack onto the fullest shared GPU that still fits
            key = (lambda c: (c[1], c[2])) if self.placement == "first_fit" else (lambda c: (c[0], c[1], c[2]))
            _free, _order, gpu, node_id = min(candidates, key=key)
            return (Placement(node_id, (gpu,), job.gpu_milli),)
        best = None
        for model in models:
            order = next(iter(self._fitting_nodes(model, 1, job)), None)
            if order is not None and (best is None or order < best):
                best = order
        if best is None:
            return None
        node_id = self.by_order[best]
        return (Placement(node_id, self._whole_indices(node_id, 1), job.gpu_milli),)

    def _place_whole(self, job: WaitingJob, model: str):
        g, count = job.gpus_per_node, job.nodes
        if count == 1:
            order = next(iter(self._fitting_nodes(model, g, job)), None)
            if order is None:
                return None
            node_id = self.by_order[order]
            return (self.whole_count[node_id], (Placement(node_id, self._whole_indices(node_id, g)),))
        if job.topology == "same_node":
            return None
        fitting = [self.by_order[o] for o in self._fitting_nodes(model, g, job)]
        if len(fitting) < count:
            return None
        for level in DOMAIN_LEVELS.get(job.topology, DOMAIN_LEVELS["any"]):
            groups: dict[tuple, list[int]] = defaultdict(list)
            for node_id in fitting:
                node = self.nodes[node_id]
                key = (node.cluster,) if level == "cluster" else (node.cluster, getattr(node, level))
                groups[key].append(node_id)
            usable = [(key, members) for key, members in groups.items() if len(members) >= count]
            if not usable:
                continue
            if self.placement == "first_fit":
                key, members = min(usable, key=lambda item: min(self.order[n] for n in item[1]))
                chosen = sorted(members, key=lambda n: self.order[n])[:count]
            else:  # the domain with the least free capacity that fits, and its fullest nodes
                key, members = min(usable, key=lambda item: (sum(self.whole_count[n] for n in item[1]), item[0]))
                chosen = sorted(members, key=lambda n: (self.whole_count[n], self.order[n]))[:count]
            rank = sum(self.whole_count[n] for n in chosen)
            return (rank, tuple(Placement(n, self._whole_indices(n, g)) for n in sorted(chosen, key=self.order.get)))
        return None

    def largest_block(self, model: str, g: int, level: str) -> tuple[int, str]:
        """The most GPUs a gang of ``g``-GPU nodes can get now within one ``level`` domain, and where."""
        groups: dict[str, int] = defaultdict(int)
        for order in (o for count, group in self.buckets[model].items() if count >= g for o in group):
            node = self.nodes[self.by_order[order]]
            key = node.name if level == "node" else (node.cluster if level == "cluster" else getattr(node, level))
            groups[key] += 1
        if not groups:
            return 0, "-"
        where, nodes = max(groups.items(), key=lambda item: (item[1], item[0]))
        return nodes * g, where

    def fragmentation(self) -> float:
        """Share of free GPU capacity that is not on a completely idle node: capacity a whole-node job cannot
        use. 0 = all free capacity sits on idle nodes."""
        free_total = idle_nodes = 0
        for gpus in self.free.values():
            node_free = sum(gpus.values())
            free_total += node_free
            if node_free == WHOLE * len(gpus):
                idle_nodes += node_free
        return 0.0 if free_total == 0 else 1 - idle_nodes / free_total
