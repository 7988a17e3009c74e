"""Clusters, nodes and GPUs; task types; jobs and their timelines.

A job's ``status`` is written only by :func:`scheduling.lifecycle.transition`, which records a
:class:`JobEvent` with the reason for every change.
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from gpuportal.models import TimeStampedModel
from tenants.models import Project, Tenant
from tenants.scoping import TenantScopedQuerySet

from .engine import WaitReason as EngineWaitReason
from .engine import render_reason

WaitReason = models.TextChoices(
    "WaitReason", [(r.name, (r.value, _(r.label))) for r in EngineWaitReason]
)
WaitReason.__doc__ = "Why a queued job is not running yet (computed by the engine, see engine/reasons.py)."


class ExecutorKind(models.TextChoices):
    SIMULATED = "simulated", _("Simulated")
    KUBERNETES = "kubernetes", _("Kubernetes")


class Cluster(TimeStampedModel):
    """A set of nodes driven by one executor (a simulated cluster, or one Kubernetes cluster)."""

    name = models.SlugField(_("name"), max_length=64, unique=True)
    description = models.TextField(_("description"), blank=True)
    executor = models.CharField(_("executor"), max_length=20, choices=ExecutorKind.choices,
                                default=ExecutorKind.SIMULATED)
    # Scheduling policy of this cluster (see the README's policy table).
    ordering = models.CharField(_("queue order"), max_length=20, default="fair_share",
                                choices=[("fair_share", _("Priority, then fair share")),
                                         ("fifo", _("Arrival order"))])
    fair_share_half_life_hours = models.FloatField(_("fair-share half-life (hours)"), default=7 * 24)
    placement = models.CharField(_("placement"), max_length=20, default="pack",
                                 choices=[("pack", _("Pack (tightest domain, fullest nodes)")),
                                          ("first_fit", _("First fit"))])
    backfill = models.BooleanField(_("backfill"), default=True)
    preemption = models.BooleanField(_("preemption"), default=True)
    # How to reach a Kubernetes cluster (never shown on a page or in the API: the kubeconfig holds secrets).
    kubeconfig_path = models.CharField(_("kubeconfig path"), max_length=500, blank=True,
                                       help_text=_("Empty with 'in cluster' unset: the default kubeconfig."))
    kube_context = models.CharField(_("kubeconfig context"), max_length=200, blank=True)
    in_cluster = models.BooleanField(_("in-cluster service account"), default=False)
    namespace_prefix = models.CharField(_("namespace prefix"), max_length=20, default="gp-",
                                        help_text=_("One namespace per tenant: prefix + tenant name."))
    gpu_share_resources = models.JSONField(
        _("GPU share resources"), default=dict, blank=True,
        help_text=_('Extended resources for a share of a GPU, e.g. {"nvidia.com/gpu": 1, '
                    '"nvidia.com/gpumem-percentage": "{percent}", "nvidia.com/gpucores": "{percent}"} (HAMi).'))
    tenant_storage_gib = models.PositiveIntegerField(_("storage claim per tenant (GiB)"), default=0,
                                                     help_text=_("0: no per-tenant data claim."))
    storage_class = models.CharField(_("storage class"), max_length=100, blank=True)
    watch_resource_version = models.CharField(max_length=64, blank=True, editable=False,
                                              help_text="Where the pod watch resumes after a restart.")

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")

    def __str__(self):
        return self.name


class Health(models.TextChoices):
    """Health from the node agent's readings: healthy -> suspect -> unhealthy -> healthy again."""

    HEALTHY = "healthy", _("Healthy")
    SUSPECT = "suspect", _("Suspect")
    UNHEALTHY = "unhealthy", _("Unhealthy")


class AdminState(models.TextChoices):
    """What admins decided: a cordoned node takes no new work; a draining one also expects its jobs to end."""

    ACTIVE = "active", _("Active")
    CORDONED = "cordoned", _("Cordoned")
    DRAINING = "draining", _("Draining")


