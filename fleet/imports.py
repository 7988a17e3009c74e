"""A cluster's own inventory, applied to the fleet: the nodes, GPUs and outside work its scheduler reports.

A cluster that runs its own scheduler (Slurm) knows its nodes better than the portal: which exist, how many GPUs
of which model each has, which are drained or down and why, and which GPUs are held by work submitted to it
directly. The executor reads that (``scheduling.executors.slurm.inventory``) and hands it here as typed rows; only
this module writes the fleet's rows from it, by these rules:

- **Nodes** are created with their GPUs (a deterministic UUID per cluster, node and index; memory from the
  catalogue's model) and kept in step (model, GPU count, CPUs, memory). New nodes get the cluster's name as
  datacenter and network domain and their first partition as rack; later changes of those labels are an admin's.
  A node the scheduler no longer lists is never deleted (jobs and accounting refer to it, and its history stays):
  it becomes unhealthy with that reason, and healthy again if it comes back.
- **Admin state**: the scheduler's drain becomes ``draining``, with its reason in ``external_reason``; when the
  scheduler resumes the node, it becomes ``active`` again. But a state a portal admin set is never overwritten:
  whoever set a node's admin state is the actor of its last admin event, and the import changes the state only
  while it is ``active`` or while its last admin event is the cluster's own (``data["source"] == "cluster"``). A
  portal admin's cordon or drain therefore stands until a portal admin lifts it. Each change is a node event, an
  audit record (the actor is the portal) and a ``capacity_changed`` signal with a line for the running jobs.
- **Health**: what the scheduler calls down, failed or not responding makes the node unhealthy (a node event and
  a ``hardware_fault``, as a lost agent does). The node becomes healthy again when the scheduler says so, but only
  where the unhealthiness was the cluster's (its last health event); a node agent's verdict is the poller's.
- **Outside work** (jobs the portal did not submit) is replaced wholesale: the rows are what holds GPUs now.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet import signals
from fleet.catalogue import accelerator_models
from fleet.models import GPU, AdminState, Cluster, FaultKind, Health, Node, NodeEvent, OutsideWork
from gpuportal.storage import pagecache
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase

#: ``NodeEvent.data["source"]`` of the events this module writes: the state came from the cluster's scheduler.
CLUSTER_SOURCE = "cluster"

#: What an import writes of a node (the poller writes the rest at the same time: readings, versions, last seen).
NODE_FIELDS = ["gpu_model", "cpu_milli", "memory_mib", "external_state", "external_reason", "health", "missed_polls",
               "good_polls", "last_updated"]
#: What an import may change of a node (saved, and the page caches told, only when one of them did).
SHOWN_FIELDS = [name for name in NODE_FIELDS if name != "last_updated"]

#: The longest GPU UUID the fleet stores (``GPU.uuid``); longer names are replaced by a digest.
MAX_UUID = 64

DRAINED = gettext_noop("%(scheduler)s drains the node: %(reason)s")
DRAINED_NO_REASON = gettext_noop("%(scheduler)s drains the node (it gave no reason).")
RESUMED = gettext_noop("%(scheduler)s returned the node to service.")
DOWN = gettext_noop("%(scheduler)s says the node is %(state)s: %(reason)s")
DOWN_NO_REASON = gettext_noop("%(scheduler)s says the node is %(state)s (it gave no reason).")
UP = gettext_noop("%(scheduler)s says the node is up again (%(state)s).")
GONE = gettext_noop("%(scheduler)s no longer lists this node.")
JOB_NOTE = gettext_noop("Node %(node)s is being drained in %(scheduler)s: %(reason)s. This job runs on to its end "
                        "(it is not requeued); no new job is placed on the node.")


@dataclass(frozen=True)
class ImportedNode:
    """One node as the cluster's scheduler reports it, already in the fleet's terms: ``admin_state`` is what the
    scheduler wants (active or draining), ``health`` what it says (healthy or unhealthy); ``external_state`` and
    ``external_reason`` its own words, shown beside them."""

    name: str
    gpu_model: str
    gpu_count: int
    cpus: int
    memory_mib: int
    admin_state: str = AdminState.ACTIVE
    health: str = Health.HEALTHY
    external_state: str = ""
    external_reason: str = ""
    partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImportedHold:
    """Work the portal did not submit, holding GPUs (by index) of one node."""

    node: str
    external_id: str
    user_name: str
    account: str
    name: str
    gpu_indices: tuple[int, ...]
    started_at: datetime | None = None
    time_limit_seconds: int | None = None


@dataclass
class InventoryChange:
    """What one import changed, for the caller's report (names of nodes; a change as "node: before -> after")."""

    created: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    admin_changes: list[str] = field(default_factory=list)
    health_changes: list[str] = field(default_factory=list)
    #: nodes where the scheduler's drain or resume was not applied: a portal admin's state stands
    admin_kept: list[str] = field(default_factory=list)
    #: node names the cluster reports that another cluster's node already has (not imported)
    skipped: list[str] = field(default_factory=list)
    outside_work: int = 0
    #: anything a page shows changed (a node's state, reason, size, or the outside work): cached pages are stale
    changed: bool = False
    nodes: int = 0
    gpus: int = 0
    models: dict[str, int] = field(default_factory=dict)


