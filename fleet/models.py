"""The fleet: clusters, nodes, their accelerators, what the node agents read and each node's history.

These tables were created by the scheduling app; they keep their names (``db_table``), so moving the models
here moved no data. ``health`` is written by the agent poller, ``admin_state`` by platform admins.
"""

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from fleet.vendors import DEFAULT_VENDOR
from gpuportal.models import TimeStampedModel
from gpuportal.text import phrases


class ExecutorKind(models.TextChoices):
    SIMULATED = "simulated", _("Simulated")
    KUBERNETES = "kubernetes", _("Kubernetes")
    SLURM = "slurm", _("Slurm")


class SlurmContainer(models.TextChoices):
    """How a Slurm cluster runs a job's image: not at all (the command runs on the node), or through one of the
    two container runtimes Slurm sites use."""

    NONE = "none", _("None (the command runs on the node)")
    APPTAINER = "apptainer", _("Apptainer")
    PYXIS = "pyxis", _("Pyxis and enroot")


class Vendor(models.TextChoices):
    """Who makes an accelerator; the node agent reports it per device (``--backend`` picks how it reads them).
    What the portal knows of each is its record in ``fleet/vendors.py`` (a test checks that both name the same)."""

    NVIDIA = "nvidia", _("NVIDIA")
    AMD = "amd", _("AMD")
    HUAWEI = "huawei", _("Huawei Ascend")
    CAMBRICON = "cambricon", _("Cambricon")
    HYGON = "hygon", _("Hygon")


class AcceleratorModel(TimeStampedModel):
    """One accelerator model of the catalogue, whatever its vendor: quotas, prices, reservations, reports and
    "what can I run" name models; the vendor decides how a job asks the cluster for it (the extended resource,
    the visibility variables) and how its failures read. Rows come with the platform for the models we know and
    from the first node agent that reports a new one."""

    name = models.CharField(_("name"), max_length=64, unique=True)
    vendor = models.CharField(_("vendor"), max_length=16, choices=Vendor.choices, default=DEFAULT_VENDOR)
    memory_gb = models.PositiveIntegerField(_("memory per device (GB)"), default=0)
    interconnect = models.CharField(_("interconnect"), max_length=64, blank=True,
                                    help_text=_("Between devices of a node: NVLink, Infinity Fabric (XGMI), HCCS…"))

    class Meta:
        ordering = ["vendor", "name"]
        verbose_name = _("accelerator model")
        verbose_name_plural = _("accelerator models")

    def __str__(self):
        return self.name


class Cluster(TimeStampedModel):
    """A set of nodes driven by one executor (a simulated cluster, one Kubernetes cluster, one Slurm cluster)."""

    name = models.SlugField(_("name"), max_length=64, unique=True)
    description = models.TextField(_("description"), blank=True)
    executor = models.CharField(_("executor"), max_length=20, choices=ExecutorKind.choices,
                                default=ExecutorKind.SIMULATED)
    # Scheduling policy of this cluster (docs/scheduling.md, "Policies, per cluster").
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
        help_text=_('Extended resources for a share of a device: one mapping for NVIDIA, e.g. {"nvidia.com/gpu": 1, '
                    '"nvidia.com/gpumem-percentage": "{percent}", "nvidia.com/gpucores": "{percent}"} (HAMi), or one '
                    'entry per vendor (a mapping, or a list of vNPU templates by share for Ascend).'))
    accelerator_resources = models.JSONField(
        _("accelerator resources"), default=dict, blank=True,
        help_text=_('The extended resource per vendor or per model where this cluster\'s device plugins name it '
                    'otherwise, e.g. {"huawei": "huawei.com/Ascend910B"}; a model\'s entry wins over its vendor\'s; '
                    'empty: each vendor\'s usual name.'))
    tenant_storage_gib = models.PositiveIntegerField(_("storage claim per tenant (GiB)"), default=0,
                                                     help_text=_("0: no per-tenant data claim."))
    storage_class = models.CharField(_("storage class"), max_length=100, blank=True)
    watch_resource_version = models.CharField(max_length=64, blank=True, editable=False,
                                              help_text="Where the pod watch resumes after a restart.")
    # How to reach a Slurm cluster's slurmrestd (docs/slurm.md). The key and token files hold secrets: only their
    # paths are stored, and neither they nor the tokens made from them are shown or logged.
    slurm_url = models.CharField(_("slurmrestd URL"), max_length=500, blank=True)
    slurm_jwt_key_file = models.CharField(
        _("JWT key file"), max_length=500, blank=True,
        help_text=_("The cluster's jwt_hs256.key: the portal signs short-lived tokens per user with it."))
    slurm_token_file = models.CharField(
        _("token file"), max_length=500, blank=True,
        help_text=_("A token made by 'scontrol token' for one account, where the portal may not hold the key."))
    slurm_user = models.CharField(_("Slurm user for reading"), max_length=64, blank=True,
                                  help_text=_("The account the portal reads nodes, jobs and accounting as."))
    slurm_run_as = models.CharField(
        _("run every job as"), max_length=64, blank=True,
        help_text=_("One service account for every job; empty: each job runs as its owner's account."))
    slurm_users = models.JSONField(
        _("user names on the cluster"), default=dict, blank=True,
        help_text=_("Portal user name to cluster user name, where the directory's uid does not say it."))
    slurm_models = models.JSONField(
        _("GRES types to models"), default=dict, blank=True,
        help_text=_('A GRES type to a catalogue model where the names differ beyond case, e.g. {"h100": "H100-SXM"}.'))
    slurm_accounts = models.JSONField(
        _("accounts to tenants"), default=dict, blank=True,
        help_text=_("A Slurm account to the tenant its usage counts for; accounts not named are shown as unmapped."))
    slurm_output_dir = models.CharField(
        _("output directory"), max_length=500, blank=True,
        help_text=_("Where jobs write their output, on a filesystem the portal can read too; empty: no log access."))
    slurm_container = models.CharField(_("container runtime"), max_length=20, choices=SlurmContainer.choices,
                                       default=SlurmContainer.NONE)
    slurm_api_version = models.CharField(_("REST API version"), max_length=16, blank=True, editable=False)
    slurm_version = models.CharField(_("Slurm version"), max_length=32, blank=True, editable=False)
    slurm_synced_at = models.DateTimeField(_("inventory synced"), null=True, blank=True, editable=False)

    class Meta:
        db_table = "scheduling_cluster"
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")

    def __str__(self):
        return self.name