class NodeQuerySet(models.QuerySet):
    def schedulable(self):
        return self.filter(admin_state=AdminState.ACTIVE).exclude(health=Health.UNHEALTHY)


class Node(TimeStampedModel):
    """A GPU server; its labels (datacenter, rack, network domain) are the topology placement uses.

    ``health`` is set by the agent poller, ``admin_state`` by platform admins; the scheduler places work
    only on nodes that are not unhealthy and are active.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="nodes")
    name = models.CharField(_("name"), max_length=128, unique=True)
    gpu_model = models.CharField(_("GPU model"), max_length=64, db_index=True)
    datacenter = models.CharField(_("datacenter"), max_length=64)
    rack = models.CharField(_("rack"), max_length=64)
    network_domain = models.CharField(_("network domain"), max_length=64)
    health = models.CharField(_("health"), max_length=20, choices=Health.choices, default=Health.HEALTHY)
    admin_state = models.CharField(_("admin state"), max_length=20, choices=AdminState.choices,
                                   default=AdminState.ACTIVE)
    agent_url = models.CharField(
        _("agent URL"), max_length=255, blank=True,
        help_text=_("Where the node agent answers; empty for a node of the simulated cluster."),
    )
    agent_token_hash = models.CharField(_("agent token (SHA-256)"), max_length=64, blank=True, editable=False)
    agent_token_version = models.PositiveIntegerField(default=0, editable=False)
    agent_token_issued_at = models.DateTimeField(_("agent token issued"), null=True, blank=True, editable=False)
    agent_version = models.CharField(_("agent version"), max_length=32, blank=True)
    driver_version = models.CharField(_("driver version"), max_length=32, blank=True)
    cuda_version = models.CharField(_("CUDA version"), max_length=16, blank=True)
    cpu_milli = models.PositiveIntegerField(_("CPU (millicores)"), default=0, help_text=_("0: not accounted."))
    memory_mib = models.PositiveBigIntegerField(_("memory (MiB)"), default=0, help_text=_("0: not accounted."))
    last_seen = models.DateTimeField(_("last seen"), null=True, blank=True)
    last_poll_error = models.TextField(_("last poll error"), blank=True)
    missed_polls = models.PositiveIntegerField(_("missed polls in a row"), default=0)
    good_polls = models.PositiveIntegerField(_("good polls in a row"), default=0)
    last_error_time = models.FloatField(default=0, editable=False,
                                        help_text="Time of the newest agent error already processed.")

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name", "datacenter", "rack", "name"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")

    def __str__(self):
        return self.name

    @property
    def schedulable(self) -> bool:
        return self.admin_state == AdminState.ACTIVE and self.health != Health.UNHEALTHY

    @property
    def state(self) -> str:
        """One word for lists: the admin state when an admin set one, else the health."""
        return self.admin_state if self.admin_state != AdminState.ACTIVE else self.health

    def get_state_display(self) -> str:
        return self.get_admin_state_display() if self.admin_state != AdminState.ACTIVE else self.get_health_display()


class GPU(TimeStampedModel):
    """One physical GPU of a node: its inventory, health and error counters as the agent last reported."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(_("index"))
    uuid = models.CharField(_("UUID"), max_length=64, unique=True)
    model = models.CharField(_("model"), max_length=64)
    memory_mb = models.PositiveIntegerField(_("memory (MiB)"))
    health = models.CharField(_("health"), max_length=20, choices=Health.choices, default=Health.HEALTHY)
    good_polls = models.PositiveIntegerField(default=0)
    ecc_dbe = models.PositiveIntegerField(_("double-bit ECC errors"), default=0)
    ecc_sbe = models.PositiveIntegerField(_("single-bit ECC errors"), default=0)
    retired_pages = models.PositiveIntegerField(_("retired pages"), default=0)
    last_xid = models.PositiveIntegerField(_("last XID"), null=True, blank=True)

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_per_node")]
        verbose_name = _("GPU")
        verbose_name_plural = _("GPUs")

    def __str__(self):
        return f"{self.node.name}/gpu{self.index}"

    @property
    def healthy(self) -> bool:
        """May take work: not unhealthy (a suspect GPU still runs jobs while it is watched)."""
        return self.health != Health.UNHEALTHY