def gpu_uuid(cluster: Cluster, node: str, index: int) -> str:
    """A GPU's UUID where no agent has read the device's own: stable across imports, unique in the fleet."""
    uuid = f"slurm-{cluster.name}-{node}-{index}"
    if len(uuid) <= MAX_UUID:
        return uuid
    return f"slurm-{hashlib.sha256(f'{cluster.name}/{node}'.encode()).hexdigest()[:40]}-{index}"


def apply_inventory(cluster: Cluster, nodes: list[ImportedNode], holds: list[ImportedHold],
                    now: datetime) -> InventoryChange:
    """Apply the scheduler's view of ``cluster`` (the module's rules), in one transaction."""
    change = InventoryChange()
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()  # one import of a cluster at a time
        existing = _cluster_nodes(cluster)
        taken = set(Node.objects.filter(name__in=[n.name for n in nodes]).exclude(cluster=cluster)
                    .values_list("name", flat=True))
        memory = {name: model.memory_gb * 1024 for name, model in accelerator_models().items()}
        touched: dict[int, Node] = {}
        for imported in nodes:
            if imported.name in taken:
                change.skipped.append(imported.name)
                continue
            node = existing.get(imported.name)
            if node is None:
                node = _create(cluster, imported, change)
            _update(cluster, node, imported, now, change)
            _sync_gpus(cluster, node, imported, memory.get(imported.gpu_model, 0))
            touched[node.pk] = node
            change.nodes += 1
            change.gpus += imported.gpu_count
            change.models[imported.gpu_model] = change.models.get(imported.gpu_model, 0) + imported.gpu_count
        for node in existing.values():
            if node.pk not in touched:
                _gone(cluster, node, now, change)
        change.outside_work = _replace_outside_work(cluster, {n.name: n for n in touched.values()}, holds, now,
                                                     change)
        if change.changed or change.created or change.gone or change.admin_changes or change.health_changes:
            pagecache.data_changed()  # an import every few seconds that finds nothing new leaves the caches warm
    return change


def _cluster_nodes(cluster: Cluster) -> dict[str, Node]:
    """The cluster's nodes, each with the source of its last admin and health events ("" when a person's)."""
    def last(kind: str):
        return Subquery(NodeEvent.objects.filter(node=OuterRef("pk"), kind=kind, gpu__isnull=True)
                        .order_by("-at", "-id").values("data__source")[:1])
    rows = Node.objects.filter(cluster=cluster).annotate(
        admin_source=last(NodeEvent.Kind.ADMIN), health_source=last(NodeEvent.Kind.HEALTH))
    return {node.name: node for node in rows.prefetch_related("gpus")}


