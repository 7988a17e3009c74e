"""The engine's input and output types: frozen dataclasses of plain values."""

from __future__ import annotations

from dataclasses import dataclass, field

from .reasons import WaitReason


@dataclass(frozen=True)
class NodeSnapshot:
    """One node as the scheduler sees it. ``gpu_indices`` lists the GPUs that may take work (healthy,
    not cordoned); a node that may take no work at all has ``schedulable=False``."""

    id: int
    name: str
    gpu_model: str
    gpu_indices: tuple[int, ...]
    cluster: str = "default"
    datacenter: str = ""
    rack: str = ""
    network_domain: str = ""
    schedulable: bool = True


@dataclass(frozen=True)
class Placement:
    """GPUs given to a job on one node."""

    node_id: int
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True)
class RunningJob:
    """A job that holds GPUs now (admitted, dispatching or running)."""

    id: int
    tenant: str
    gpu_model: str
    placements: tuple[Placement, ...]
    priority: int = 0

    @property
    def gpus(self) -> int:
        return sum(len(p.gpu_indices) for p in self.placements)


@dataclass(frozen=True)
class WaitingJob:
    """A queued job asking for ``nodes`` x ``gpus_per_node`` GPUs of one model, all at once."""

    id: int
    tenant: str
    gpu_model: str
    gpus_per_node: int
    nodes: int = 1
    priority: int = 0
    task_type: str = ""
    submitted_at: float = 0.0

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def rank_key(self) -> tuple:
        """Queue order: higher priority first, then earlier submission, then lower id (stable)."""
        return (-self.priority, self.submitted_at, self.id)


@dataclass(frozen=True)
class QuotaSnapshot:
    tenant: str
    gpu_model: str
    guaranteed: int
    limit: int


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeSnapshot, ...]
    running: tuple[RunningJob, ...] = ()
    waiting: tuple[WaitingJob, ...] = ()
    quotas: tuple[QuotaSnapshot, ...] = ()
    now: float = 0.0


@dataclass(frozen=True)
class Admission:
    job_id: int
    placements: tuple[Placement, ...]


@dataclass(frozen=True)
class WaitDecision:
    """Why one job still waits: one reason code, the numbers behind it, the sentence, and its place."""

    job_id: int
    reason: WaitReason
    params: dict
    message: str
    position: int
    tenant_position: int
    estimated_start: float | None = None


@dataclass
class PassResult:
    admissions: list[Admission] = field(default_factory=list)
    waiting: list[WaitDecision] = field(default_factory=list)

    def wait_for(self, job_id: int) -> WaitDecision | None:
        return next((w for w in self.waiting if w.job_id == job_id), None)

    def admitted_ids(self) -> set[int]:
        return {a.job_id for a in self.admissions}