class GpuReading(models.Model):
    """One poll's reading of one GPU.

    One narrow row per GPU per poll (small integers, no JSON): 1,000 nodes of 8 GPUs polled every 15 s make
    about 46 million rows a day, which PostgreSQL inserts in one COPY-like batch per cycle and which
    metering rolls up by day; ``prune_readings`` keeps ``READINGS_RETENTION_DAYS``.
    """

    gpu = models.ForeignKey(GPU, on_delete=models.CASCADE, related_name="readings")
    at = models.DateTimeField()
    utilization_pct = models.PositiveSmallIntegerField(null=True)
    memory_used_mb = models.PositiveIntegerField(null=True)
    temperature_c = models.SmallIntegerField(null=True)
    power_w = models.FloatField(null=True)

    class Meta:
        # Covering index: metering averages one GPU's utilisation over an allocation with an index-only scan.
        indexes = [models.Index(fields=["gpu", "at"], include=["utilization_pct"], name="gpureading_gpu_at_util"),
                   models.Index(fields=["at"])]

    def __str__(self):
        return f"{self.gpu_id}@{self.at:%H:%M:%S} {self.utilization_pct}%"


class NodeReading(models.Model):
    """One poll's host counters of one node (CPU, memory, NIC, InfiniBand, storage reads)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="readings")
    at = models.DateTimeField()
    cpu_percent = models.FloatField(null=True)
    memory_percent = models.FloatField(null=True)
    net_rx_bytes_per_s = models.BigIntegerField(null=True)
    net_tx_bytes_per_s = models.BigIntegerField(null=True)
    ib_rx_bytes_per_s = models.BigIntegerField(null=True)
    ib_tx_bytes_per_s = models.BigIntegerField(null=True)
    disk_read_bytes_per_s = models.BigIntegerField(null=True)

    class Meta:
        indexes = [models.Index(fields=["node", "at"]), models.Index(fields=["at"])]

    def __str__(self):
        return f"{self.node_id}@{self.at:%H:%M:%S}"


class NodeEvent(models.Model):
    """One line of a node's history: a health change (with the evidence), an admin action, a token issued."""

    class Kind(models.TextChoices):
        HEALTH = "health", _("Health")
        ADMIN = "admin", _("Admin action")
        TOKEN = "token", _("Agent token")
        REGISTRATION = "registration", _("Agent registration")

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="events")
    gpu = models.ForeignKey(GPU, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    at = models.DateTimeField(_("time"), db_index=True)
    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices)
    from_state = models.CharField(_("from"), max_length=20, blank=True)
    to_state = models.CharField(_("to"), max_length=20, blank=True)
    reason = models.TextField(_("reason"))
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.node} {self.from_state}->{self.to_state}: {self.reason}"


class TaskType(TimeStampedModel):
    """A priority class by kind of work: how it ranks, whether it may be preempted, whether it needs
    approval before it may queue."""

    code = models.SlugField(_("code"), max_length=32, unique=True)
    name = models.CharField(_("name"), max_length=100)
    description = models.TextField(_("description"), blank=True)
    priority = models.IntegerField(_("priority"), help_text=_("Higher runs first."))
    preemptible = models.BooleanField(_("preemptible"), default=True)
    requires_approval = models.BooleanField(_("requires approval"), default=False)
    default_max_runtime_minutes = models.PositiveIntegerField(_("default max runtime (minutes)"), default=24 * 60)
    cpu_milli_per_gpu = models.PositiveIntegerField(_("CPU per GPU (millicores)"), default=8000,
                                                    help_text=_("Default when a job asks for no CPU."))
    memory_mib_per_gpu = models.PositiveIntegerField(_("memory per GPU (MiB)"), default=64 * 1024,
                                                     help_text=_("Default when a job asks for no memory."))
    infrastructure_retries = models.PositiveSmallIntegerField(
        _("retries after infrastructure failures"), default=2,
        help_text=_("Node, GPU and cross-node communication faults are retried this often, avoiding the node."))

    class Meta:
        ordering = ["-priority", "code"]
        verbose_name = _("task type")
        verbose_name_plural = _("task types")

    def __str__(self):
        return self.name