def _scheduler(cluster: Cluster) -> str:
    return str(cluster.get_executor_display())


def _create(cluster: Cluster, imported: ImportedNode, change: InventoryChange) -> Node:
    rack = imported.partitions[0] if imported.partitions else cluster.name
    node = Node.objects.create(cluster=cluster, name=imported.name, gpu_model=imported.gpu_model,
                               datacenter=cluster.name[:64], rack=rack[:64], network_domain=cluster.name[:64])
    node.admin_source = node.health_source = None
    change.created.append(node.name)
    return node


def _event(node: Node, now, kind: str, before: str, after: str, text: Phrase) -> None:
    NodeEvent.objects.create(node=node, at=now, kind=kind, from_state=before, to_state=after, reason=text,
                             data={"source": CLUSTER_SOURCE, **phrases.data_of(text)})


def _update(cluster: Cluster, node: Node, imported: ImportedNode, now, change: InventoryChange) -> None:
    before = [getattr(node, name) for name in SHOWN_FIELDS]
    node.gpu_model = imported.gpu_model
    node.cpu_milli, node.memory_mib = imported.cpus * 1000, imported.memory_mib
    node.external_state = imported.external_state[:100]
    node.external_reason = imported.external_reason
    _apply_admin_state(cluster, node, imported.admin_state, imported.external_reason, now, change)
    if imported.health == Health.UNHEALTHY and node.health != Health.UNHEALTHY:
        text = Phrase(DOWN if imported.external_reason else DOWN_NO_REASON, {
            "scheduler": _scheduler(cluster), "state": imported.external_state, "reason": imported.external_reason})
        _set_health(node, Health.UNHEALTHY, text, now, change)
    elif imported.health != Health.UNHEALTHY and node.health == Health.UNHEALTHY \
            and node.health_source == CLUSTER_SOURCE:
        text = Phrase(UP, {"scheduler": _scheduler(cluster), "state": imported.external_state})
        _set_health(node, Health.HEALTHY, text, now, change)
    if [getattr(node, name) for name in SHOWN_FIELDS] != before:
        change.changed = True
        node.save(update_fields=NODE_FIELDS)


def _apply_admin_state(cluster: Cluster, node: Node, wanted: str, reason: str, now,
                       change: InventoryChange) -> None:
    """Follow the scheduler's drain or resume unless a portal admin's state stands (the module's rules)."""
    if node.admin_state == wanted:
        return
    if node.admin_state != AdminState.ACTIVE and node.admin_source != CLUSTER_SOURCE:
        change.admin_kept.append(node.name)
        return
    before, scheduler = node.admin_state, _scheduler(cluster)
    if wanted == AdminState.ACTIVE:
        text = Phrase(RESUMED, {"scheduler": scheduler})
    else:
        text = Phrase(DRAINED if reason else DRAINED_NO_REASON, {"scheduler": scheduler, "reason": reason})
    node.admin_state, node.admin_source = wanted, CLUSTER_SOURCE
    node.save(update_fields=["admin_state", "last_updated"])
    _event(node, now, NodeEvent.Kind.ADMIN, before, wanted, text)
    audit.record(AuditAction.NODE_ADMIN, node, actor=None, reason=text, before={"admin_state": before},
                 after={"admin_state": wanted, "source": CLUSTER_SOURCE})
    note = Phrase(JOB_NOTE, {"node": node.name, "scheduler": scheduler, "reason": reason or "—"}) \
        if wanted == AdminState.DRAINING else ""
    signals.capacity_changed.send(sender=Node, node=node, actor=None, job_note=note)
    change.admin_changes.append(f"{node.name}: {before} -> {wanted}")


