"""Read-side questions about the fleet: what can run now, per GPU model, and what the reader's tenants can
start of it (the "what can I run" page)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db import models
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from fleet import occupancy
from fleet.catalogue import accelerator_models
from fleet.models import GPU, AdminState, Health, Node, Vendor, is_healthy, is_schedulable


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
    vendor: str = ""  # from the accelerator catalogue ("" for a model it does not know)
    memory_gb: int = 0
    interconnect: str = ""

    @property
    def vendor_label(self) -> str:
        return str(dict(Vendor.choices).get(self.vendor, self.vendor))

    @property
    def allocated_pct(self) -> float:
        return 100.0 * self.allocated / self.gpus if self.gpus else 0.0


def largest_gang(free_per_node: list[int]) -> int:
    """The most GPUs one job can get from these nodes with the same number of GPUs on each node."""
    return max((g * sum(1 for f in free_per_node if f >= g) for g in set(free_per_node) if g), default=0)


class _NodeFacts(NamedTuple):
    """What the capacity summary needs of a node: plain values, so a fleet of thousands of GPUs is summed from
    tuples rather than model instances (the dashboard asks on every request)."""

    pk: int
    gpu_model: str
    cluster: str
    rack: str
    health: str
    admin_state: str
    gpus: list[tuple[int, int, str]]  # (pk, index, health) of each of its GPUs


def _node_facts() -> list[_NodeFacts]:
    gpus: dict[int, list] = defaultdict(list)
    for node_id, *gpu in GPU.objects.order_by("node_id", "index").values_list("node_id", "pk", "index", "health"):
        gpus[node_id].append(tuple(gpu))
    return [_NodeFacts(pk, model, cluster, rack, health, admin, gpus[pk]) for pk, model, cluster, rack, health, admin
            in Node.objects.values_list("pk", "gpu_model", "cluster__name", "rack", "health", "admin_state")]


def capacity_summary(with_nodes: bool = False) -> list[ModelCapacity]:
    """Cluster capacity per GPU model. Not tenant data: every signed-in user may see it. With ``with_nodes``
    each model lists its nodes, as model instances, for the fleet page."""
    held = occupancy.held_gpus()
    summary: dict[str, ModelCapacity] = {}
    free_by: dict[tuple, list[int]] = {}
    nodes = {}
    if with_nodes:
        nodes = {node.pk: node for node in Node.objects.select_related("cluster").prefetch_related("gpus")}
    for facts in _node_facts():
        row = summary.setdefault(facts.gpu_model, ModelCapacity(facts.gpu_model))
        busy = {pk for pk, index, _health in facts.gpus if index in held.get(facts.pk, ())}
        taken = len(busy)
        usable = is_schedulable(facts.admin_state, facts.health)
        free = sum(1 for pk, _index, health in facts.gpus if pk not in busy and is_healthy(health)) if usable else 0
        row.nodes += 1
        row.schedulable_nodes += usable
        row.gpus += len(facts.gpus)
        row.allocated += taken
        row.free += free
        row.unhealthy += len(facts.gpus) if not is_healthy(facts.health) else sum(
            1 for _pk, _index, health in facts.gpus if not is_healthy(health))
        if facts.admin_state != AdminState.ACTIVE and facts.health != Health.UNHEALTHY:
            row.unavailable += len(facts.gpus)
        row.largest_on_node = max(row.largest_on_node, free)
        free_by.setdefault((facts.gpu_model, "rack", facts.cluster, facts.rack), []).append(free)
        free_by.setdefault((facts.gpu_model, "cluster", facts.cluster), []).append(free)
        if facts.pk in nodes:  # added since the nodes were read: listed on the next view
            node = nodes[facts.pk]
            row.node_rows.append({"node": node, "gpus": sorted(node.gpus.all(), key=lambda g: g.index), "busy": busy,
                                  "taken": taken, "free": free})
    for name, model in accelerator_models().items():
        if name in summary:
            summary[name].vendor, summary[name].memory_gb = model.vendor, model.memory_gb
            summary[name].interconnect = model.interconnect
    for key, frees in free_by.items():
        row, best = summary[key[0]], largest_gang(frees)
        if key[1] == "rack" and best > row.largest_in_rack:
            row.largest_in_rack, row.largest_in_rack_where = best, key[3]
        elif key[1] == "cluster":
            row.largest_in_cluster = max(row.largest_in_cluster, best)
    return [summary[k] for k in sorted(summary)]


class Binds(models.TextChoices):
    """What keeps a tenant from starting more of a GPU model right now."""

    QUOTA = "quota", gettext_lazy("the tenant's limit")
    CLUSTER = "cluster", gettext_lazy("free GPUs in the cluster")
    RESERVATION = "reservation", gettext_lazy("another tenant's reservation")


@dataclass
class RunnableNow:
    """What one of the reader's tenants can start of one GPU model now, and which limit binds."""

    tenant: str
    gpu_model: str
    free: int  # healthy GPUs on schedulable nodes that nothing holds
    reserved_for_others: int
    reserved_by: str
    used: int
    guaranteed: int
    limit: int
    largest_on_node: int

    @property
    def quota_left(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def free_for_tenant(self) -> int:
        return max(0, self.free - self.reserved_for_others)

    @property
    def can_start(self) -> int:
        return min(self.free_for_tenant, self.quota_left)

    @property
    def within_guarantee(self) -> int:
        """Of ``can_start``, what the guarantee covers: the rest is borrowed and may be preempted."""
        return min(self.can_start, max(0, self.guaranteed - self.used))

    @property
    def largest_single_node_job(self) -> int:
        return min(self.largest_on_node, self.can_start)

    @property
    def binds(self) -> Binds:
        if self.quota_left <= self.free_for_tenant:
            return Binds.QUOTA
        return Binds.RESERVATION if self.reserved_for_others and self.free > self.free_for_tenant else Binds.CLUSTER

    @property
    def explanation(self) -> str:
        numbers = {"tenant": self.tenant, "model": self.gpu_model, "used": self.used, "limit": self.limit,
                   "free": self.free, "reserved": self.reserved_for_others, "holder": self.reserved_by}
        if self.binds == Binds.QUOTA:
            return _("%(tenant)s holds %(used)d of its %(limit)d %(model)s GPUs.") % numbers
        if self.binds == Binds.RESERVATION:
            return _("%(free)d %(model)s GPUs are free, but %(reserved)d of them are reserved for %(holder)s.") % (
                numbers)
        return _("Only %(free)d %(model)s GPUs are free and healthy on schedulable nodes.") % numbers


def runnable_now(user) -> list[RunnableNow]:
    """For each quota of the reader's tenants: free capacity intersected with what the quota still allows
    and what other tenants' reservations keep (health and cordons are in ``free``)."""
    capacity = {row.gpu_model: row for row in capacity_summary()}
    rows = []
    for room in occupancy.headroom(user):
        model = capacity.get(room.gpu_model)
        rows.append(RunnableNow(room.tenant, room.gpu_model, model.free if model else 0, room.reserved_for_others,
                                room.reserved_by, room.used, room.guaranteed, room.limit,
                                model.largest_on_node if model else 0))
    return rows
