"""A synthetic cluster and workload for the scheduler benchmark: plain engine data, reproducible by seed.

Nodes of 8 GPUs in racks of 20 and network domains of 5 racks, two GPU models; tenants with weights and
quotas (guarantee = an even split of 80 % of capacity, limit = twice that); running jobs packed first-fit
until the cluster is full; a queue mixing priority classes, sizes (1-8 GPUs, multi-node gangs, GPU shares)
and topology constraints.
"""

from __future__ import annotations

import random

from scheduling.engine import NodeSnapshot, Placement, QuotaSnapshot, RunningJob, Snapshot, TenantInfo, WaitingJob

MODELS = ("A100", "H100")
CLASSES = [  # code, priority, preemptible, max runtime (s), weight in the mix
    ("inference", 100, False, 7 * 86400, 5),
    ("training", 80, False, 3 * 86400, 15),
    ("research", 50, True, 86400, 40),
    ("notebook", 40, True, 8 * 3600, 15),
    ("evaluation", 30, True, 4 * 3600, 15),
    ("test", 10, True, 3600, 10),
]


def build(nodes: int = 1000, gpus_per_node: int = 8, tenants: int = 100, pending: int = 10000,
          running: int = 4000, seed: int = 1, now: float = 1.8e9) -> Snapshot:
    rng = random.Random(seed)
    node_list = tuple(
        NodeSnapshot(i + 1, f"node-{i:05d}", MODELS[i % len(MODELS)], tuple(range(gpus_per_node)), cluster="bench",
                     datacenter=f"dc{i // 500}", rack=f"rack-{i // 20:03d}", network_domain=f"ib-{i // 100:02d}",
                     cpu_milli=128_000, memory_mib=1_048_576)
        for i in range(nodes))
    names = [f"tenant-{t:03d}" for t in range(tenants)]
    per_model = nodes * gpus_per_node / len(MODELS)
    guaranteed = max(1, int(per_model * 0.8 / tenants))
    quotas = tuple(QuotaSnapshot(t, m, guaranteed, guaranteed * 2) for t in names for m in MODELS)
    tenant_info = tuple(TenantInfo(t, rng.choice([1, 1, 2, 3])) for t in names)
    weights = [c[4] for c in CLASSES]

    free = {n.id: list(n.gpu_indices) for n in node_list}
    by_model = {m: [n for n in node_list if n.gpu_model == m] for m in MODELS}
    used: dict[tuple[str, str], int] = {}
    run = []
    job_id = 0
    for _ in range(running):
        code, priority, preemptible, max_rt, _w = rng.choices(CLASSES, weights)[0]
        size = rng.choice([1, 1, 1, 1, 2, 2, 4])
        tenant, model = rng.choice(names), rng.choice(MODELS)
        if used.get((tenant, model), 0) + size > guaranteed * 2:
            continue
        node = next((n for n in by_model[model] if len(free[n.id]) >= size), None)
        if node is None:
            continue
        gpus, free[node.id] = tuple(free[node.id][:size]), free[node.id][size:]
        used[(tenant, model)] = used.get((tenant, model), 0) + size
        job_id += 1
        started = now - rng.uniform(0, max_rt * 0.9)
        run.append(RunningJob(job_id, tenant, model, (Placement(node.id, gpus),), priority=priority,
                              preemptible=preemptible, task_type=code, submitted_at=started - 60, started_at=started,
                              max_runtime=max_rt, cpu_milli=8000 * size, memory_mib=32768 * size))
    waiting = []
    for i in range(pending):
        code, priority, preemptible, max_rt, _w = rng.choices(CLASSES, weights)[0]
        shape = rng.random()
        gpus, count, milli = rng.choice([1, 1, 2, 4, 8]), 1, 1000
        if shape < 0.05:
            gpus, count = 8, rng.choice([2, 4])
        elif shape < 0.15:
            gpus, milli = 1, rng.choice([250, 500])
        topology = rng.choice(["any", "any", "any", "same_rack", "same_network_domain"]) if count > 1 else "any"
        waiting.append(WaitingJob(
            100000 + i, rng.choice(names), rng.choice(MODELS), gpus, nodes=count, priority=priority, task_type=code,
            submitted_at=now - rng.uniform(0, 86400), gpu_milli=milli, cpu_milli=4000 * gpus,
            memory_mib=16384 * gpus, topology=topology, max_runtime=max_rt, preemptible=preemptible))
    return Snapshot(nodes=node_list, running=tuple(run), waiting=tuple(waiting), quotas=quotas, tenants=tenant_info,
                    now=now)
