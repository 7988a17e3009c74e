"""The engine's input and output types: frozen dataclasses of plain values.

Times are seconds since the epoch (floats); GPU shares are in thousandths of a GPU (``gpu_milli``, 1000 =
a whole GPU), CPU in millicores and memory in MiB, as Kubernetes counts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduling.engine.fragmentation import TaskShape
from scheduling.engine.policy import Policy
from scheduling.engine.reasons import WaitReason

ANY_MODEL = "*"
WHOLE = 1000


@dataclass(frozen=True)
class NodeSnapshot:
    """One node. ``gpu_indices`` lists the GPUs that may take work (healthy); ``gpu_total`` counts all of
    them (for "can this request ever fit"); ``schedulable`` is False for unhealthy, cordoned, draining nodes.
    ``cpu_milli`` / ``memory_mib`` of 0 mean "not accounted"."""

    id: int
    name: str
    gpu_model: str
    gpu_indices: tuple[int, ...]
    cluster: str = "default"
    datacenter: str = ""
    rack: str = ""
    network_domain: str = ""
    schedulable: bool = True
    gpu_total: int | None = None
    cpu_milli: int = 0
    memory_mib: int = 0

    @property
    def total_gpus(self) -> int:
        return self.gpu_total if self.gpu_total is not None else len(self.gpu_indices)


@dataclass(frozen=True)
class Placement:
    """GPUs given to a job on one node; ``gpu_milli`` is the share of each (1000 = whole)."""

    node_id: int
    gpu_indices: tuple[int, ...]
    gpu_milli: int = WHOLE


@dataclass(frozen=True)
class RunningJob:
    """A job that holds GPUs now (admitted, dispatching or running)."""

    id: int
    tenant: str
    gpu_model: str
    placements: tuple[Placement, ...]
    priority: int = 0
    preemptible: bool = True
    task_type: str = ""
    submitted_at: float = 0.0
    started_at: float = 0.0
    max_runtime: float = math.inf
    expected_runtime: float | None = None
    cpu_milli: int = 0  # per node
    memory_mib: int = 0  # per node
    group: str = ""  # the array it is a task of (counts against the array's parallelism)
    owner: int = 0  # who submitted it (0: unknown), so that a waiting job may spare its owner's own jobs

    @property
    def gpus(self) -> float:
        return sum(len(p.gpu_indices) * p.gpu_milli for p in self.placements) / WHOLE

    @property
    def quota_gpus(self) -> int:
        """What it counts against its tenant's quota: one per GPU held, a share included (tenants.quotas)."""
        return sum(len(p.gpu_indices) for p in self.placements)

    def end(self, use_expected: bool = True) -> float:
        runtime = self.max_runtime
        if use_expected and self.expected_runtime is not None:
            runtime = min(runtime, self.expected_runtime)
        return self.started_at + runtime


@dataclass(frozen=True)
class OutsideHold:
    """GPUs of one node held by work the portal did not submit (a job submitted to the cluster's own scheduler
    directly, e.g. with ``sbatch``). The engine treats it as running work it may not touch: the GPUs are taken,
    it counts against no tenant's quota and no fair share, it is never a preemption victim, and it frees its
    GPUs at ``started_at + time_limit`` (infinite when the cluster told no limit: the estimate then says
    "unknown" rather than guess). It is kept apart from ``RunningJob`` so that nothing that walks the portal's
    jobs (quotas, fair share, victims, previews by job id) can meet it by mistake. ``scheduler`` is the name the
    wait reasons give the place it was submitted to ("Slurm"); ``external_id`` only tells holds apart."""

    node_id: int
    gpu_indices: tuple[int, ...]
    external_id: str = ""
    started_at: float = 0.0
    time_limit: float = math.inf
    scheduler: str = ""

    def end(self) -> float:
        return self.started_at + self.time_limit


@dataclass(frozen=True)
class Dependency:
    """A waiting job's dependency on another job (``engine.dependencies``), as the load step found it this pass:
    its ``state`` (met, waiting, never), the status of the job it names (of an array: its least advanced unfinished
    task) and the unfinished jobs whose ends it waits for (their ends chain into the estimate)."""

    on_job: int
    condition: str
    state: str
    on_status: str
    waits_on: tuple[int, ...] = ()