def _set_health(node: Node, state: str, text: Phrase, now, change: InventoryChange) -> None:
    before = node.health
    node.health, node.health_source = state, CLUSTER_SOURCE
    node.missed_polls = node.good_polls = 0
    _event(node, now, NodeEvent.Kind.HEALTH, before, state, text)
    if state == Health.UNHEALTHY:
        signals.hardware_fault.send(sender=Node, category=FaultKind.NODE_FAULT, reason=str(text), node=node,
                                    gpu_id=None, at=now, evidence=node.external_reason)
    signals.capacity_changed.send(sender=Node, node=node, actor=None, job_note="")
    change.health_changes.append(f"{node.name}: {before} -> {state}")


def _sync_gpus(cluster: Cluster, node: Node, imported: ImportedNode, memory_mb: int) -> None:
    """The node's GPUs 0..count-1 of the imported model; a GPU beyond the count is removed unless a job's
    allocation refers to it (then it stays, unhealthy, so that no new work lands on it)."""
    have = {gpu.index: gpu for gpu in node.gpus.all()}
    GPU.objects.bulk_create(GPU(node=node, index=i, uuid=gpu_uuid(cluster, node.name, i), model=imported.gpu_model,
                                memory_mb=memory_mb) for i in range(imported.gpu_count) if i not in have)
    stale = [gpu.pk for i, gpu in have.items() if i < imported.gpu_count
             and (gpu.model, gpu.memory_mb) != (imported.gpu_model, memory_mb or gpu.memory_mb)]
    GPU.objects.filter(pk__in=stale).update(model=imported.gpu_model, memory_mb=memory_mb)
    extra = GPU.objects.filter(node=node, index__gte=imported.gpu_count)
    extra.filter(allocations__isnull=True).delete()
    extra.exclude(health=Health.UNHEALTHY).update(health=Health.UNHEALTHY)


def _gone(cluster: Cluster, node: Node, now, change: InventoryChange) -> None:
    """A node the scheduler no longer lists: unhealthy, with that reason (never deleted)."""
    change.gone.append(node.name)
    if node.health == Health.UNHEALTHY and not node.external_state:
        return
    node.external_state, node.external_reason = "", ""
    if node.health != Health.UNHEALTHY:
        _set_health(node, Health.UNHEALTHY, Phrase(GONE, {"scheduler": _scheduler(cluster)}), now, change)
    node.save(update_fields=NODE_FIELDS)


def _replace_outside_work(cluster: Cluster, nodes: dict[str, Node], holds: list[ImportedHold], now,
                          change: InventoryChange) -> int:
    """The cluster's outside work becomes exactly ``holds`` (on nodes it has); the nodes whose held GPUs changed
    are announced, so that a pass may use GPUs outside work gave back."""
    before = {(row.node_id, row.external_id, tuple(row.gpu_indices))
              for row in OutsideWork.objects.filter(cluster=cluster)}
    rows: dict[tuple[int, str], OutsideWork] = {}
    for hold in holds:
        node = nodes.get(hold.node)
        if node is None or (node.pk, hold.external_id) in rows:
            continue
        rows[(node.pk, hold.external_id)] = OutsideWork(
            cluster=cluster, node=node, external_id=hold.external_id[:64], user_name=hold.user_name[:64],
            account=hold.account[:64], name=hold.name[:200], gpu_indices=sorted(set(hold.gpu_indices)),
            started_at=hold.started_at, time_limit_seconds=hold.time_limit_seconds, seen_at=now)
    OutsideWork.objects.filter(cluster=cluster).delete()
    OutsideWork.objects.bulk_create(rows.values())
    after = {(row.node_id, row.external_id, tuple(row.gpu_indices)) for row in rows.values()}
    by_id = {node.pk: node for node in nodes.values()}
    change.changed |= before != after
    for node_id in sorted({key[0] for key in before ^ after}):
        if node_id in by_id:
            signals.capacity_changed.send(sender=Node, node=by_id[node_id], actor=None, job_note="")
    return len(rows)
