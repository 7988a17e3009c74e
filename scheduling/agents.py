"""Reading node agents. The simulated cluster's agents answer in-process with the same snapshot shape
(``/v1/snapshot``) the real node agent serves; the HTTP poller for real agents comes with the node-agent
issue."""

from __future__ import annotations

import random

from django.db import transaction
from django.utils import timezone

from .models import ACTIVE_STATUSES, GPU, JobAllocation, Node


def simulated_snapshot(node: Node, busy: set[int], now) -> dict:
    """Plausible readings: busy GPUs work hard and fill memory, idle ones sit near zero."""
    rng = random.Random(f"{node.pk}-{int(now.timestamp()) // 15}")
    gpus = []
    for gpu in node.gpus.all():
        used = gpu.index in busy
        gpus.append({
            "index": gpu.index, "uuid": gpu.uuid, "name": gpu.model, "memory_total_mb": gpu.memory_mb,
            "utilization_gpu": rng.randint(55, 99) if used else rng.randint(0, 2),
            "memory_used_mb": int(gpu.memory_mb * rng.uniform(0.4, 0.95)) if used else rng.randint(0, 400),
            "healthy": gpu.healthy,
        })
    return {"node": node.name, "timestamp": now.isoformat(), "gpus": gpus, "errors": []}


def poll_simulated_agents() -> int:
    """Refresh readings of every node of the simulated cluster; returns how many nodes answered."""
    now = timezone.now()
    busy: dict[int, set[int]] = {}
    for node_id, index in JobAllocation.objects.filter(
            released_at__isnull=True, job__status__in=ACTIVE_STATUSES).values_list("gpu__node_id", "gpu__index"):
        busy.setdefault(node_id, set()).add(index)
    nodes = Node.objects.filter(agent_url="").prefetch_related("gpus")
    updated: list[GPU] = []
    for node in nodes:
        snapshot = simulated_snapshot(node, busy.get(node.pk, set()), now)
        readings = {g["index"]: g for g in snapshot["gpus"]}
        for gpu in node.gpus.all():
            reading = readings[gpu.index]
            gpu.utilization_pct = reading["utilization_gpu"]
            gpu.memory_used_mb = reading["memory_used_mb"]
            gpu.last_reading_at = now
            updated.append(gpu)
    with transaction.atomic():
        GPU.objects.bulk_update(updated, ["utilization_pct", "memory_used_mb", "last_reading_at"], batch_size=500)
        nodes.update(last_seen=now)
    return len(nodes)