@dataclass(frozen=True)
class WaitingJob:
    """A queued job asking for ``nodes`` x ``gpus_per_node`` GPUs (each a ``gpu_milli`` share) of one model
    (``"*"``: any model), all at once, within a ``topology`` domain."""

    id: int
    tenant: str
    gpu_model: str
    gpus_per_node: int
    nodes: int = 1
    priority: int = 0
    task_type: str = ""
    submitted_at: float = 0.0
    gpu_milli: int = WHOLE
    cpu_milli: int = 0  # per node
    memory_mib: int = 0  # per node
    topology: str = "any"  # same_node | same_rack | same_network_domain | any
    max_runtime: float = math.inf
    expected_runtime: float | None = None
    preemptible: bool = True
    held: str = ""  # "user" or "admin" when held
    awaiting_approval: bool = False
    accept_models: tuple[str, ...] = ()
    avoid_nodes: tuple[int, ...] = ()  # nodes a retry must not use (where the last attempt hit a fault)
    group: str = ""  # the array it is a task of
    group_limit: int = 0  # the most tasks of that array running at once (0: no limit)
    owner: int = 0  # who submitted it (0: unknown)
    spare_owner: bool = False  # never preempt a running job of the same owner to start it (it waits instead)
    after: tuple[Dependency, ...] = ()  # the jobs it waits for (``engine.dependencies``)

    @property
    def gpus(self) -> float:
        return self.gpus_per_node * self.nodes * self.gpu_milli / WHOLE

    @property
    def quota_gpus(self) -> int:
        """What it will count against its tenant's quota: one per GPU, a share included (tenants.quotas)."""
        return self.gpus_per_node * self.nodes

    @property
    def slots(self) -> int:
        """Whole GPUs this job occupies for capacity estimates (a share counts as one GPU)."""
        return max(1, self.gpus_per_node * self.nodes) if self.gpu_milli >= WHOLE else 1

    @property
    def fractional(self) -> bool:
        return self.gpu_milli < WHOLE

    @property
    def runtime_estimate(self) -> float:
        runtime = self.max_runtime if self.expected_runtime is None else min(self.max_runtime, self.expected_runtime)
        return runtime if math.isfinite(runtime) else 7 * 86400.0

    def models(self, known) -> tuple[str, ...]:
        if self.accept_models:
            return tuple(m for m in self.accept_models if m in known)
        if self.gpu_model == ANY_MODEL:
            return tuple(sorted(known))
        return (self.gpu_model,) if self.gpu_model in known else ()


@dataclass(frozen=True)
class QuotaSnapshot:
    tenant: str
    gpu_model: str
    guaranteed: float
    limit: float
    department: str = ""


@dataclass(frozen=True)
class DepartmentQuota:
    """A cap on the sum of a department's tenants' GPUs of one model."""

    name: str
    gpu_model: str
    limit: float


@dataclass(frozen=True)
class Reservation:
    """``gpus`` GPUs of ``gpu_model`` held for ``tenant`` from ``start`` to ``end``."""

    id: int
    tenant: str
    gpu_model: str
    gpus: int
    start: float
    end: float


@dataclass(frozen=True)
class UsageRecord:
    """GPU-seconds a tenant used, ending at ``at`` (finished jobs, or a day's rollup)."""

    tenant: str
    at: float
    gpu_seconds: float


@dataclass(frozen=True)
class TenantInfo:
    name: str
    weight: float = 1.0


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeSnapshot, ...]
    running: tuple[RunningJob, ...] = ()
    waiting: tuple[WaitingJob, ...] = ()
    quotas: tuple[QuotaSnapshot, ...] = ()
    departments: tuple[DepartmentQuota, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    usage: tuple[UsageRecord, ...] = ()
    tenants: tuple[TenantInfo, ...] = ()
    now: float = 0.0
    policy: Policy = field(default_factory=Policy)
    outside: tuple[OutsideHold, ...] = ()  # GPUs held by work the portal did not submit
    #: The site's recent job shapes with their counts (``scheduling/passes/workload.py``): the target workload
    #: single-node placement packs against. Empty: the waiting and running jobs' shapes stand in.
    history: tuple[tuple[TaskShape, float], ...] = ()


@dataclass(frozen=True)
class Admission:
    job_id: int
    placements: tuple[Placement, ...]
    backfilled: bool = False
    borrowing: bool = False


@dataclass(frozen=True)
class Preemption:
    """A running job stopped so that ``preemptor_id`` can run, with the rule that allowed it."""

    victim_id: int
    victim_tenant: str
    preemptor_id: int
    preemptor_tenant: str
    rule: str  # "reclaim within guarantee" | "higher priority class"
    message: str


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
    #: The likely start range around the estimate (``Policy.eta_*``), calibrated on trace replays so that the
    #: actual start falls inside for most jobs; None when there is no estimate.
    earliest_start: float | None = None
    latest_start: float | None = None


@dataclass(frozen=True)
class TenantShare:
    """Why one tenant goes before another inside a priority class."""

    tenant: str
    weight: float
    fair_share: float  # weight / sum of weights
    usage_gpu_hours: float  # decayed
    usage_share: float  # decayed usage / sum of decayed usage
    running_gpus: float


@dataclass
class PassResult:
    admissions: list[Admission] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    waiting: list[WaitDecision] = field(default_factory=list)
    shares: list[TenantShare] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    def wait_for(self, job_id: int) -> WaitDecision | None:
        return next((w for w in self.waiting if w.job_id == job_id), None)

    def admitted_ids(self) -> set[int]:
        return {a.job_id for a in self.admissions}