class JobStatus(models.TextChoices):
    PENDING = "pending", _("Pending approval")
    QUEUED = "queued", _("Queued")
    ADMITTED = "admitted", _("Admitted")
    DISPATCHING = "dispatching", _("Dispatching")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    PREEMPTED = "preempted", _("Preempted")
    CANCELLED = "cancelled", _("Cancelled")


#: Statuses in which a job holds GPUs.
ACTIVE_STATUSES = (JobStatus.ADMITTED, JobStatus.DISPATCHING, JobStatus.RUNNING)
#: Statuses from which a job never moves again.
TERMINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
#: Statuses in which a job waits for the scheduler or an approver.
WAITING_STATUSES = (JobStatus.PENDING, JobStatus.QUEUED)


class FailureCategory(models.TextChoices):
    NODE_FAULT = "node_fault", _("Node fault")
    GPU_FAULT = "gpu_fault", _("GPU fault")
    COMMUNICATION = "communication", _("Cross-node communication")
    IMAGE = "image", _("Image / environment")
    OUT_OF_MEMORY = "out_of_memory", _("Out of memory")
    PREEMPTED = "preempted", _("Preempted")
    TIMEOUT = "timeout", _("Timeout")
    EXIT_CODE = "exit_code", _("Program exit code")
    DISPATCH = "dispatch", _("Dispatch refused by the cluster")


#: Failures of the infrastructure, not of the program: retried automatically (avoiding the faulty node).
INFRASTRUCTURE_FAILURES = (FailureCategory.NODE_FAULT, FailureCategory.GPU_FAULT, FailureCategory.COMMUNICATION)


class JobQuerySet(TenantScopedQuerySet):
    def waiting(self):
        return self.filter(status__in=WAITING_STATUSES)

    def active(self):
        return self.filter(status__in=ACTIVE_STATUSES)


class Topology(models.TextChoices):
    ANY = "any", _("Any (tightest domain that fits)")
    SAME_NODE = "same_node", _("Same node")
    SAME_RACK = "same_rack", _("Same rack")
    SAME_NETWORK_DOMAIN = "same_network_domain", _("Same network domain")


