"""One scheduling pass: order the queue, check quotas and reservations, place gangs, backfill, preempt,
and explain every job that still waits — with its queue positions and an estimated start.

1. Order: priority class first; inside a class, fair share (tenant weight against usage decayed with a
   half-life, plus the GPUs the tenant already has queued ahead), then submit time. The classes' queues are
   merged by aging: each class's next job counts with its priority plus ``aging_points_per_hour`` per hour
   it has waited, so no class starves behind a steady stream of a higher one. ``fifo`` policies use arrival
   order only.
2. For each job in that order: approval and holds; "can this ever fit"; healthy nodes; quota (limit,
   borrowing beyond the guarantee, department cap); capacity reserved for other tenants; placement.
3. Placement packs: the tightest topology domain that fits, the fullest nodes in it, shared GPUs filled
   before whole ones are split (see ``capacity.py``).
4. No overtaking, except EASY backfill: once the first job of a GPU model waits for resources (the head),
   a later job may start only if it ends (max runtime) before the head's shadow time, or uses GPUs the
   head will not need then. A single-node job that has waited ``keep_node_after_hours`` (the longest-waiting
   of its class and model) has a node kept for it before anyone is placed: the shadow counts GPUs, the kept
   node makes them free on one node. A job that has waited longer than the one it is kept for is not held back.
5. Preemption: a job of a non-preemptible class may stop lower-priority preemptible jobs; a tenant within
   its guarantee may stop other tenants' jobs of no higher priority that run on borrowed GPUs. Victims: lowest
   priority first, borrowers before jobs within their guarantee, newest first, then the set is made minimal. A job whose
   submitter asked to spare their own work (``spare_owner``) never stops a job of the same owner. A preemptor
   is not admitted in the pass that stops its victims: it waits ("preemption pending") on the GPUs held for
   it, and the next pass, once they are free, admits it.
6. Estimates for everyone still waiting (``estimate.py``).

Work the portal did not submit (``Snapshot.outside``: jobs submitted to the cluster's scheduler directly) holds
its GPUs like running work that may not be touched: it is in no quota, no fair share and no victim set, and
frees its GPUs at its time limit (never, when it has none). A job that waits for GPUs it holds is told so.
"""

from __future__ import annotations

import gc
import heapq
import math
import time as _time
from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter

from scheduling.engine.capacity import Capacity
from scheduling.engine.dependencies import CONDITION_WORDS, MET, NEVER, STATUS_WORDS
from scheduling.engine.estimate import Slots, expected_end, give_slots, quota_heaps, shadow, slot_heaps, take_slots
from scheduling.engine.fragmentation import target_workload
from scheduling.engine.model import (
    ANY_MODEL,
    WHOLE,
    Admission,
    Dependency,
    PassResult,
    Placement,
    Preemption,
    RunningJob,
    Snapshot,
    TenantShare,
    WaitDecision,
    WaitingJob,
)
from scheduling.engine.reasons import WaitReason, render_reason

EPS = 1e-9
#: Reasons for which no start can be estimated (the job is not waiting for capacity).
NO_ESTIMATE = {WaitReason.AWAITING_APPROVAL, WaitReason.HELD, WaitReason.NEVER_FITS, WaitReason.NO_HEALTHY_NODE,
               WaitReason.NO_QUOTA, WaitReason.ARRAY_LIMIT, WaitReason.AVOIDS_ALL_NODES, WaitReason.DEPENDENCY_NEVER}
#: Reasons that blame a lack of free GPUs: where work outside the portal holds GPUs of nodes that could hold the
#: job, the sentence adds how many and where (``reasons.OUTSIDE_CLAUSES``), so nobody hunts for a portal job that
#: is not there.
OUTSIDE_TOLD = {WaitReason.INSUFFICIENT_GPUS, WaitReason.FRAGMENTED, WaitReason.GANG_UNPLACEABLE,
                WaitReason.TOPOLOGY}


@dataclass
class _Head:
    job: WaitingJob
    start: float
    extra: int


def decayed_usage(snapshot: Snapshot) -> dict[str, float]:
    """GPU-hours per tenant, each record weighted by 0.5 ** (age / half-life); running jobs count in full."""
    half_life = snapshot.policy.half_life_seconds
    usage: dict[str, float] = defaultdict(float)
    for record in snapshot.usage:
        age = max(0.0, snapshot.now - record.at)
        usage[record.tenant] += record.gpu_seconds / 3600 * 0.5 ** (age / half_life)
    for job in snapshot.running:
        usage[job.tenant] += job.gpus * max(0.0, snapshot.now - job.started_at) / 3600
    return usage


def order_jobs(snapshot: Snapshot, usage: dict[str, float]) -> list[WaitingJob]:
    policy = snapshot.policy
    if policy.ordering == "fifo":
        return sorted(snapshot.waiting, key=lambda j: (j.submitted_at, j.id))
    weights = {t.name: t.weight for t in snapshot.tenants}
    ahead: dict[tuple[int, str], float] = defaultdict(float)
    hours = policy.queued_gpu_hours
    keyed = []
    for job in sorted(snapshot.waiting, key=lambda j: (-j.priority, j.submitted_at, j.id)):
        tenant, priority = job.tenant, job.priority
        weight = weights.get(tenant, 1.0) or 1.0
        queued = ahead[(priority, tenant)]
        ahead[(priority, tenant)] = queued + job.gpus * hours
        keyed.append(((-priority, (usage.get(tenant, 0.0) + queued) / weight, job.submitted_at, job.id), job))
    keyed.sort(key=itemgetter(0))
    ordered = [job for _key, job in keyed]
    if policy.aging_points_per_hour <= 0:
        return ordered
    return _merge_aged(ordered, snapshot.now, policy.aging_points_per_hour)


def aged_priority(job: WaitingJob, now: float, points_per_hour: float) -> float:
    """The priority a job counts with when the classes' queues are merged: its class's, plus the aging of the
    time it has waited. A held job or one awaiting approval does not age: it does not wait for capacity."""
    if job.held or job.awaiting_approval:
        return float(job.priority)
    return job.priority + points_per_hour * max(0.0, now - job.submitted_at) / 3600


def _merge_aged(ordered: list[WaitingJob], now: float, points_per_hour: float) -> list[WaitingJob]:
    """Merge the priority classes' queues (each kept in its fair-share order) by the aged priority of each
    class's next job: a class whose next job has waited long enough goes ahead of a higher class's newer jobs.
    Why the next job and not every job on its own: inside a class fair share, not age, keeps deciding."""
    classes: dict[int, list[WaitingJob]] = defaultdict(list)
    for job in ordered:
        classes[job.priority].append(job)
    queues = {priority: iter(jobs) for priority, jobs in classes.items()}
    heap: list[tuple[float, int, float, int, WaitingJob]] = []

    def push(priority: int) -> None:
        job = next(queues[priority], None)
        if job is not None:
            heapq.heappush(heap, (-aged_priority(job, now, points_per_hour), -priority, job.submitted_at, job.id, job))

    for priority in classes:
        push(priority)
    merged = []
    while heap:
        job = heapq.heappop(heap)[-1]
        merged.append(job)
        push(job.priority)
    return merged


