"""A Slurm cluster's inventory read through slurmrestd and handed to the fleet (``fleet.imports``).

Slurm's words become the fleet's here, and only here:

- **GRES types → catalogue models**: the cluster's explicit mapping (``Cluster.slurm_models``, a type to a model)
  first, then the catalogue's model of the same name whatever its case ("h100" → "H100"); a type the catalogue
  does not know keeps its own name in upper case (the catalogue then lists it as a model of the fleet). Nodes
  without GPUs are not imported: the portal places GPU work only.
- **Node states**: a ``DRAIN`` flag (Slurm's drained and draining) is the admin state ``draining``; a node that is
  ``down`` or ``fail``, or flagged ``FAIL``, ``FAILING`` or ``NOT_RESPONDING``, is unhealthy. Slurm's state and
  flags in its own terms ("drained", "draining", "down+not_responding") and its reason are kept beside them.
- **Outside work**: a running Slurm job that is not the portal's (``ownership``: its id is one the portal stored
  for the job its comment names; a comment alone proves nothing) holds the GPUs its ``gres_detail`` names, on
  each of its nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.utils import timezone

from fleet.catalogue import accelerator_models
from fleet.imports import ImportedHold, ImportedNode, InventoryChange, apply_inventory
from fleet.models import AdminState, Cluster, Health
from scheduling.executors.slurm.client import SlurmClient
from scheduling.executors.slurm.ownership import portal_jobs_of
from scheduling.executors.slurm.shapes import SlurmJob, SlurmNode

#: Slurm's node flags that mean "drain": set by ``scontrol update state=drain`` and shown as drained/draining.
DRAIN_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED"})
#: States and flags under which a node cannot run work: unhealthy in the fleet.
DOWN_STATES = frozenset({"down", "fail"})
DOWN_FLAGS = frozenset({"FAIL", "FAILING", "NOT_RESPONDING"})
#: Job states in which a job holds its GPUs.
HOLDING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})
#: The model of untyped GPUs ("gpu:4") unless the cluster's mapping names one under this key.
UNTYPED = "gpu"


@dataclass(frozen=True)
class InventoryReport:
    """What one import read and changed: the figures ``connect_slurm`` prints, and the fleet's change."""

    cluster: str
    nodes: int
    gpus: int
    models: dict[str, int]
    api_version: str
    slurm_version: str
    without_gpus: tuple[str, ...] = ()
    change: InventoryChange = field(default_factory=InventoryChange)

    def summary(self) -> dict:
        return {"cluster": self.cluster, "nodes": self.nodes, "gpus": self.gpus, "models": self.models,
                "api_version": self.api_version, "slurm_version": self.slurm_version}


def model_for(gres_type: str, overrides: dict[str, str], catalogue: dict[str, str]) -> str:
    """The catalogue model of a GRES type: ``overrides`` (lower-case type → model) first, then the catalogue's
    names (lower case → name), else the type itself in upper case."""
    key = (gres_type or UNTYPED).lower()
    return overrides.get(key) or catalogue.get(key) or key.upper()


def describe_state(node: SlurmNode) -> str:
    """Slurm's state of the node in its own words, as ``sinfo`` says them: "drained" (a drain with nothing left
    running), "draining", else the state, with the other flags after "+"."""
    drain = DRAIN_FLAGS & set(node.flags)
    if drain:
        word = "drained" if node.state in ("idle", "down") else "draining"
        if node.state == "down":
            word += "+down"
    else:
        word = node.state
    return word + "".join(f"+{flag.lower()}" for flag in node.flags if flag not in DRAIN_FLAGS)


def imported_node(node: SlurmNode, model: str) -> ImportedNode:
    flags = set(node.flags)
    unhealthy = node.state in DOWN_STATES or bool(DOWN_FLAGS & flags)
    return ImportedNode(
        name=node.name, gpu_model=model, gpu_count=node.gpus, cpus=node.cpus, memory_mib=node.real_memory_mib,
        admin_state=AdminState.DRAINING if DRAIN_FLAGS & flags else AdminState.ACTIVE,
        health=Health.UNHEALTHY if unhealthy else Health.HEALTHY, external_state=describe_state(node),
        external_reason=node.reason or "", partitions=tuple(node.partitions))


def holds_of(job: SlurmJob, portal: Iterable[int] = ()) -> list[ImportedHold]:
    """The GPUs a job the portal did not submit holds, one row per node (none for a portal job, whose id is in
    ``portal``, a job that holds nothing now, or one that holds no GPU)."""
    if job.state not in HOLDING_STATES or job.job_id in portal:
        return []
    limit = job.time_limit_minutes * 60 if job.time_limit_minutes else None
    return [ImportedHold(node=node, external_id=str(job.job_id), user_name=job.user, account=job.account,
                         name=job.name, gpu_indices=tuple(job.gpus_by_node[node]), started_at=job.start_time,
                         time_limit_seconds=limit)
            for node in job.nodes if job.gpus_by_node.get(node)]


def import_inventory(cluster: Cluster) -> InventoryReport:
    """Read the cluster's nodes and jobs, apply them to the fleet, and note the REST and Slurm versions and the
    time on the cluster. Raises ``SlurmError`` when slurmrestd cannot be read (nothing is changed then)."""
    client = SlurmClient(cluster)
    slurm_nodes, jobs = client.nodes(), client.jobs()
    overrides = {str(k).lower(): str(v) for k, v in (cluster.slurm_models or {}).items()}
    catalogue = {name.lower(): name for name in accelerator_models()}
    nodes = [imported_node(n, model_for(n.gpu_type, overrides, catalogue)) for n in slurm_nodes if n.gpus]
    portal = portal_jobs_of(cluster, [job for job in jobs if job.state in HOLDING_STATES])
    holds = [hold for job in jobs for hold in holds_of(job, portal)]
    now = timezone.now()
    change = apply_inventory(cluster, nodes, holds, now)
    cluster.slurm_api_version, cluster.slurm_version, cluster.slurm_synced_at = (
        client.api_version, client.slurm_version, now)
    Cluster.objects.filter(pk=cluster.pk).update(slurm_api_version=cluster.slurm_api_version,
                                                 slurm_version=cluster.slurm_version, slurm_synced_at=now)
    return InventoryReport(cluster=cluster.name, nodes=change.nodes, gpus=change.gpus, models=change.models,
                           api_version=cluster.slurm_api_version, slurm_version=cluster.slurm_version,
                           without_gpus=tuple(n.name for n in slurm_nodes if not n.gpus), change=change)
