"""How fragmented the free GPUs are now, per cluster and GPU model (reads), for ``/metrics`` and the operations
dashboard.

The measure is FGD's (``engine/fragmentation.py``): the free GPU capacity that a task drawn from the target
workload could not use. The target workload is what the portal was asked for lately: the shapes (GPUs per node,
share of a GPU, accepted models) of the jobs submitted in the last ``WORKLOAD_DAYS`` days. CPU and memory are left
out here (``inf``): the figure says how the GPUs themselves are cut up.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from fleet.models import GPU, Node
from scheduling.engine.fragmentation import WHOLE, TaskShape, Workload
from scheduling.models import ACTIVE_STATUSES, Job, JobAllocation

#: The window of submissions whose shapes make the target workload, and the most jobs read from it.
WORKLOAD_DAYS = 7
WORKLOAD_JOBS = 5000


@dataclass(frozen=True)
class FragmentationFigure:
    cluster: str
    gpu_model: str
    free_gpus: float
    fragmented_gpus: float

    @property
    def fragmented_share(self) -> float | None:
        return self.fragmented_gpus / self.free_gpus if self.free_gpus else None


def recent_workload(now=None) -> Workload | None:
    """The shapes of the jobs submitted in the window, by popularity; None when nothing was submitted."""
    since = (now or timezone.now()) - timedelta(days=WORKLOAD_DAYS)
    rows = (Job.objects.filter(submitted_at__gte=since).order_by("-submitted_at")
            .values_list("gpus_per_node", "gpu_milli", "gpu_model", "accept_models")[:WORKLOAD_JOBS])
    shapes = [TaskShape(gpus, milli, models=tuple(accept or (model,))) for gpus, milli, model, accept in rows]
    return Workload.from_tasks(shapes) if shapes else None


def fragmentation_now(now=None) -> list[FragmentationFigure]:
    """Free and fragmented GPUs per cluster and model, over the schedulable nodes' healthy GPUs."""
    workload = recent_workload(now)
    if workload is None:
        return []
    held: dict[int, float] = defaultdict(float)
    for gpu_id, fraction in JobAllocation.objects.filter(
            released_at__isnull=True, job__status__in=ACTIVE_STATUSES).values_list("gpu_id", "fraction"):
        held[gpu_id] += float(fraction)
    free_by_node: dict[int, list[int]] = defaultdict(list)
    for gpu in GPU.objects.filter(node__in=Node.objects.schedulable()).only("id", "node_id", "health"):
        if gpu.healthy:
            free_by_node[gpu.node_id].append(max(0, round((1 - held[gpu.pk]) * WHOLE)))
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for node in Node.objects.filter(pk__in=free_by_node).select_related("cluster").only(
            "id", "gpu_model", "cluster__name"):
        free = free_by_node[node.pk]
        entry = totals[(node.cluster.name, node.gpu_model)]
        entry[0] += sum(free) / WHOLE
        entry[1] += workload.node_fragmentation(free, math.inf, math.inf, node.gpu_model)
    return [FragmentationFigure(cluster, model, round(free, 3), round(fragmented, 3))
            for (cluster, model), (free, fragmented) in sorted(totals.items())]