def tenant_shares(snapshot: Snapshot, usage: dict[str, float]) -> list[TenantShare]:
    weights = {t.name: t.weight for t in snapshot.tenants}
    names = set(weights) | {q.tenant for q in snapshot.quotas} | {j.tenant for j in snapshot.running}
    running: dict[str, float] = defaultdict(float)
    for job in snapshot.running:
        running[job.tenant] += job.gpus
    total_weight = sum(weights.get(n, 1.0) for n in names) or 1.0
    total_usage = sum(usage.get(n, 0.0) for n in names) or 1.0
    return [TenantShare(n, weights.get(n, 1.0), weights.get(n, 1.0) / total_weight, round(usage.get(n, 0.0), 3),
                        usage.get(n, 0.0) / total_usage, running[n]) for n in sorted(names)]


def reserved_for_others(reservations, usage, tenant: str, model: str, start: float, end: float
                        ) -> tuple[int, str, float]:
    """GPUs of ``model`` that other tenants' reservations hold from ``start`` to ``end``: (GPUs, the holder
    whose reservation ends last, when it ends).

    A reservation already in force holds only what its tenant does not use yet (``usage``: (tenant, model)
    -> GPUs held); one that starts later holds all of its GPUs. The pass and the "what can I run now" page
    both count this way."""
    held, holder, until = 0, "", 0.0
    for r in reservations:
        if r.gpu_model != model or r.tenant == tenant or not (r.start < end and r.end > start):
            continue
        in_use = usage.get((r.tenant, model), 0.0) if r.start <= start else 0.0
        amount = max(0, r.gpus - int(in_use))
        if amount:
            held += amount
            if not holder or r.end > until:
                holder, until = r.tenant, r.end
    return held, holder, until


def _fmt_time(ts: float) -> str:
    return _time.strftime("%Y-%m-%d %H:%M UTC", _time.gmtime(ts))