class Job(TimeStampedModel):
    """A request for ``node_count`` x ``gpus_per_node`` GPUs of one model to run an image.

    Fields under "scheduler's view" are written by the scheduling pass; ``status`` only by
    ``lifecycle.transition``.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="jobs")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(_("name"), max_length=200)
    task_type = models.ForeignKey(TaskType, on_delete=models.PROTECT, related_name="jobs")
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    gpus_per_node = models.PositiveSmallIntegerField(_("GPUs per node"))
    node_count = models.PositiveSmallIntegerField(_("nodes"), default=1)
    image = models.CharField(_("image"), max_length=500)
    command = models.TextField(_("command"), blank=True)
    max_runtime_minutes = models.PositiveIntegerField(_("max runtime (minutes)"))
    topology = models.CharField(_("topology"), max_length=24, choices=Topology.choices, default=Topology.ANY)
    gpu_milli = models.PositiveSmallIntegerField(_("share of each GPU (1/1000)"), default=1000)
    cpu_milli = models.PositiveIntegerField(_("CPU per node (millicores)"), default=0)
    memory_mib = models.PositiveIntegerField(_("memory per node (MiB)"), default=0)
    held_by = models.CharField(_("held by"), max_length=10, blank=True,
                               choices=[("user", _("user")), ("admin", _("admin"))])
    requeue_on_preemption = models.BooleanField(_("requeue when preempted"), default=True)
    retry_count = models.PositiveIntegerField(_("retries"), default=0)
    priority = models.IntegerField(_("priority"), help_text=_("Copied from the task type at submission."))

    status = models.CharField(_("status"), max_length=20, choices=JobStatus.choices, default=JobStatus.PENDING,
                              editable=False, db_index=True)
    submitted_at = models.DateTimeField(_("submitted"), db_index=True)
    admitted_at = models.DateTimeField(_("admitted"), null=True, blank=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")

    failure_category = models.CharField(_("failure category"), max_length=20, choices=FailureCategory.choices,
                                        blank=True)
    failure_message = models.TextField(_("failure message"), blank=True)
    exit_code = models.IntegerField(_("exit code"), null=True, blank=True)
    executor_state = models.JSONField(_("executor state"), default=dict, blank=True)
    # What the program reported (POST /api/jobs/{id}/report/ with its job token).
    progress_step = models.PositiveBigIntegerField(_("step"), null=True, blank=True)
    progress_total = models.PositiveBigIntegerField(_("total steps"), null=True, blank=True)
    progress_message = models.CharField(_("progress message"), max_length=500, blank=True)
    progress_at = models.DateTimeField(_("progress reported"), null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [models.Index(fields=["tenant", "status"])]
        verbose_name = _("job")
        verbose_name_plural = _("jobs")

    def __str__(self):
        return f"#{self.pk} {self.name}"

    @property
    def total_gpus(self) -> float:
        total = self.gpus_per_node * self.node_count * self.gpu_milli / 1000
        return int(total) if total == int(total) else total

    @property
    def gpu_share(self) -> float:
        return self.gpu_milli / 1000

    @property
    def is_waiting(self) -> bool:
        return self.status in WAITING_STATUSES

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    # The scheduler's view of a waiting job lives in JobQueueState; these read it (None / "" otherwise).
    def _queue_state(self):
        if not self.is_waiting:
            return None
        try:
            return self.queue_state
        except JobQueueState.DoesNotExist:
            return None

    @property
    def wait_reason(self) -> str:
        state = self._queue_state()
        return state.wait_reason if state else ""

    @property
    def wait_reason_params(self) -> dict:
        state = self._queue_state()
        return state.wait_reason_params if state else {}

    @property
    def queue_position(self):
        state = self._queue_state()
        return state.queue_position if state else None

    @property
    def tenant_queue_position(self):
        state = self._queue_state()
        return state.tenant_queue_position if state else None

    @property
    def estimated_start(self):
        state = self._queue_state()
        return state.estimated_start if state else None

    def get_wait_reason_display(self) -> str:
        return str(WaitReason(self.wait_reason).label) if self.wait_reason else ""

    @property
    def wait_reason_message(self) -> str:
        """The wait reason as a sentence, in the reader's language."""
        if not self.wait_reason:
            return ""
        return render_reason(self.wait_reason, self.wait_reason_params, translate=gettext)


