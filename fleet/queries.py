"""Read-side questions about the fleet: what can run now, per GPU model (the "what can I run" page)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import occupancy
from .models import AdminState, Health, Node


@dataclass
class ModelCapacity:
    """What can run now on one GPU model: the bridge between what was bought and what can run."""

    gpu_model: str
    nodes: int = 0
    schedulable_nodes: int = 0
    gpus: int = 0
    allocated: int = 0
    free: int = 0
    unhealthy: int = 0
    unavailable: int = 0  # on cordoned or draining nodes
    largest_on_node: int = 0
    largest_in_rack: int = 0
    largest_in_rack_where: str = ""
    largest_in_cluster: int = 0
    node_rows: list = field(default_factory=list)

    @property
    def allocated_pct(self) -> float:
        return 100.0 * self.allocated / self.gpus if self.gpus else 0.0


def largest_gang(free_per_node: list[int]) -> int:
    """The most GPUs one job can get from these nodes with the same number of GPUs on each node."""
    return max((g * sum(1 for f in free_per_node if f >= g) for g in set(free_per_node) if g), default=0)


def capacity_summary(with_nodes: bool = False) -> list[ModelCapacity]:
    """Cluster capacity per GPU model. Not tenant data: every signed-in user may see it."""
    held = occupancy.held_gpus()
    summary: dict[str, ModelCapacity] = {}
    free_by: dict[tuple, list[int]] = {}
    for node in Node.objects.select_related("cluster").prefetch_related("gpus"):
        row = summary.setdefault(node.gpu_model, ModelCapacity(node.gpu_model))
        gpus = list(node.gpus.all())
        busy = {g.pk for g in gpus if g.index in held.get(node.pk, ())}
        taken = len(busy)
        usable = node.schedulable
        free = sum(1 for g in gpus if g.pk not in busy and g.healthy) if usable else 0
        row.nodes += 1
        row.schedulable_nodes += usable
        row.gpus += len(gpus)
        row.allocated += taken
        row.free += free
        row.unhealthy += len(gpus) if node.health == Health.UNHEALTHY else sum(1 for g in gpus if not g.healthy)
        if node.admin_state != AdminState.ACTIVE and node.health != Health.UNHEALTHY:
            row.unavailable += len(gpus)
        row.largest_on_node = max(row.largest_on_node, free)
        free_by.setdefault((node.gpu_model, "rack", node.cluster.name, node.rack), []).append(free)
        free_by.setdefault((node.gpu_model, "cluster", node.cluster.name), []).append(free)
        if with_nodes:
            row.node_rows.append({"node": node, "gpus": gpus, "busy": busy, "taken": taken, "free": free})
    for key, frees in free_by.items():
        row, best = summary[key[0]], largest_gang(frees)
        if key[1] == "rack" and best > row.largest_in_rack:
            row.largest_in_rack, row.largest_in_rack_where = best, key[3]
        elif key[1] == "cluster":
            row.largest_in_cluster = max(row.largest_in_cluster, best)
    return [summary[k] for k in sorted(summary)]