class _Pass:
    def __init__(self, snapshot: Snapshot):
        self.snap = snapshot
        self.policy = snapshot.policy
        self.now = snapshot.now
        workload = None
        if self.policy.placement == "pack":
            workload = target_workload(snapshot.waiting, snapshot.running, snapshot.history)
        self.cap = Capacity(snapshot.nodes, self.policy.placement, workload)
        self.running: dict[int, RunningJob] = {}
        self.usage: dict[tuple[str, str], float] = defaultdict(float)
        self.quotas = {(q.tenant, q.gpu_model): q for q in snapshot.quotas}
        self.departments = {(d.name, d.gpu_model): d for d in snapshot.departments}
        self.department_of = {q.tenant: q.department for q in snapshot.quotas if q.department}
        self.dept_usage: dict[tuple[str, str], float] = defaultdict(float)
        self.group_running: dict[str, int] = defaultdict(int)
        for job in snapshot.running:
            if job.group:
                self.group_running[job.group] += 1
            self.running[job.id] = job
            self._charge(job.tenant, job.gpu_model, job.quota_gpus)
        self.cap.take_many((job.placements, job.cpu_milli, job.memory_mib) for job in snapshot.running)
        # Work outside the portal takes its GPUs and nothing else: no quota, no fair share, never a victim.
        self.outside_held: dict[int, set[int]] = defaultdict(set)
        self.outside_scheduler: dict[int, str] = {}
        for hold in snapshot.outside:
            self.cap.take((Placement(hold.node_id, hold.gpu_indices),))
            if hold.node_id in self.cap.nodes:
                self.outside_held[hold.node_id].update(i for i in hold.gpu_indices
                                                       if i in self.cap.free[hold.node_id])
                if hold.scheduler:
                    self.outside_scheduler.setdefault(hold.node_id, hold.scheduler)
        # for "can it ever fit": per model, the GPUs of every node (healthy or not)
        self.node_sizes: dict[str, list[int]] = defaultdict(list)
        self.node_ids: dict[str, list[int]] = defaultdict(list)  # the same nodes' ids, in the same order
        for node in snapshot.nodes:
            self.node_sizes[node.gpu_model].append(node.total_gpus)
            self.node_ids[node.gpu_model].append(node.id)
        self.result = PassResult()
        self.waits: list[tuple[WaitingJob, WaitReason, dict]] = []
        self.heads: dict[str, _Head] = {}
        self.kept: dict[int, WaitingJob] = {}  # long-waiting jobs with a node kept for them, by id
        self.behind_keeper: dict[int, int] = {}  # a job that fits only on a kept node: the id of the job it is kept for
        self.admitted: list[RunningJob] = []
        self.held_for_preemptors: dict[tuple[int, int], float] = {}
        self.searches = 0
        self._counts: dict[tuple[str, str, int], int] = {}
        self._unrunnable_memo: dict[tuple, tuple[WaitReason, dict] | None] = {}
        #: the last diagnoses per shape, with the capacity change they were made at (``Capacity.changes``)
        self._diagnoses: dict[tuple, tuple[int, WaitReason, dict]] = {}
        self._pool: dict[str, list[RunningJob]] | None = None
        self._by_node: dict[int, list[RunningJob]] | None = None
        self._victim_nodes_memo: dict[tuple[str, int], list] = {}
        self._dependency_ends: dict[tuple, float | None] = {}

    def _charge(self, tenant: str, model: str, gpus: float) -> None:
        self.usage[(tenant, model)] += gpus
        if tenant in self.department_of:
            self.dept_usage[(self.department_of[tenant], model)] += gpus

    # -- checks ---------------------------------------------------------------------------------------
    def _count_nodes(self, kind: str, model: str, need: int) -> int:
        """Nodes of ``model`` with at least ``need`` GPUs: all of them ("all") or schedulable ("healthy")."""
        key = (kind, model, need)
        if key not in self._counts:
            if kind == "all":
                self._counts[key] = sum(1 for size in self.node_sizes[model] if size >= need)
            else:
                self._counts[key] = sum(1 for n in self.cap.models.get(model, ())
                                        if len(self.cap.nodes[n].gpu_indices) >= need)
        return self._counts[key]

    def _unrunnable(self, job: WaitingJob, models) -> tuple[WaitReason, dict] | None:
        """NEVER_FITS, AVOIDS_ALL_NODES or NO_HEALTHY_NODE with their numbers, or None. The nodes there are,
        not what is free on them, decide: the verdict is kept per shape for the whole pass."""
        key = (models, 1 if job.fractional else job.gpus_per_node, job.nodes, job.avoid_nodes)
        if key not in self._unrunnable_memo:
            self._unrunnable_memo[key] = self._judge_unrunnable(job, models)
        return self._unrunnable_memo[key]

    def _judge_unrunnable(self, job: WaitingJob, models) -> tuple[WaitReason, dict] | None:
        never = self._never_fits(job, models) if models else {"max_per_node": 0, "max_nodes": 0}
        if never:
            return WaitReason.NEVER_FITS, never
        avoids = self._avoids_all(job, models)
        if avoids:
            return WaitReason.AVOIDS_ALL_NODES, avoids | {"gpu_model": "/".join(models)}
        unhealthy = self._no_healthy_node(job, models)
        if unhealthy:
            return WaitReason.NO_HEALTHY_NODE, unhealthy
        return None

    def _never_fits(self, job: WaitingJob, models) -> dict | None:
        need = 1 if job.fractional else job.gpus_per_node
        for model in models:
            if self._count_nodes("all", model, need) >= job.nodes:
                return None
        sizes = [s for m in models for s in self.node_sizes[m]] or [0]
        biggest = max(sizes)
        return {"max_per_node": biggest, "max_nodes": sum(1 for s in sizes if s >= min(need, biggest))}

    def _avoided_names(self, job: WaitingJob, models) -> str:
        names = sorted(self.cap.all_nodes[n].name for m in models for n in self.node_ids[m] if n in job.avoid_nodes)
        return ", ".join(names)

    def _avoids_all(self, job: WaitingJob, models) -> dict | None:
        """Why a job that avoids nodes after faults can never run here: the nodes it does not avoid (healthy or
        not) are too few or too small for it. None when some could hold it, or when it avoids nothing."""
        if not job.avoid_nodes:
            return None
        need = 1 if job.fractional else job.gpus_per_node
        for model in models:
            others = sum(1 for n, size in zip(self.node_ids[model], self.node_sizes[model], strict=True)
                         if size >= need and n not in job.avoid_nodes)
            if others >= job.nodes:
                return None
        return {"avoided": self._avoided_names(job, models)}

    def _no_healthy_node(self, job: WaitingJob, models) -> dict | None:
        need = 1 if job.fractional else job.gpus_per_node

        def healthy(model: str) -> int:
            count = self._count_nodes("healthy", model, need)
            if job.avoid_nodes:  # nodes it avoids are no use to it, healthy or not
                count -= sum(1 for n in self.cap.models.get(model, ())
                             if n in job.avoid_nodes and len(self.cap.nodes[n].gpu_indices) >= need)
            return count

        if any(healthy(m) >= job.nodes for m in models):
            return None
        total = sum(self._count_nodes("all", m, need) for m in models)
        return {"unavailable": total - sum(healthy(m) for m in models)}

    def _quota(self, job: WaitingJob, base: dict, model: str = ""):
        """Why the tenant's quota (or its department's cap) of ``model`` (default: the job's) keeps the job
        waiting, or None."""
        model = model or job.gpu_model
        if not self.policy.enforce_quotas or model == ANY_MODEL:
            return None
        base = base | {"gpu_model": model}
        quota = self.quotas.get((job.tenant, model))
        if quota is None or quota.limit <= 0:
            return WaitReason.NO_QUOTA, base
        used = self.usage[(job.tenant, model)]
        if used + job.quota_gpus > quota.limit + EPS:
            numbers = base | {"used": round(used, 3), "limit": quota.limit, "guaranteed": quota.guaranteed,
                              "over": round(used + job.quota_gpus - quota.limit, 3),
                              "borrowed": round(max(0.0, used - quota.guaranteed), 3)}
            if quota.limit > quota.guaranteed:
                return WaitReason.BORROWING_LIMIT, numbers
            return WaitReason.QUOTA_EXHAUSTED, numbers
        department = self.department_of.get(job.tenant)
        cap = self.departments.get((department, model)) if department else None
        if cap is not None:
            used = self.dept_usage[(department, model)]
            if used + job.quota_gpus > cap.limit + EPS:
                return WaitReason.DEPARTMENT_QUOTA, base | {"department": department, "used": round(used, 3),
                                                            "limit": cap.limit}
        return None

    def _reserved(self, job: WaitingJob, model: str) -> dict | None:
        """Capacity other tenants' reservations hold during this job's run."""
        held, holder, until = reserved_for_others(self.snap.reservations, self.usage, job.tenant, model, self.now,
                                                  self.now + job.runtime_estimate)
        free = self.cap.whole_free(model)
        if held and free - held < job.slots:
            return {"reserved": held, "total_free": free, "holder": holder, "until": _fmt_time(until),
                    "until_ts": until}
        return None

    def _diagnose(self, job: WaitingJob, models, base: dict):
        """Why a job that found no room waits, with the numbers. Only the free capacity and the job's shape go
        into it: jobs of one shape between two changes of capacity share one diagnosis."""
        key = (models, job.gpus_per_node, job.nodes, job.gpu_milli, job.topology, job.avoid_nodes)
        known = self._diagnoses.get(key)
        if known is None or known[0] != self.cap.changes:
            known = self._diagnoses[key] = (self.cap.changes, *self._diagnose_shape(job, models))
        return known[1], base | known[2]

    def _avoided(self, job: WaitingJob, models):
        """AVOIDED_NODES when the job would fit now but only on nodes it avoids after faults (so that no other
        sentence blames CPU, memory or a lack of GPUs for what is the job's own avoidance); else None."""
        if not job.avoid_nodes:
            return None
        need = 1 if job.fractional else job.gpus_per_node
        fitting, fitting_others, best_other, other_free = 0, 0, 0, 0
        for model in models:
            for n in self.cap.models.get(model, ()):
                whole = self.cap.whole_count[n]
                if whole >= need:
                    fitting += 1
                if n not in job.avoid_nodes:
                    fitting_others += whole >= need
                    best_other, other_free = max(best_other, whole), other_free + whole
        if fitting < job.nodes or fitting_others >= job.nodes:
            return None
        return WaitReason.AVOIDED_NODES, {
            "avoided": self._avoided_names(job, models), "best_other": best_other, "other_free": other_free,
            "gpu_model": "/".join(models)}

    def _diagnose_shape(self, job: WaitingJob, models) -> tuple[WaitReason, dict]:
        avoided = self._avoided(job, models)
        if avoided:
            return avoided
        model = models[0]
        free = sum(self.cap.whole_free(m) for m in models)
        best = max(self.cap.best_whole_on_node(m) for m in models)
        stats = {"total_free": free, "best_free": best, "gpu_model": model if len(models) == 1 else "/".join(
            models)}
        need = 1 if job.fractional else job.gpus_per_node
        if job.fractional or job.nodes == 1:
            if best >= need and free >= job.slots:
                return WaitReason.HOST_RESOURCES, stats
            if not job.fractional and free >= need:  # enough in total, none of it in one place
                return WaitReason.FRAGMENTED, stats | {"nodes_with_free": sum(
                    1 for m in models for n in self.cap.models.get(m, ()) if self.cap.whole_count[n] > 0)}
            return WaitReason.INSUFFICIENT_GPUS, stats
        if job.topology in ("same_rack", "same_network_domain"):
            level = "rack" if job.topology == "same_rack" else "network_domain"
            block, where = self.cap.largest_block(model, need, level)
            return WaitReason.TOPOLOGY, stats | {"domain": "rack" if level == "rack" else "network domain",
                                                 "best_block": block, "best_where": where}
        fitting = sum(1 for m in models for count, group in self.cap.buckets[m].items() if count >= need
                      for _o in group)
        return WaitReason.GANG_UNPLACEABLE, stats | {"fitting_nodes": fitting}

    def _outside(self, job: WaitingJob, models) -> dict:
        """Where work outside the portal holds GPUs of nodes that could hold ``job`` (healthy, schedulable, big
        enough, not avoided): the node where it holds the most, with its counts, and the totals when there are
        more such nodes; empty when it holds none there. Numbers and node, model and scheduler names only: whose
        work it is, is not the waiting job's owner's to read."""
        need = 1 if job.fractional else job.gpus_per_node
        held = {n: len(self.outside_held[n]) for m in models for n in self.cap.models.get(m, ())
                if self.outside_held.get(n) and n not in job.avoid_nodes
                and len(self.cap.nodes[n].gpu_indices) >= need}
        if not held:
            return {}
        node_id = max(held, key=lambda n: (held[n], -self.cap.order[n]))
        node = self.cap.nodes[node_id]
        params = {"outside_held": held[node_id], "outside_node_gpus": node.total_gpus,
                  "outside_model": node.gpu_model, "outside_node": node.name}
        if node_id in self.outside_scheduler:
            params["outside_scheduler"] = self.outside_scheduler[node_id]
        if len(held) > 1:
            params |= {"outside_total": sum(held.values()), "outside_nodes": len(held)}
        return params

    # -- preemption -----------------------------------------------------------------------------------
    def _borrowing(self, tenant: str, model: str) -> bool:
        quota = self.quotas.get((tenant, model))
        return quota is not None and self.usage[(tenant, model)] > quota.guaranteed + EPS

    def _preempt(self, job: WaitingJob, models):
        quota = self.quotas.get((job.tenant, job.gpu_model))
        reclaim = (quota is not None and self.policy.enforce_quotas
                   and self.usage[(job.tenant, job.gpu_model)] + job.quota_gpus <= quota.guaranteed + EPS)
        higher = not job.preemptible
        if not (reclaim or higher):
            return None

        def rule_for(victim: RunningJob) -> str | None:
            if job.spare_owner and job.owner and victim.owner == job.owner:
                return None  # its submitter chose to wait rather than stop their own work
            # A borrower's job of a higher priority is not reclaimed: requeued, it would be ordered first in the
            # next pass and take its GPUs back before this job, pass after pass.
            if (reclaim and victim.tenant != job.tenant and victim.priority <= job.priority
                    and self._borrowing(victim.tenant, victim.gpu_model)):
                return "reclaim within guarantee"
            if higher and victim.priority < job.priority:
                return "higher priority class"
            return None

        if job.nodes == 1 and not job.fractional:
            found = self._preempt_on_one_node(job, models, rule_for)
            if found:
                return found
        pool = self._victim_pool()
        candidates = [v for m in models for v in pool.get(m, ()) if v.id in self.running and rule_for(v)]
        if not candidates:
            return None
        freeable = sum(len(p.gpu_indices) for v in candidates for p in v.placements)
        if freeable + sum(self.cap.whole_free(m) for m in models) < job.slots:
            return None  # even every candidate together would not make room
        candidates.sort(key=self._victim_key)
        chosen: list[RunningJob] = []
        placement = None
        freeing = _Freeing(self.cap, 0 if job.fractional else job.gpus_per_node)  # a share fits no whole count
        # The job found no room before the first victim (it came here because it could not be placed). After
        # each release, room can only have appeared on a node that victim freed: place again only when one of
        # them now holds the job's part.
        for victim in candidates:
            if rule_for(victim) is None:  # e.g. its tenant is no longer borrowing after earlier victims
                continue
            self._release_books(victim)
            freeing.release(victim)
            chosen.append(victim)
            if (any(self.cap.node_fits(p.node_id, job, models) for p in victim.placements)
                    and self.cap.may_fit(job, models)):
                placement = self.cap.place_gang(job, models)
                if placement is not None:
                    break
        if placement is None:
            for victim in chosen:
                self._restore_books(victim)
                freeing.restore(victim, dropped=True)
            return None
        dropped = set()
        witness = placement  # a placement that fits now: one that the restored victim's nodes leave alone still fits
        for victim in list(reversed(chosen[:-1])):  # minimal set: give back any victim not needed
            self._restore_books(victim)
            touched = {p.node_id for p in victim.placements}
            if all(p.node_id not in touched for p in witness):
                freeing.restore(victim, dropped=True)
                dropped.add(victim.id)
                continue
            freeing.restore(victim)
            found = self.cap.place_gang(job, models) if self.cap.may_fit(job, models) else None
            if found is None:
                self._release_books(victim)
                freeing.release_again(victim)
            else:
                freeing.drop(victim)
                dropped.add(victim.id)
                witness = found
        chosen = [v for v in chosen if v.id not in dropped]
        freeing.settle()
        placement = self.cap.place_gang(job, models)
        return chosen, self._rules(chosen, rule_for), placement

    def _rules(self, chosen: list[RunningJob], rule_for) -> dict[int, str]:
        """The rule that allowed each victim, judged as if it still ran (borrowing depends on it)."""
        rules = {}
        for victim in chosen:
            self._restore(victim)
            rules[victim.id] = rule_for(victim)
            self._release(victim)
        return rules

    def _victim_key(self, victim: RunningJob) -> tuple:
        """Who goes first: lowest priority, then borrowers, then the newest."""
        return (victim.priority, 0 if self._borrowing(victim.tenant, victim.gpu_model) else 1, -victim.started_at,
                victim.id)

    def _preempt_on_one_node(self, job: WaitingJob, models, rule_for):
        """For a one-node job: on each node, the fewest, cheapest single-node victims that free enough whole
        GPUs; the node whose set is cheapest wins (its worst victim's priority, then the set's size)."""
        allowed: dict[int, bool] = {}  # rule_for per victim: nothing it depends on changes in this loop
        whole_count = self.cap.whole_count
        best = None
        for model in models:
            for node_id, victims in self._victim_nodes(model, job.gpus_per_node):
                need = job.gpus_per_node - whole_count[node_id]
                if need <= 0:
                    continue
                chosen, freed = [], 0
                for _key, victim in victims:  # already in victim order
                    if victim.priority > job.priority:
                        break  # no rule stops a job of a higher priority, nor any after it in victim order
                    ok = allowed.get(victim.id)
                    if ok is None:
                        ok = allowed[victim.id] = victim.id in self.running and rule_for(victim) is not None
                    if not ok:
                        continue
                    if best is not None and (victim.priority, len(chosen) + 1) > best[0][:2]:
                        break  # its set would be worse than the best one's, whatever follows
                    chosen.append(victim)
                    freed += len(victim.placements[0].gpu_indices)
                    if freed >= need:
                        break
                if freed < need:
                    continue
                # the victims come lowest priority first: the last one chosen is the set's worst
                cost = (chosen[-1].priority, len(chosen), self.cap.order[node_id])
                if best is None or cost < best[0]:
                    best = (cost, chosen)
        if best is None:
            return None
        chosen = best[1]
        for victim in chosen:
            self._release(victim)
        placement = self.cap.place_gang(job, models)
        if placement is None:  # CPU or memory still short: undo, let the general search try
            for victim in chosen:
                self._restore(victim)
            return None
        return chosen, self._rules(chosen, rule_for), placement

    def _victim_nodes(self, model: str, gpus: int) -> list[tuple[int, list[tuple[tuple, RunningJob]]]]:
        """The nodes of ``model`` with at least ``gpus`` GPUs that run single-node victims, with those victims
        (``_victims_by_node``); kept per model and size for the pass: the search walks them 50 times."""
        key = (model, gpus)
        if key not in self._victim_nodes_memo:
            by_node = self._victims_by_node()
            self._victim_nodes_memo[key] = [(n, by_node[n]) for n in self.cap.models.get(model, ())
                                            if by_node.get(n) and len(self.cap.free[n]) >= gpus]
        return self._victim_nodes_memo[key]

    def _victims_by_node(self) -> dict[int, list[tuple[tuple, RunningJob]]]:
        """Single-node whole-GPU preemptible jobs per node, in victim order as of the start of the pass."""
        if self._by_node is None:
            self._by_node = defaultdict(list)
            for jobs in self._victim_pool().values():
                for victim in jobs:
                    if len(victim.placements) == 1 and victim.placements[0].gpu_milli >= WHOLE:
                        self._by_node[victim.placements[0].node_id].append((self._victim_key(victim), victim))
            for victims in self._by_node.values():
                victims.sort(key=lambda item: item[0])
        return self._by_node

    def _victim_pool(self) -> dict[str, list[RunningJob]]:
        """Preemptible running jobs on this cluster's nodes, per model (built once per pass)."""
        if self._pool is None:
            self._pool = defaultdict(list)
            for job in self.running.values():
                if job.preemptible and all(p.node_id in self.cap.nodes for p in job.placements):
                    self._pool[job.gpu_model].append(job)
        return self._pool

    def _release(self, victim: RunningJob) -> None:
        self.cap.release(victim.placements, victim.cpu_milli, victim.memory_mib)
        self._release_books(victim)

    def _restore(self, victim: RunningJob) -> None:
        self.cap.take(victim.placements, victim.cpu_milli, victim.memory_mib)
        self._restore_books(victim)

    def _release_books(self, victim: RunningJob) -> None:
        """A victim's quota and place among the running jobs, given up (its GPUs: ``Capacity.release``)."""
        self._charge(victim.tenant, victim.gpu_model, -victim.quota_gpus)
        self.running.pop(victim.id, None)

    def _restore_books(self, victim: RunningJob) -> None:
        self._charge(victim.tenant, victim.gpu_model, victim.quota_gpus)
        self.running[victim.id] = victim

    # -- the pass -------------------------------------------------------------------------------------
    def _admit(self, job: WaitingJob, placements, backfilled: bool) -> None:
        if self.kept.pop(job.id, None) is not None:  # admitted: its kept node is no longer held back
            self.cap.unkeep(job.id)
        self.cap.take(placements, job.cpu_milli, job.memory_mib)
        if job.group:
            self.group_running[job.group] += 1
        model = self.cap.nodes[placements[0].node_id].gpu_model  # the model it lands on is the one it uses
        borrowing = self._borrowing(job.tenant, model)
        self._charge(job.tenant, model, job.quota_gpus)
        self.result.admissions.append(Admission(job.id, tuple(placements), backfilled=backfilled,
                                                borrowing=borrowing or self._borrowing(job.tenant, model)))
        self.admitted.append(RunningJob(
            id=job.id, tenant=job.tenant, gpu_model=model, placements=tuple(placements), priority=job.priority,
            preemptible=job.preemptible, started_at=self.now, max_runtime=job.max_runtime,
            expected_runtime=job.expected_runtime, cpu_milli=job.cpu_milli, memory_mib=job.memory_mib,
            group=job.group))

    def _make_head(self, key: str, job: WaitingJob) -> None:
        heaps = slot_heaps(self.cap, list(self.running.values()) + self.admitted, self.held_for_preemptors,
                           self.now, use_expected=False, outside=self.snap.outside, only=key)
        start, extra = shadow(heaps.get(key) or Slots(), job.slots)
        self.heads[key] = _Head(job, start, extra)

    def run(self) -> PassResult:
        usage = decayed_usage(self.snap)
        ordered = order_jobs(self.snap, usage)
        self._keep_nodes(ordered)
        for job in ordered:
            self._consider(job)
        self._explain()
        self.result.shares = tenant_shares(self.snap, usage)
        self.result.stats = {"fragmentation": round(self.cap.fragmentation(), 4), "searches": self.searches,
                             "backfilled": sum(a.backfilled for a in self.result.admissions)}
        return self.result

    def _consider(self, job: WaitingJob) -> None:
        models = job.models(self.cap.known_models)
        key = job.gpu_model
        base = {"tenant": job.tenant, "gpu_model": job.gpu_model, "requested": job.gpus, "nodes": job.nodes,
                "gpus_per_node": job.gpus_per_node, "task_type": job.task_type}
        never = next((d for d in job.after if d.state == NEVER), None)
        if never:  # whatever else holds it back: the pass ends it (approved or released, it could never run)
            return self.waits.append((job, WaitReason.DEPENDENCY_NEVER, base | _dependency_params(never)))
        if job.awaiting_approval:
            return self.waits.append((job, WaitReason.AWAITING_APPROVAL, base))
        if job.held:
            return self.waits.append((job, WaitReason.HELD, base | {"held_by": job.held}))
        unmet = [d for d in job.after if d.state != MET]
        if unmet:  # not a head: it holds nothing back until the jobs it waits for are done
            return self.waits.append((job, WaitReason.DEPENDENCY, base | _dependency_params(unmet[0]) | {
                "more": len(unmet) - 1}))
        if job.group_limit and self.group_running[job.group] >= job.group_limit:
            return self.waits.append((job, WaitReason.ARRAY_LIMIT, base | {
                "array": job.group, "limit": job.group_limit, "running": self.group_running[job.group]}))
        unrunnable = self._unrunnable(job, models)
        if unrunnable:
            return self.waits.append((job, unrunnable[0], base | unrunnable[1]))
        if job.gpu_model == ANY_MODEL or len(job.accept_models) > 1:
            # several acceptable models: each is held to its own quota, and the job may land only where its
            # tenant's quota (and department cap) of that model admits it
            verdicts = {model: self._quota(job, base, model) for model in models}
            if all(verdicts.values()):
                return self.waits.append((job, *verdicts[models[0]]))
            models = tuple(model for model in models if verdicts[model] is None)
        else:
            quota = self._quota(job, base)
            if quota:
                return self.waits.append((job, *quota))
        reserved = self._reserved(job, models[0]) if len(models) == 1 else None
        if reserved:  # not a head: the held GPUs are for the reservation's tenant, not for this job
            return self.waits.append((job, WaitReason.RESERVED, base | reserved))
        placements = self.cap.place_gang(job, models)
        if placements is None and any(self.cap.nodes[n].gpu_model in models for n in self.cap.kept_for):
            keeper = self._kept_from(job, models)
            if keeper is not None and (keeper.submitted_at, keeper.id) < (job.submitted_at, job.id):
                # it would fit only on a node kept for a job that has waited longer: that job goes first
                self.behind_keeper[job.id] = keeper.id
                return self.waits.append((job, WaitReason.PRIORITY, base | self._blocker(keeper, job, models)))
            if keeper is not None:  # it has waited longer than the job the node is kept for: not held back
                with self.cap.ignoring_kept():
                    placements = self.cap.place_gang(job, models)
        head = self.heads.get(key)
        backfilled = False
        if placements is not None and head is not None:
            if self.policy.backfill and self.now + job.max_runtime <= head.start:
                backfilled = True
            elif self.policy.backfill and job.slots <= head.extra:
                head.extra -= job.slots
                backfilled = True
            else:
                return self.waits.append((job, WaitReason.PRIORITY, base | self._blocker(head.job, job, models)))
        if placements is not None:
            return self._admit(job, placements, backfilled)
        if self.policy.preemption and self.searches < self.policy.max_preemption_searches:
            self.searches += 1
            mark = self.cap.checkpoint()
            found = self._preempt(job, models)
            if not found:  # every victim tried was given back: capacity is as before the search
                self.cap.restored(mark)
            if found:
                victims, rules, placement = found
                self.cap.take(placement, job.cpu_milli, job.memory_mib)
                self._charge(job.tenant, self.cap.nodes[placement[0].node_id].gpu_model, job.quota_gpus)
                for p in placement:
                    for index in p.gpu_indices:
                        self.held_for_preemptors[(p.node_id, index)] = self.now
                for victim in victims:
                    self.result.preemptions.append(Preemption(
                        victim.id, victim.tenant, job.id, job.tenant, rules[victim.id],
                        f"Preempted so that job #{job.id} of tenant {job.tenant} (priority {job.priority}) can run: "
                        f"{rules[victim.id]}."))
                pending = {"victims": len(victims)}
                if all(v.tenant == job.tenant for v in victims):  # other tenants' jobs are not named
                    pending["victim_list"] = ", ".join(f"#{v.id}" for v in victims)
                return self.waits.append((job, WaitReason.PREEMPTION_PENDING, base | pending))
        reason, params = self._diagnose(job, models, base)
        if reason in OUTSIDE_TOLD and self.outside_held:
            params = params | self._outside(job, models)
        self.waits.append((job, reason, params))
        if key not in self.heads:
            self._make_head(key, job)
        return None

    def _blocker(self, head: WaitingJob, job: WaitingJob, models) -> dict:
        """The numbers of the PRIORITY sentence: the job ahead that ``job`` would delay."""
        blocker = {"blocker_priority": head.priority, "blocker_tenant": head.tenant, "blocker_gpus": head.gpus,
                   "total_free": sum(self.cap.whole_free(m) for m in models)}
        if head.tenant == job.tenant:  # another tenant's job is not named (its id is not ours to show)
            blocker["blocker_id"] = head.id
        if head.priority < job.priority:  # ahead by aging: the sentence says how long it has waited
            blocker["blocker_waited_hours"] = round(max(0.0, self.now - head.submitted_at) / 3600, 1)
        return blocker

    def _keep_nodes(self, ordered: list[WaitingJob]) -> None:
        """Before anyone is placed: for each priority class and GPU model, its longest-waiting single-node job
        that has waited ``keep_node_after_hours``, could run now as far as its quota goes, and fits nowhere now,
        gets a node kept for it (``_keep_node``). Before, not when its turn comes: the jobs of higher classes
        placed ahead of it in the same pass would otherwise refill the node each time it drains."""
        hours = self.policy.keep_node_after_hours
        if hours <= 0:
            return
        longest: dict[tuple[int, str], WaitingJob] = {}
        for job in ordered:
            if (job.nodes != 1 or job.fractional or job.held or job.awaiting_approval or job.avoid_nodes
                    or self.now - job.submitted_at < hours * 3600):
                continue
            key = (job.priority, job.gpu_model)
            if key not in longest or (job.submitted_at, job.id) < (longest[key].submitted_at, longest[key].id):
                longest[key] = job
        for job in sorted(longest.values(), key=lambda j: (j.submitted_at, j.id)):
            models = job.models(self.cap.known_models)
            base = {"tenant": job.tenant, "gpu_model": job.gpu_model}
            if (not models or any(self._quota(job, base, m) for m in models)
                    or (job.group_limit and self.group_running[job.group] >= job.group_limit)
                    or self.cap.place_gang(job, models) is not None):
                continue
            self._keep_node(job, models)

    def _keep_node(self, job: WaitingJob, models) -> None:
        """Keep one node for ``job``: of the nodes that could ever hold it, the one whose GPUs are expected free
        for it first (running jobs' expected ends), so that it drains to the job instead of being refilled by
        others. A job that surely ends before the node's GPUs are surely free (max runtimes) may still use it:
        that delays nothing (EASY backfill's rule). (Measured: letting in the jobs that end before the node's
        *expected* free time made the Burstable p95 worse, 104,000 s against 77,000 s: running jobs overrun their
        estimates, so the expected drain moved and the node was refilled.)"""
        ends: dict[tuple[int, int], tuple[float, float]] = {}  # (expected, sure) end of what holds each GPU
        for held in list(self.running.values()) + self.admitted:
            end = (max(self.now, held.end()), max(self.now, held.end(use_expected=False)))
            for p in held.placements:
                for index in p.gpu_indices:
                    key = (p.node_id, index)
                    ends[key] = max(ends.get(key, end), end)
        for hold in self.snap.outside:
            for index in hold.gpu_indices:
                ends[(hold.node_id, index)] = (max(self.now, hold.end()),) * 2
        for key in self.held_for_preemptors:
            ends[key] = (math.inf, math.inf)  # promised to a preemptor
        idle = (self.now, self.now)
        best = None
        for model in models:
            for node_id in self.cap.models.get(model, ()):
                node = self.cap.nodes[node_id]
                if (node_id in self.cap.kept_for or len(node.gpu_indices) < job.gpus_per_node
                        or (node.cpu_milli and node.cpu_milli < job.cpu_milli)
                        or (node.memory_mib and node.memory_mib < job.memory_mib)):
                    continue
                gpus = [ends.get((node_id, i), idle) for i in node.gpu_indices]
                expected = sorted(e for e, _sure in gpus)[job.gpus_per_node - 1]
                sure = sorted(sure for _e, sure in gpus)[job.gpus_per_node - 1]
                if math.isfinite(expected) and (best is None or (expected, self.cap.order[node_id]) < best[0]):
                    best = ((expected, self.cap.order[node_id]), node_id, sure)
        if best is not None:
            self.cap.keep(best[1], job.id, best[2] - self.now)
            self.kept[job.id] = job

    def _kept_from(self, job: WaitingJob, models) -> WaitingJob | None:
        """The head whose kept node ``job`` would fit on now, or None."""
        with self.cap.ignoring_kept():
            placements = self.cap.place_gang(job, models)
        if placements is None:
            return None
        kept_for = self.cap.kept_for
        holder = next((kept_for[p.node_id][0] for p in placements if p.node_id in kept_for), None)
        return self.kept.get(holder)

    def _explain(self) -> None:
        running = list(self.running.values()) + self.admitted
        heaps = slot_heaps(self.cap, running, self.held_for_preemptors, self.now, outside=self.snap.outside)
        qheaps = quota_heaps(self.quotas, running, self.now) if self.policy.enforce_quotas else {}
        estimates = self._estimates(running, heaps, qheaps)
        positions: dict[str, int] = defaultdict(int)
        for position, (job, reason, params) in enumerate(self.waits, start=1):
            positions[job.tenant] += 1
            estimate = estimates.get(job.id)
            earliest, latest = self._likely_range(estimate)
            self.result.waiting.append(WaitDecision(
                job_id=job.id, reason=reason, params=params, message=render_reason(reason, params),
                position=position, tenant_position=positions[job.tenant], estimated_start=estimate,
                earliest_start=earliest, latest_start=latest))

    def _estimates(self, running: list[RunningJob], heaps, qheaps) -> dict[int, float | None]:
        """Every waiting job's estimated start, in queue order; a job that waits for others is estimated once
        they are (the jobs they wait for may come later in the queue): it starts no earlier than the last of them
        is expected to end (``_dependency_end``), so the estimate chains through a pipeline."""
        ends = {job.id: expected_end(job, self.now) for job in running}
        estimates: dict[int, float | None] = {}
        later = []
        for job, reason, params in self._keepers_first():
            if reason == WaitReason.DEPENDENCY:
                later.append((job, params))
                continue
            estimates[job.id] = self._estimate(job, reason, params, heaps, qheaps)
            if estimates[job.id] is not None:
                ends[job.id] = estimates[job.id] + job.runtime_estimate
        waiting_ids = {job.id for job, _reason, _params in self.waits}
        while later:
            left, unready = [], {}  # per dependency: whether a job it waits for has no estimate yet this round
            for job, params in later:
                if any(self._unready(d, waiting_ids, estimates, unready) for d in job.after if d.state != MET):
                    left.append((job, params))
                    continue
                not_before = self._dependency_end(job, ends, params)
                estimates[job.id] = None if not_before is None else self._estimate(
                    job, WaitReason.DEPENDENCY, params, heaps, qheaps, not_before)
                if estimates[job.id] is not None:
                    ends[job.id] = estimates[job.id] + job.runtime_estimate
            if len(left) == len(later):  # they wait for each other (not stored: cycles are refused at submission)
                estimates.update((job.id, None) for job, _params in left)
                break
            later = left
        return estimates

    def _keepers_first(self) -> list[tuple[WaitingJob, WaitReason, dict]]:
        """The waits in the order they are estimated: queue order, except that a job told a node is kept for a job
        that has waited longer comes right after that job. It cannot start before it, even when it is ahead in the
        queue (a higher class); estimated in queue order, it would take the kept node's GPUs first, and a job
        backfilled onto them now would move the kept-for job's estimate by its own runtime."""
        if not self.behind_keeper:
            return self.waits
        unplaced = {job.id for job, _reason, _params in self.waits}
        behind: dict[int, list] = defaultdict(list)
        ordered: list[tuple[WaitingJob, WaitReason, dict]] = []

        def put(wait) -> None:
            ordered.append(wait)
            unplaced.discard(wait[0].id)
            for follower in behind.pop(wait[0].id, ()):
                put(follower)

        for wait in self.waits:
            keeper = self.behind_keeper.get(wait[0].id)
            if keeper in unplaced:
                behind[keeper].append(wait)
            else:
                put(wait)
        return ordered

    @staticmethod
    def _unready(dependency: Dependency, waiting_ids: set[int], estimates: dict, unready: dict) -> bool:
        """Whether a job ``dependency`` waits for waits itself and has no estimate yet (kept per dependency for
        the round: the tasks of an array that waits for a whole array share it)."""
        key = (dependency.on_job, dependency.condition, len(dependency.waits_on))
        if key not in unready:
            unready[key] = any(i in waiting_ids and i not in estimates
                               for i in dependency.waits_on or (dependency.on_job,))
        return unready[key]

    def _dependency_end(self, job: WaitingJob, ends: dict[int, float], params: dict) -> float | None:
        """When the last job ``job`` waits for is expected to end (None: unknown), and its reason's numbers name
        that job, its status and the time (the first one with no estimate, when one has none)."""
        latest: tuple[float, Dependency] | None = None
        for dependency in job.after:
            if dependency.state == MET:
                continue
            end = self._end_of(dependency, ends)
            if end is None:
                params.update(_dependency_params(dependency))
                return None
            if latest is None or end > latest[0]:
                latest = (end, dependency)
        if latest is None or not math.isfinite(latest[0]):
            return None
        params.update(_dependency_params(latest[1]) | {"done_by": _fmt_time(latest[0]), "done_by_ts": latest[0]})
        return latest[0]

    def _end_of(self, dependency: Dependency, ends: dict[int, float]) -> float | None:
        """When the jobs ``dependency`` waits for are expected to have ended; kept per dependency for the pass, as
        the tasks of an array that waits for another whole array share it."""
        key = (dependency.on_job, dependency.condition, len(dependency.waits_on))
        if key not in self._dependency_ends:
            ids = dependency.waits_on or (dependency.on_job,)
            known = [ends.get(i) for i in ids]  # none for a job with no estimate, or on another cluster's queue
            self._dependency_ends[key] = max(known) if all(end is not None for end in known) else None
        return self._dependency_ends[key]

    def _likely_range(self, estimate: float | None) -> tuple[float | None, float | None]:
        """The calibrated range around an estimated start (``Policy.eta_*``)."""
        if estimate is None or not math.isfinite(estimate):
            return None, None
        wait = max(0.0, estimate - self.now)
        policy = self.policy
        return (self.now + policy.eta_low_ratio * wait,
                self.now + policy.eta_high_ratio * wait + policy.eta_margin_seconds)

    def _estimate(self, job, reason, params, heaps, qheaps, not_before: float = 0.0) -> float | None:
        if reason in NO_ESTIMATE:
            return None
        if reason == WaitReason.PREEMPTION_PENDING:
            return self.now
        heap = heaps.get(job.gpu_model)
        k = job.slots
        ready = take_slots(heap, k) if heap is not None else None
        if ready is None:
            return None
        start = max(self.now, ready, not_before)
        qheap = qheaps.get((job.tenant, job.gpu_model))
        q = job.quota_gpus
        if qheap is not None:
            quota_ready = take_slots(qheap, q)
            if quota_ready is None:
                give_slots(heap, k, math.inf)
                return None
            start = max(start, quota_ready)
        if reason == WaitReason.RESERVED:
            start = max(start, params.get("until_ts", start))
        end = start + job.runtime_estimate
        give_slots(heap, k, end)
        if qheap is not None:
            give_slots(qheap, q, end)
        return start if math.isfinite(start) else None  # behind GPUs held by services (no end): unknown


