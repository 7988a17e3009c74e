"""The one GPU-model catalogue: which accelerator models the fleet has and how big they come.

Submission (what may be asked for and how much), governance (which models a request may name), metering
(which models a report covers) and the pages all read it from here, so a model exists everywhere the
moment its first node registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from fleet.models import AcceleratorModel, Node
from fleet.vendors import DEFAULT_VENDOR, VENDORS


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
    vendor: str = ""
    memory_gb: int = 0
    interconnect: str = ""

    def nodes_with_at_least(self, gpus: int) -> int:
        return sum(1 for size in self.node_sizes if size >= gpus)


def gpu_model_catalogue() -> dict[str, GpuModelCapacity]:
    """GPU models the fleet has, from the registered nodes (whatever their health), by name."""
    per_model: dict[str, list[tuple[int, int, int]]] = {}
    for model, gpus, cpu, mem in Node.objects.annotate(n=Count("gpus")).values_list(
            "gpu_model", "n", "cpu_milli", "memory_mib").order_by("gpu_model"):
        per_model.setdefault(model, []).append((gpus, cpu, mem))
    known = accelerator_models()
    return {m: GpuModelCapacity(m, len(rows), max(r[0] for r in rows), sum(r[0] for r in rows),
                                tuple(r[0] for r in rows), max(r[1] for r in rows), max(r[2] for r in rows),
                                *_facts(known.get(m)))
            for m, rows in per_model.items()}


def _facts(model: AcceleratorModel | None) -> tuple[str, int, str]:
    return (model.vendor, model.memory_gb, model.interconnect) if model else ("", 0, "")


def accelerator_models() -> dict[str, AcceleratorModel]:
    """The catalogue's models (vendor, memory, interconnect) by name."""
    return {m.name: m for m in AcceleratorModel.objects.all()}


def vendor_of(model: str) -> str:
    """The vendor of a model (``fleet.vendors.DEFAULT_VENDOR`` for a model the catalogue does not know); its
    record in ``fleet.vendors`` says how a job asks for its devices and how its failures read."""
    found = AcceleratorModel.objects.filter(name=model).values_list("vendor", flat=True).first()
    return found or DEFAULT_VENDOR


def note_model(name: str, vendor: str, memory_mb: int = 0) -> None:
    """Add a model a node agent reports that the catalogue does not have yet (its vendor and memory as the
    agent read them); a known model is left as the platform describes it."""
    if name and vendor in VENDORS:
        AcceleratorModel.objects.get_or_create(name=name, defaults={
            "vendor": vendor, "memory_gb": round(memory_mb / 1024) if memory_mb else 0})


