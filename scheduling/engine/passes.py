"""The first scheduling pass: strict priority order, quota check, first-fit gang placement.

Order: higher priority first, then earlier submission. For each waiting job in that order:

1. Quota: the tenant's GPUs of the model in use plus this job must stay within the tenant's limit.
2. Capacity: a request no set of healthy nodes could ever hold is reported as such, and blocks nobody.
3. Placement: first fit over healthy nodes of the model (sorted by cluster, datacenter, rack, name),
   all-or-nothing: a job of N nodes gets N distinct nodes of one cluster, each with ``gpus_per_node``
   free GPUs, or nothing.
4. No overtaking: once a job of a GPU model waits for resources, later jobs of that model that would fit
   wait behind it (``PRIORITY``) rather than take GPUs it needs. Backfill (a later issue) relaxes this
   when the overtaking job provably finishes in time.
"""

from __future__ import annotations

from collections import defaultdict

from .model import Admission, PassResult, Placement, Snapshot, WaitDecision, WaitingJob
from .reasons import WaitReason, render_reason


def place_gang(
    free: dict[int, list[int]], nodes_in_order, gpus_per_node: int, node_count: int
) -> tuple[Placement, ...] | None:
    """First fit of ``node_count`` nodes with ``gpus_per_node`` free GPUs each, within one cluster.

    ``free`` maps node id to its free GPU indices (sorted); ``nodes_in_order`` are the candidate
    NodeSnapshots in preference order. Returns the placements, or None when the gang does not fit whole.
    """
    by_cluster: dict[str, list[Placement]] = defaultdict(list)
    for node in nodes_in_order:
        indices = free.get(node.id, ())
        if len(indices) < gpus_per_node:
            continue
        chosen = by_cluster[node.cluster]
        chosen.append(Placement(node.id, tuple(indices[:gpus_per_node])))
        if len(chosen) == node_count:
            return tuple(chosen)
    return None


def schedule(snapshot: Snapshot) -> PassResult:
    nodes_by_model: dict[str, list] = defaultdict(list)
    for node in sorted(snapshot.nodes, key=lambda n: (n.cluster, n.datacenter, n.rack, n.name, n.id)):
        if node.schedulable and node.gpu_indices:
            nodes_by_model[node.gpu_model].append(node)

    free: dict[int, list[int]] = {n.id: sorted(n.gpu_indices) for ns in nodes_by_model.values() for n in ns}
    usage: dict[tuple[str, str], int] = defaultdict(int)
    for job in snapshot.running:
        usage[(job.tenant, job.gpu_model)] += job.gpus
        for placement in job.placements:
            if placement.node_id in free:
                taken = set(placement.gpu_indices)
                free[placement.node_id] = [i for i in free[placement.node_id] if i not in taken]
    quotas = {(q.tenant, q.gpu_model): q for q in snapshot.quotas}

    result = PassResult()
    waits: list[tuple[WaitingJob, WaitReason, dict]] = []
    blocked_head: dict[str, WaitingJob] = {}

    def free_stats(model: str) -> dict:
        counts = [len(free[n.id]) for n in nodes_by_model[model]]
        return {"total_free": sum(counts), "best_free": max(counts, default=0)}

    for job in sorted(snapshot.waiting, key=lambda j: j.rank_key):
        model = job.gpu_model
        base = {"tenant": job.tenant, "gpu_model": model, "requested": job.gpus,
                "nodes": job.nodes, "gpus_per_node": job.gpus_per_node}
        quota = quotas.get((job.tenant, model))
        used = usage[(job.tenant, model)]
        if quota is None or quota.limit == 0:
            waits.append((job, WaitReason.NO_QUOTA, base))
            continue
        if used + job.gpus > quota.limit:
            waits.append((job, WaitReason.QUOTA_EXCEEDED, base | {
                "used": used, "limit": quota.limit, "guaranteed": quota.guaranteed,
                "over": used + job.gpus - quota.limit}))
            continue
        candidates = nodes_by_model[model]
        capable = sum(1 for n in candidates if len(n.gpu_indices) >= job.gpus_per_node)
        if capable < job.nodes:
            waits.append((job, WaitReason.EXCEEDS_CAPACITY, base | {"capable_nodes": capable}))
            continue
        placements = place_gang(free, candidates, job.gpus_per_node, job.nodes)
        head = blocked_head.get(model)
        if placements is not None and head is None:
            for placement in placements:
                taken = set(placement.gpu_indices)
                free[placement.node_id] = [i for i in free[placement.node_id] if i not in taken]
            usage[(job.tenant, model)] += job.gpus
            result.admissions.append(Admission(job.id, placements))
            continue
        stats = free_stats(model)
        if placements is not None:
            waits.append((job, WaitReason.PRIORITY, base | stats | {
                "blocker_id": head.id, "blocker_priority": head.priority, "blocker_gpus": head.gpus}))
            continue
        blocked_head.setdefault(model, job)
        if job.nodes == 1:
            waits.append((job, WaitReason.INSUFFICIENT_GPUS, base | stats))
        else:
            fitting = sum(1 for n in candidates if len(free[n.id]) >= job.gpus_per_node)
            waits.append((job, WaitReason.GANG_UNPLACEABLE, base | stats | {"fitting_nodes": fitting}))

    tenant_positions: dict[str, int] = defaultdict(int)
    for position, (job, reason, params) in enumerate(waits, start=1):
        tenant_positions[job.tenant] += 1
        result.waiting.append(WaitDecision(
            job_id=job.id, reason=reason, params=params, message=render_reason(reason, params),
            position=position, tenant_position=tenant_positions[job.tenant]))
    return result