def _dependency_params(dependency: Dependency) -> dict:
    """The numbers and words of a dependency's wait reason: the job it names, the condition, that job's status."""
    return {"on_job": dependency.on_job, "condition": CONDITION_WORDS[dependency.condition],
            "on_status": STATUS_WORDS.get(dependency.on_status, dependency.on_status)}


class _Freeing:
    """The capacity a preemption search frees, released on a node only once that node could hold a part of the
    job (``g`` whole free GPUs, counting what the search's victims there would free).

    A search releases victims in the order they go until the job fits, then gives back every one it did not need.
    For a gang on a large cluster that was some 2,600 victims spread over the nodes before two nodes were free,
    each release and each give-back recounting a node: most of a moving pass's engine time at 10,000 nodes. A
    node that never gets ``g`` whole GPUs free can hold no part of the job, and where a job goes depends only on
    the nodes that can hold a part of it, so the search finds the same victims, the same placement and the same
    minimal set whether or not such a node's GPUs were released. They are kept aside instead (``waiting``) and
    released when their node gets there (``release``) or when the victim is kept in the end (``settle``); a
    victim given back that never reached its capacity costs nothing to give back (``restore``)."""

    def __init__(self, cap: Capacity, g: int):
        self.cap, self.g = cap, g  # 0: every node is opened at once (a share may fit where no GPU is whole)
        self.open: set[int] = set()  # nodes whose victims' GPUs are released on the capacity
        self.free: dict[tuple[int, int], int] = {}  # a kept-aside GPU's free share, counting the victims there
        self.whole: dict[int, int] = {}  # a node's whole free GPUs, counting the victims kept aside there
        self.waiting: dict[int, list[tuple[RunningJob, Placement]]] = defaultdict(list)  # kept aside, by node
        self.released: dict[int, list[Placement]] = {}  # by victim: its parts released on the capacity
        self.aside: dict[int, list[Placement]] = defaultdict(list)  # by victim: its parts kept aside

    def release(self, victim: RunningJob) -> None:
        cap, parts = self.cap, []
        for p in victim.placements:
            n = p.node_id
            if n not in cap.nodes:
                continue  # the capacity does not hold it
            if n in self.open:
                parts.append((victim, p))
                continue
            node_free = cap.free[n]
            whole = self.whole.get(n, cap.whole_count[n])
            for index in p.gpu_indices:
                if index in node_free:
                    before = self.free.get((n, index), node_free[index])
                    self.free[(n, index)] = before + p.gpu_milli
                    whole += before < WHOLE <= before + p.gpu_milli
            self.whole[n] = whole
            self.waiting[n].append((victim, p))
            self.aside[victim.id].append(p)
            if whole >= self.g:  # this node may hold a part now: what was kept aside on it is released
                self.open.add(n)
                for held, part in self.waiting.pop(n):
                    self.aside[held.id].remove(part)
                    parts.append((held, part))
        self._shift(parts, +1)

    def restore(self, victim: RunningJob, dropped: bool = False) -> None:
        """Give back what of ``victim`` was released; ``dropped``: it is not chosen (nothing of it stays aside)."""
        self._shift([(victim, p) for p in self.released.get(victim.id, ())], -1, record=False)
        if dropped:
            self.drop(victim)

    def release_again(self, victim: RunningJob) -> None:
        self._shift([(victim, p) for p in self.released.get(victim.id, ())], +1, record=False)

    def drop(self, victim: RunningJob) -> None:
        """``victim`` is given back for good: forget its parts kept aside."""
        self.released.pop(victim.id, None)
        for p in self.aside.pop(victim.id, ()):
            self.waiting[p.node_id] = [(v, part) for v, part in self.waiting[p.node_id] if v.id != victim.id]

    def settle(self) -> None:
        """Release what is still kept aside of the victims chosen (the others were dropped)."""
        self._shift([(held, part) for parts in self.waiting.values() for held, part in parts], +1)
        self.waiting.clear()
        self.aside.clear()

    def _shift(self, parts: list[tuple[RunningJob, Placement]], sign: int, record: bool = True) -> None:
        for victim, part in parts:
            if sign > 0:
                self.cap.release((part,), victim.cpu_milli, victim.memory_mib)
            else:
                self.cap.take((part,), victim.cpu_milli, victim.memory_mib)
            if record:
                self.released.setdefault(victim.id, []).append(part)


def schedule(snapshot: Snapshot) -> PassResult:
    """One pass over ``snapshot``. The cyclic garbage collector waits until it returns, as in the database pass
    (``scheduling.passes.scheduler``): at 100,000 waiting jobs a pass allocates a million small objects that
    all live until it returns, and collecting in between found nothing to free in an eighth of the pass's time.
    Reference counting frees what it leaves all the same."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Pass(snapshot).run()
    finally:
        if collecting:
            gc.enable()