class JobQueueState(models.Model):
    """The scheduler's view of one waiting job: why it waits, where it stands, when it should start.

    A narrow table of its own: every pass rewrites it for thousands of jobs, which costs a tenth of updating
    the wide, heavily indexed job rows. The row goes when the job stops waiting.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="queue_state")
    wait_reason = models.CharField(_("wait reason"), max_length=32, choices=WaitReason.choices, blank=True)
    wait_reason_params = models.JSONField(_("wait reason numbers"), default=dict, blank=True)
    queue_position = models.PositiveIntegerField(_("queue position"), null=True, blank=True)
    tenant_queue_position = models.PositiveIntegerField(_("position in tenant"), null=True, blank=True)
    estimated_start = models.DateTimeField(_("estimated start"), null=True, blank=True)

    class Meta:
        verbose_name = _("queue state")
        verbose_name_plural = _("queue states")

    def __str__(self):
        return f"{self.job_id}: {self.wait_reason} #{self.queue_position}"


class Reservation(TimeStampedModel):
    """``gpus`` GPUs of ``gpu_model`` held for a tenant from ``start`` to ``end``; others see "reserved for
    tenant X until T". Created by platform admins (approved requests, with the governance issue)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="reservations")
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    gpus = models.PositiveIntegerField(_("GPUs"))
    start = models.DateTimeField(_("start"))
    end = models.DateTimeField(_("end"))
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["start"]
        constraints = [models.CheckConstraint(condition=models.Q(end__gt=models.F("start")),
                                              name="reservation_ends_after_start")]
        verbose_name = _("reservation")
        verbose_name_plural = _("reservations")

    def __str__(self):
        return f"{self.tenant}: {self.gpus} x {self.gpu_model} {self.start:%Y-%m-%d %H:%M}–{self.end:%H:%M}"


class JobAllocation(models.Model):
    """One GPU given to a job (or a share of it), from admission until release; kept for metering."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    gpu = models.ForeignKey(GPU, on_delete=models.PROTECT, related_name="allocations")
    fraction = models.DecimalField(_("fraction"), max_digits=4, decimal_places=3, default=1)
    allocated_at = models.DateTimeField(_("allocated"))
    released_at = models.DateTimeField(_("released"), null=True, blank=True)

    class Meta:
        ordering = ["gpu__node__name", "gpu__index"]
        indexes = [models.Index(fields=["released_at"])]
        verbose_name = _("GPU allocation")
        verbose_name_plural = _("GPU allocations")

    def __str__(self):
        return f"{self.job_id} -> {self.gpu}"


class JobEvent(models.Model):
    """One line of a job's timeline: a status change (or a new wait reason) and why."""

    class Kind(models.TextChoices):
        STATUS = "status", _("Status change")
        WAIT_REASON = "wait_reason", _("Wait reason")
        FAULT = "fault", _("Hardware fault")
        HOLD = "hold", _("Hold")
        APPROVAL = "approval", _("Approval")
        RECLAMATION = "reclamation", _("Idle reclamation")
        EXECUTOR = "executor", _("Cluster action")
        RETRY = "retry", _("Automatic retry")

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(_("time"), db_index=True)
    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices, default=Kind.STATUS)
    from_status = models.CharField(_("from"), max_length=20, choices=JobStatus.choices, blank=True)
    to_status = models.CharField(_("to"), max_length=20, choices=JobStatus.choices, blank=True)
    reason = models.TextField(_("reason"))
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    data = models.JSONField(_("data"), default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        verbose_name = _("job event")
        verbose_name_plural = _("job events")

    def __str__(self):
        return f"{self.job_id} {self.from_status}->{self.to_status}: {self.reason}"


class JobCheckpoint(models.Model):
    """A checkpoint the program reported: where it is, how big, at which step. Retries resume from the last."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="checkpoints")
    path = models.CharField(_("path"), max_length=1000)
    size_bytes = models.PositiveBigIntegerField(_("size (bytes)"), null=True, blank=True)
    step = models.PositiveBigIntegerField(_("step"), null=True, blank=True)
    at = models.DateTimeField(_("time"))

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("checkpoint")
        verbose_name_plural = _("checkpoints")

    def __str__(self):
        return f"{self.job_id}: {self.path} @ {self.step}"


class JobArtifact(models.Model):
    """A result the program published (a model, a metrics file, a report) and where it lies."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="artifacts")
    name = models.CharField(_("name"), max_length=200)
    uri = models.CharField(_("location"), max_length=1000)
    size_bytes = models.PositiveBigIntegerField(_("size (bytes)"), null=True, blank=True)
    at = models.DateTimeField(_("time"))

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="artifact_unique_name_per_job")]
        verbose_name = _("artifact")
        verbose_name_plural = _("artifacts")

    def __str__(self):
        return f"{self.job_id}: {self.name}"
