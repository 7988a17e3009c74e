"""What the benchmarks that store a fixture share: a cluster of their own, emptied before it is filled again."""

from __future__ import annotations

from demo.world import seed_structure
from fleet.models import Cluster, GpuReading, Node
from scheduling.models import Job


def fresh_cluster(name: str, description: str) -> Cluster:
    """The benchmark's cluster ``name``, new: what an earlier run left on it (its jobs, readings and nodes) is
    deleted first, and the demo's structure (tenants, task types, the catalogue) is there to build on."""
    Job.objects.filter(cluster__name=name).delete()
    GpuReading.objects.filter(gpu__node__cluster__name=name).delete()
    Node.objects.filter(cluster__name=name).delete()
    Cluster.objects.filter(name=name).delete()
    seed_structure()
    return Cluster.objects.create(name=name, description=description)
