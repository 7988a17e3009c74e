"""The one GPU-model catalogue: which accelerator models the fleet has and how big they come.

Submission (what may be asked for and how much), governance (which models a request may name), metering
(which models a report covers) and the pages all read it from here, so a model exists everywhere the
moment its first node registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from .models import Node


@dataclass(frozen=True)
class GpuModelCapacity:
    """What a GPU model offers: how many nodes have it, the most GPUs, CPU and memory of any one of them."""

    gpu_model: str
    nodes: int
    max_gpus_per_node: int
    total_gpus: int
    node_sizes: tuple[int, ...] = ()
    max_cpu_milli: int = 0
    max_memory_mib: int = 0

    def nodes_with_at_least(self, gpus: int) -> int:
        return sum(1 for size in self.node_sizes if size >= gpus)


def gpu_model_catalogue() -> dict[str, GpuModelCapacity]:
    """GPU models the fleet has, from the registered nodes (whatever their health), by name."""
    per_model: dict[str, list[tuple[int, int, int]]] = {}
    for model, gpus, cpu, mem in Node.objects.annotate(n=Count("gpus")).values_list(
            "gpu_model", "n", "cpu_milli", "memory_mib").order_by("gpu_model"):
        per_model.setdefault(model, []).append((gpus, cpu, mem))
    return {m: GpuModelCapacity(m, len(rows), max(r[0] for r in rows), sum(r[0] for r in rows),
                                tuple(r[0] for r in rows), max(r[1] for r in rows), max(r[2] for r in rows))
            for m, rows in per_model.items()}


def gpu_models() -> list[str]:
    """The model names, sorted: for choice lists."""
    return sorted(Node.objects.values_list("gpu_model", flat=True).distinct())