class FaultKind(models.TextChoices):
    """A hardware fault the poller found; the values are the failure categories jobs hit by it get."""

    NODE_FAULT = "node_fault", _("Node fault")
    GPU_FAULT = "gpu_fault", _("GPU fault")


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


def is_schedulable(admin_state: str, health: str) -> bool:
    """A node takes new work when admins left it active and it is not unhealthy (``Node.schedulable``; the same rule
    as a filter: ``NodeQuerySet.schedulable``)."""
    return admin_state == AdminState.ACTIVE and health != Health.UNHEALTHY


def is_healthy(health: str) -> bool:
    """A GPU (or node) may take work unless it is unhealthy: a suspect one still runs jobs while it is watched."""
    return health != Health.UNHEALTHY


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
    external_state = models.CharField(_("state on its cluster"), max_length=100, blank=True,
                                      help_text=_("What the cluster's own scheduler says (Slurm: state and flags)."))
    external_reason = models.TextField(_("reason on its cluster"), blank=True,
                                       help_text=_("Why, as the cluster's own scheduler says (Slurm's node reason)."))

    objects = NodeQuerySet.as_manager()

    class Meta:
        db_table = "scheduling_node"
        ordering = ["cluster__name", "datacenter", "rack", "name"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("fleet:node-detail", args=[self.name])

    @property
    def schedulable(self) -> bool:
        return is_schedulable(self.admin_state, self.health)

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
        db_table = "scheduling_gpu"
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_per_node")]
        verbose_name = _("GPU")
        verbose_name_plural = _("GPUs")

    def __str__(self):
        return f"{self.node.name}/gpu{self.index}"

    @property
    def healthy(self) -> bool:
        return is_healthy(self.health)


class OutsideWork(models.Model):
    """Work the portal did not submit that holds GPUs of a node (a job submitted to Slurm directly), as the
    cluster's last inventory sync saw it. The sync replaces a cluster's rows wholesale: a row is what holds GPUs
    now, never history (accounting keeps that). The engine sees each as running, unpreemptible work."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="outside_work")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="outside_work")
    external_id = models.CharField(_("job id on the cluster"), max_length=64)
    user_name = models.CharField(_("user on the cluster"), max_length=64, blank=True)
    account = models.CharField(_("account"), max_length=64, blank=True)
    name = models.CharField(_("name"), max_length=200, blank=True)
    gpu_indices = models.JSONField(_("GPU indices"), default=list)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    time_limit_seconds = models.PositiveIntegerField(_("time limit (seconds)"), null=True, blank=True)
    seen_at = models.DateTimeField(_("last seen"))

    class Meta:
        ordering = ["node__name", "external_id"]
        constraints = [models.UniqueConstraint(fields=["node", "external_id"], name="outside_work_once_per_node")]
        verbose_name = _("work outside the portal")
        verbose_name_plural = _("work outside the portal")

    def __str__(self):
        return f"{self.cluster.name}/{self.external_id}@{self.node.name}"


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
        db_table = "scheduling_gpureading"
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
        db_table = "scheduling_nodereading"
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
        db_table = "scheduling_nodeevent"
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.node} {self.from_state}->{self.to_state}: {self.reason}"

    @property
    def reason_text(self) -> str:
        """The reason in the reader's language when it was stored as a phrase (``gpuportal.text.phrases``)."""
        return phrases.read(self.reason, self.data)

    @staticmethod
    def _state_label(code: str) -> str:
        """A health or admin state's label in the reader's language (events store the codes)."""
        for choices in (Health, AdminState):
            if code in choices.values:
                return str(choices(code).label)
        return code

    @property
    def from_state_label(self) -> str:
        return self._state_label(self.from_state)

    @property
    def to_state_label(self) -> str:
        return self._state_label(self.to_state)
