"""Task types; jobs, their queue state, allocations, timelines, checkpoints and artifacts; reservations.

A job's ``status`` is written only by :func:`scheduling.lifecycle.transition`, which records a
:class:`JobEvent` with the reason for every change.
"""

import json
import sys
import threading
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from itertools import chain
from typing import TypedDict

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.timezone import localtime
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from fleet.models import GPU, Cluster
from gpuportal.models import TimeStampedModel
from gpuportal.storage.planned import PlannedRows
from gpuportal.text import phrases
from scheduling.engine import WaitReason as EngineWaitReason
from scheduling.engine import render_reason
from tenants.models import Project, Tenant
from tenants.scoping import TenantScopedQuerySet

WaitReason = models.TextChoices(
    "WaitReason", [(r.name, (r.value, _(r.label))) for r in EngineWaitReason]
)
WaitReason.__doc__ = "Why a queued job is not running yet (computed by the engine, see engine/reasons.py)."


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

    @property
    def display_name(self) -> str:
        """The name in the reader's language when it is one of the names a site starts with; a name the site
        entered itself reads as entered."""
        return gettext(self.name) if self.name in STARTING_TASK_TYPE_NAMES else self.name

    @property
    def name_phrase(self) -> str:
        """The name for a stored sentence (``gpuportal.text.phrases``): a starting name as a phrase, so the
        sentence reads it in the reader's language; any other name as entered."""
        return phrases.Phrase(self.name) if self.name in STARTING_TASK_TYPE_NAMES else self.name

    @property
    def label(self) -> str:
        """"Research experiment (priority 50)" in the reader's language."""
        return task_type_label(self.display_name, self.priority)


def task_type_label(name: str, priority: int) -> str:
    """A task type with its priority, "Research experiment (priority 50)", in the reader's language (the job page,
    the queue, the forms: one pattern)."""
    return gettext("%(name)s (priority %(p)d)") % {"name": name, "p": priority}


def task_type_display_name(name: str) -> str:
    """``TaskType.display_name`` for a name read without its row (the queue's rows carry the name only)."""
    return gettext(name) if name in STARTING_TASK_TYPE_NAMES else name


#: The task types' names a site starts with (the demo's, the defaults the docs suggest): translated on the pages.
STARTING_TASK_TYPE_NAMES = frozenset({
    gettext_noop("Inference service"), gettext_noop("Production training"), gettext_noop("Research experiment"),
    gettext_noop("Notebook"), gettext_noop("Evaluation"), gettext_noop("Test"),
})


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


def label_of(choices: type[models.TextChoices], value: str) -> str:
    """The translated label of ``value`` (the value itself when unknown, as Django's get_FOO_display)."""
    try:
        return str(choices(value).label)
    except ValueError:
        return value or ""


#: Columns no job list or job page reads, left out of ``for_listing`` (each timestamp costs a parse per row).
_NOT_LISTED = ("created", "last_updated", "tenant__created", "tenant__last_updated", "project__created",
               "project__last_updated", "task_type__created", "task_type__last_updated", "owner__password",
               "owner__last_login", "owner__date_joined", "owner__first_name", "owner__last_name", "owner__email")


class JobQuerySet(TenantScopedQuerySet):
    def waiting(self):
        return self.filter(status__in=WAITING_STATUSES)

    def active(self):
        return self.filter(status__in=ACTIVE_STATUSES)

    def for_listing(self):
        """Jobs with what every job list shows (names of their tenant, project, owner and task type, their
        queue state) in one query whatever the rows."""
        return self.select_related("tenant", "project", "owner", "task_type", "queue_state", "group").defer(
            *_NOT_LISTED)

    def with_placement(self):
        """And the GPUs each holds now (``Job.held_gpus``), in one more query.

        Released allocations are history (metering keeps them); the placement shown is only what is held."""
        held = models.Prefetch(
            "allocations", to_attr="current_allocations",
            queryset=JobAllocation.objects.filter(released_at__isnull=True).select_related("gpu__node"))
        return self.prefetch_related(held)


class WorkloadKind(models.TextChoices):
    """How a job runs: to completion, as a notebook one opens, as a service that stays up, as one task of an
    array. The task type says how it ranks; the kind says what it is."""

    BATCH = "batch", _("Batch job")
    NOTEBOOK = "notebook", _("Notebook")
    SERVICE = "service", _("Inference service")
    ARRAY = "array", _("Job array")


#: Kinds that run until stopped: no planned end, no max runtime unless one is set.
LONG_RUNNING_KINDS = (WorkloadKind.NOTEBOOK, WorkloadKind.SERVICE)


class JobGroup(TimeStampedModel):
    """Jobs submitted as one: the tasks of an array or the replicas of an inference service.

    Each member is a job of its own (scheduled, metered, cancelled like any), so quotas, fair share,
    reservations and metering need no special case; the group keeps what the members share and what the
    lists show as one row. ``request`` is the submission every member was made from: a clone, an added
    replica and a rollout reuse it.
    """

    class Kind(models.TextChoices):
        ARRAY = "array", _("Job array")
        SERVICE = "service", _("Inference service")

    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="job_groups")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="job_groups")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="job_groups")
    name = models.CharField(_("name"), max_length=200)
    request = models.JSONField(_("request"), default=dict)
    indices = models.JSONField(_("array indices"), default=list, blank=True)
    size = models.PositiveIntegerField(_("tasks or desired replicas"))
    parallelism = models.PositiveIntegerField(_("most tasks running at once"), null=True, blank=True)
    port = models.PositiveIntegerField(_("port"), null=True, blank=True)
    image = models.CharField(_("image"), max_length=500, blank=True)
    revision = models.PositiveIntegerField(_("revision"), default=1)
    submitted_at = models.DateTimeField(_("submitted"))
    stopped_at = models.DateTimeField(_("stopped"), null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "-id"]
        verbose_name = _("job group")
        verbose_name_plural = _("job groups")

    def __str__(self):
        return f"{self.kind} {self.pk} {self.name}"

    def get_absolute_url(self):
        name = "scheduling:service-detail" if self.kind == self.Kind.SERVICE else "scheduling:array-detail"
        return reverse(name, args=[self.pk])


class JobTemplate(TimeStampedModel):
    """A named starting point for a submission: platform-wide (no tenant) or a tenant's own. Its content
    lives in versions; a job records the version it came from."""

    name = models.CharField(_("name"), max_length=100)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True,
                               related_name="job_templates")
    kind = models.CharField(_("kind"), max_length=16, choices=WorkloadKind.choices, default=WorkloadKind.BATCH)
    description = models.TextField(_("description"), blank=True)
    builtin = models.BooleanField(_("built in"), default=False)
    archived = models.BooleanField(_("archived"), default=False)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="template_unique_name_per_tenant"),
            models.UniqueConstraint(fields=["name"], condition=models.Q(tenant__isnull=True),
                                    name="template_unique_platform_name"),
        ]
        verbose_name = _("job template")
        verbose_name_plural = _("job templates")

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("scheduling:template-detail", args=[self.pk])

    # A built-in template's texts are the platform's words, marked for translation where they are declared
    # (migration 0010): shown in the reader's language. A tenant's template shows as its admins wrote it.
    @property
    def title(self) -> str:
        return gettext(self.name) if self.builtin and self.name else self.name

    @property
    def summary(self) -> str:
        return gettext(self.description) if self.builtin and self.description else self.description


class JobTemplateVersion(models.Model):
    """One immutable version of a template: its typed parameters (``[{name, type, default, label, help}]``)
    and the submit-field values it fills in (``defaults``)."""

    template = models.ForeignKey(JobTemplate, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField(_("version"))
    parameters = models.JSONField(_("parameters"), default=list, blank=True)
    defaults = models.JSONField(_("defaults"), default=dict, blank=True)
    note = models.CharField(_("change note"), max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(_("created"))

    class Meta:
        ordering = ["template", "-version"]
        constraints = [models.UniqueConstraint(fields=["template", "version"], name="template_version_unique")]
        verbose_name = _("job template version")
        verbose_name_plural = _("job template versions")

    def __str__(self):
        return f"{self.template.name} v{self.version}"

    def shown_parameters(self) -> list[dict]:
        """The parameters with their labels and help in the reader's language (built-in templates)."""
        if not self.template.builtin:
            return self.parameters
        return [{**p, **{key: gettext(p[key]) for key in ("label", "help") if p.get(key)}} for p in self.parameters]

    @property
    def shown_note(self) -> str:
        return gettext(self.note) if self.template.builtin and self.note else self.note


class Topology(models.TextChoices):
    ANY = "any", _("Any (tightest domain that fits)")
    SAME_NODE = "same_node", _("Same node")
    SAME_RACK = "same_rack", _("Same rack")
    SAME_NETWORK_DOMAIN = "same_network_domain", _("Same network domain")


class HeldBy(models.TextChoices):
    """Who holds a waiting job: its owner, or an admin (whose hold only an admin releases)."""

    USER = "user", _("user")
    ADMIN = "admin", _("admin")


class MailType(models.TextChoices):
    """The events of a job its owner may be mailed about: Slurm's ``--mail-type`` (``ALL`` is every one of them,
    ``NONE`` none, stored as itself so that it overrides the owner's preferences)."""

    BEGIN = "BEGIN", _("when it starts")
    END = "END", _("when it ends, however")
    FAIL = "FAIL", _("when it fails")
    REQUEUE = "REQUEUE", _("when it is requeued")


#: ``Job.mail_type`` of a job that asked for no mail at all.
MAIL_NONE = "NONE"


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
    gpu_model = models.CharField(_("GPU model"), max_length=64,
                                 help_text=_("The model it runs on (while it waits: the first it accepts)."))
    accept_models = models.JSONField(_("acceptable models"), default=list, blank=True,
                                     help_text=_("Empty: only its GPU model. Otherwise every model it may land on."))
    gpus_per_node = models.PositiveSmallIntegerField(_("GPUs per node"))
    node_count = models.PositiveSmallIntegerField(_("nodes"), default=1)
    image = models.CharField(_("image"), max_length=500)
    command = models.TextField(_("command"), blank=True)
    max_runtime_minutes = models.PositiveIntegerField(_("max runtime (minutes)"), null=True, blank=True,
                                                      help_text=_("Empty: none (services run until stopped)."))
    kind = models.CharField(_("kind"), max_length=16, choices=WorkloadKind.choices, default=WorkloadKind.BATCH,
                            db_index=True)
    group = models.ForeignKey(JobGroup, on_delete=models.PROTECT, null=True, blank=True, related_name="members")
    group_index = models.PositiveIntegerField(_("index in its array, or replica number"), null=True, blank=True)
    revision = models.PositiveIntegerField(_("service revision"), null=True, blank=True)
    template_version = models.ForeignKey(JobTemplateVersion, on_delete=models.PROTECT, null=True, blank=True,
                                         related_name="jobs")
    topology = models.CharField(_("topology"), max_length=24, choices=Topology.choices, default=Topology.ANY)
    gpu_milli = models.PositiveSmallIntegerField(_("share of each GPU (1/1000)"), default=1000)
    cpu_milli = models.PositiveIntegerField(_("CPU per node (millicores)"), default=0)
    memory_mib = models.PositiveIntegerField(_("memory per node (MiB)"), default=0)
    held_by = models.CharField(_("held by"), max_length=10, blank=True, choices=HeldBy.choices)
    requeue_on_preemption = models.BooleanField(_("requeue when preempted"), default=True)
    mail_type = models.CharField(_("mail when"), max_length=40, blank=True, help_text=_(
        "The events its owner is mailed about (MailType values, comma-separated, as Slurm's --mail-type); empty: "
        "as the owner's notification preferences say; NONE: never."))
    spare_own_jobs = models.BooleanField(_("spare my running jobs"), default=False, help_text=_(
        "Never preempt a running job of the same owner to start this one (it waits instead)."))
    retry_count = models.PositiveIntegerField(_("retries"), default=0)
    priority = models.IntegerField(_("priority"), help_text=_("Copied from the task type at submission."))

    status = models.CharField(_("status"), max_length=20, choices=JobStatus.choices, default=JobStatus.PENDING,
                              editable=False, db_index=True)
    submitted_at = models.DateTimeField(_("submitted"), db_index=True)
    admitted_at = models.DateTimeField(_("admitted"), null=True, blank=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")
    asked_cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The cluster the submitter named (a batch script's --partition): every placement, a retry's and "
                  "a requeue's too, stays on it; ``cluster`` is where the current attempt runs.")

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
    ports = models.JSONField(_("named ports"), default=list, blank=True, help_text=_(
        "Ports the job's program serves (TensorBoard, a web UI), each opened through the portal: a list of "
        "{\"name\", \"port\"} (NamedPort)."))

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "-id"]
        # The job lists read the newest jobs of the reader's tenants (or of all): top-N straight from an index.
        indexes = [models.Index(fields=["tenant", "status"]),
                   models.Index(fields=["tenant", "-submitted_at", "-id"], name="job_tenant_newest"),
                   models.Index(fields=["-submitted_at", "-id"], name="job_newest")]
        verbose_name = _("job")
        verbose_name_plural = _("jobs")

    def __str__(self):
        return f"#{self.pk} {self.name}"

    def get_absolute_url(self):
        return reverse("scheduling:job-detail", args=[self.pk])

    def held_gpus(self) -> list[GPU]:
        """The GPUs this job holds now, by node name and index (from ``with_placement``'s prefetch when loaded)."""
        allocations = getattr(self, "current_allocations", None)
        if allocations is None:
            allocations = self.allocations.filter(released_at__isnull=True).select_related("gpu__node")
        return sorted((a.gpu for a in allocations), key=lambda gpu: (gpu.node.name, gpu.index))

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

    @property
    def mail_types(self) -> frozenset[str] | None:
        """The events the job itself asked to be mailed about; None where it left it to its owner's preferences."""
        if not self.mail_type:
            return None
        return frozenset() if self.mail_type == MAIL_NONE else frozenset(self.mail_type.split(","))

    # The scheduler's view of a waiting job: its reason in JobQueueState, its places and estimates in the pass's
    # QueueTable; these read them (None / "" otherwise).
    def _queue_state(self):
        if not self.is_waiting:
            return None
        try:
            return self.queue_state
        except JobQueueState.DoesNotExist:
            return None

    def refresh_from_db(self, *args, **kwargs):
        self.__dict__.pop("_place", None)  # read the queue table again too, as the queue state is
        super().refresh_from_db(*args, **kwargs)

    def _queue_place(self) -> "QueuePlace | None":
        if not self.is_waiting:
            return None
        if "_place" not in self.__dict__:
            self.__dict__["_place"] = queue_places().get(self.pk)
        return self.__dict__["_place"]

    @property
    def wait_reason(self) -> str:
        state = self._queue_state()
        return state.wait_reason if state else ""

    @property
    def wait_reason_params(self) -> dict:
        state = self._queue_state()
        return state.wait_reason_params if state else {}

    @property
    def queue_position(self) -> int | None:
        place = self._queue_place()
        return place.position if place else None

    @property
    def tenant_queue_position(self) -> int | None:
        place = self._queue_place()
        return place.tenant_position if place else None

    @property
    def model_queue_position(self) -> int | None:
        """The place among the jobs waiting for the same GPU model, over every cluster (the order its GPUs go)."""
        place = self._queue_place()
        return place.model_position if place else None

    @property
    def estimated_start(self):
        place = self._queue_place()
        return place.estimated_start if place else None

    @property
    def likely_start(self) -> str:
        """The likely start range in the reader's time zone ("between 14:00 and 17:30"), or why it is unknown."""
        if not self.is_waiting or not self.wait_reason:
            return ""  # not waiting, or not seen by a pass yet
        if self.estimated_start is None:
            return gettext("unknown while it waits for this reason")
        early = localtime(self.earliest_start or self.estimated_start)
        late = localtime(self.latest_start or self.estimated_start)
        pattern = "%H:%M" if early.date() == late.date() == localtime().date() else "%m-%d %H:%M"
        if late - early < timedelta(minutes=1):
            return gettext("at about %(t)s") % {"t": early.strftime(pattern)}
        return gettext("between %(early)s and %(late)s") % {"early": early.strftime(pattern),
                                                            "late": late.strftime(pattern)}

    @property
    def earliest_start(self):
        place = self._queue_place()
        return place.earliest_start if place else None

    @property
    def latest_start(self):
        place = self._queue_place()
        return place.latest_start if place else None

    # Django's generated get_FOO_display() rebuilds a hashable copy of the choices on every call; these are
    # drawn on every row of every job list, so they look the label up in the enumeration instead.
    def get_status_display(self) -> str:
        return label_of(JobStatus, self.status)

    def get_failure_category_display(self) -> str:
        return label_of(FailureCategory, self.failure_category)

    def get_wait_reason_display(self) -> str:
        return label_of(WaitReason, self.wait_reason)

    @property
    def wait_reason_message(self) -> str:
        """The wait reason as a sentence, in the reader's language."""
        if not self.wait_reason:
            return ""
        return render_reason(self.wait_reason, local_moments(self.wait_reason_params), translate=gettext)


def local_moments(params: dict) -> dict:
    """A reason's numbers with the moment a job it waits for is likely done (the engine writes it in UTC, beside
    its timestamp) in the reader's time zone: the day only when it is not today."""
    if not isinstance(params.get("done_by_ts"), (int, float)):
        return params
    moment = localtime(datetime.fromtimestamp(params["done_by_ts"], tz=UTC))
    return params | {"done_by": moment.strftime("%H:%M" if moment.date() == localtime().date() else "%m-%d %H:%M")}


class JobQueueState(models.Model):
    """Why one waiting job waits, as the scheduler last said: the reason and its numbers.

    A narrow table of its own, written only when a job's reason or its numbers change (each change is an event
    on the job's timeline too); where the job stands and when it should start change with nearly every pass
    and live in the pass's ``QueueTable``. The row goes when the job stops waiting.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="queue_state")
    wait_reason = models.CharField(_("wait reason"), max_length=32, choices=WaitReason.choices, blank=True)
    wait_reason_params = models.JSONField(_("wait reason numbers"), default=dict, blank=True)

    class Meta:
        verbose_name = _("queue state")
        verbose_name_plural = _("queue states")

    def __str__(self):
        return f"{self.job_id}: {self.wait_reason}"


@dataclass(frozen=True, slots=True)
class QueuePlace:
    """Where one waiting job stood in the last pass: its place in its cluster's queue, in its tenant's and among
    the jobs waiting for its GPU model (over every cluster), and when it should start (None: no estimate)."""

    position: int
    tenant_position: int
    model_position: int
    estimated_start: datetime | None
    earliest_start: datetime | None
    latest_start: datetime | None


#: The numbers a ``QueueTable`` keeps per waiting job, in this order, as 64-bit integers (times in milliseconds
#: since the epoch; -1 for no estimate).
PLACE_FIELDS = ("job_id", "position", "tenant_position", "model_position", "estimated_ms", "earliest_ms",
                "latest_ms")
NO_TIME = -1


class QueuePlaces:
    """A decoded ``QueueTable``: each listed job's ``QueuePlace`` by job id, built on demand."""

    def __init__(self, token: str = "", data: bytes = b""):
        self.token = token
        self.numbers = array("q")
        self.numbers.frombytes(data)
        if sys.byteorder != "little":
            self.numbers.byteswap()
        width = len(PLACE_FIELDS)
        self.index = {job_id: i * width for i, job_id in enumerate(self.numbers[::width])}

    def __len__(self) -> int:
        return len(self.index)

    def get(self, job_id: int) -> QueuePlace | None:
        at = self.index.get(job_id)
        if at is None:
            return None
        _job, position, tenant, model, *times = self.numbers[at:at + len(PLACE_FIELDS)]
        return QueuePlace(position, tenant, model, *(None if t == NO_TIME else datetime.fromtimestamp(
            t / 1000, tz=UTC) for t in times))

    @cached_property
    def ranks(self) -> dict[int, int]:
        """Each listed job's rank in queue order (1 first): the order in which the passes consider waiting jobs,
        by queue position, then by id (positions tie only across clusters). Ranked once per decoded table."""
        numbers, index = self.numbers, self.index
        ordered = sorted(index, key=lambda job_id: (numbers[index[job_id] + 1], job_id))
        return {job_id: rank for rank, job_id in enumerate(ordered, start=1)}

    @cached_property
    def ranks_json(self) -> str:
        """``ranks`` as a JSON object keyed by job id, for SQL to sort by (``jobs.queries.queue_rank``): made once
        per decoded table, not per request (10,000 waiting jobs are 150 kB of it)."""
        return json.dumps({str(job_id): rank for job_id, rank in self.ranks.items()})

    def queue_key(self, job_id: int, submitted_at: datetime) -> tuple:
        """A waiting job's sort key in queue order (``ranks``); a job no pass has seen yet comes last, by
        submission. The SQL of a job list sorts by the same rule (``jobs.queries.queue_rank``)."""
        rank = self.ranks.get(job_id)
        return (0, rank, 0) if rank is not None else (1, submitted_at.timestamp(), job_id)

    @staticmethod
    def encode(rows: list[tuple[int, ...]]) -> bytes:
        """``rows`` of ``PLACE_FIELDS`` as the bytes a ``QueueTable`` keeps."""
        numbers = array("q", chain.from_iterable(rows))
        if sys.byteorder != "little":
            numbers.byteswap()
        return numbers.tobytes()


class QueueTable(models.Model):
    """Where every waiting job stands and when it should start, as the last pass computed them: one row.

    A job's place moves whenever one ahead of it starts, leaves or is reordered by fair share, and its
    estimate with every job that ends early: in a busy queue nearly every job's numbers change every pass, and
    writing them as a row per job cost the pass more than deciding. So the pass writes them as one packed
    table (``PLACE_FIELDS`` per job, ``QueuePlaces.encode``) in one statement, and readers decode it once per
    request (``queue_places``). ``token`` changes with every write, so a reader knows its decoded copy is
    current with one small query."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    token = models.CharField(max_length=32)
    computed_at = models.DateTimeField()
    jobs = models.PositiveIntegerField(default=0)
    places = models.BinaryField()

    class Meta:
        verbose_name = _("queue table")
        verbose_name_plural = _("queue tables")

    def __str__(self):
        return f"{self.jobs} waiting jobs at {self.computed_at:%Y-%m-%d %H:%M:%S}"


_decoded = {"places": QueuePlaces()}
_scope = threading.local()


#: Read by every page that shows a queue place: compiled to SQL once per process (gpuportal.storage.planned).
_QUEUE_TOKEN = PlannedRows(lambda: QueueTable.objects.filter(pk=1).order_by().values_list("token")[:1],
                           samples=((), ()))


def queue_places(fresh: bool = False) -> QueuePlaces:
    """The last pass's places, decoded once per process and table. Inside a request the table is checked once
    (``begin_request``): every row of a page reads the same pass; ``fresh`` checks it again (the pass that writes
    it compares with what is stored now)."""
    if not fresh and getattr(_scope, "places", None) is not None:
        return _scope.places
    kept = _decoded["places"]
    token = next((token for (token,) in _QUEUE_TOKEN()), None)
    if token is None:
        places = QueuePlaces()
    elif token == kept.token:
        places = kept
    else:
        row = QueueTable.objects.filter(pk=1).values_list("token", "places").first()
        places = QueuePlaces(row[0], bytes(row[1])) if row else QueuePlaces()
        _decoded["places"] = places
    if getattr(_scope, "active", False):
        _scope.places = places
    return places


def keep_places(places: QueuePlaces) -> None:
    """The pass that wrote ``places`` keeps them decoded once it committed: its own process, and its request if it
    ran in one, read them without decoding them again."""
    _decoded["places"] = places
    if getattr(_scope, "active", False):
        _scope.places = places


def begin_request(**_kwargs) -> None:
    _scope.active, _scope.places = True, None


def end_request(**_kwargs) -> None:
    _scope.active, _scope.places = False, None


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
        RECONCILE = "reconcile", _("Reconciliation")
        PREEMPTION = "preemption", _("Preemption")
        DEPENDENCY = "dependency", _("Dependency")

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

    @property
    def reason_text(self) -> str:
        """The reason in the reader's language: a wait reason from its code and numbers, a stored phrase from
        its message id (``gpuportal.text.phrases``); other text as it was stored."""
        if self.kind == self.Kind.WAIT_REASON and self.data.get("code") and "params" in self.data:
            try:
                return render_reason(self.data["code"], local_moments(self.data["params"]), translate=gettext)
            except (KeyError, TypeError, ValueError):
                return self.reason
        return phrases.read(self.reason, self.data)


#: The engine's preemption rules in words (the engine names them by a short English key). The one table of them:
#: the timeline's stored phrases, the job page, the request preview and the audit log read it (the stored phrases
#: keep these message ids, so the words change here and in the catalogue, not the ids).
PREEMPTION_RULES = {
    "reclaim within guarantee": gettext_noop("reclaim within guarantee"),
    "higher priority class": gettext_noop("higher priority class"),
}


def rule_words(rule: str) -> str:
    """A preemption rule in the reader's language (an unknown key as it is)."""
    return gettext(PREEMPTION_RULES[rule]) if rule in PREEMPTION_RULES else rule


class PreemptedBy(TypedDict):
    """Kept with a preempted job's event: who stopped it and by which rule (the page names the preemptor to readers
    who may see it)."""

    preemptor: int
    preemptor_tenant: str
    preemptor_owner: int
    rule: str


class NamedPort(TypedDict):
    """One port a job declared at submission (``tensorboard`` on 6006), as ``Job.ports`` keeps it."""

    name: str
    port: int


class StoppedNote(TypedDict):
    """Kept with the preemptor's note, one per job it stopped."""

    victim: int
    victim_tenant: str
    victim_owner: int
    rule: str


class AttemptOutcome(models.TextChoices):
    """How one run of a job ended (empty while it holds its GPUs)."""

    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    RETRIED = "retried", _("Failed, retried")
    PREEMPTED = "preempted", _("Preempted")
    CANCELLED = "cancelled", _("Cancelled")


#: How an attempt ends, by the status its job leaves the active statuses for.
OUTCOME_OF_STATUS = {JobStatus.SUCCEEDED: AttemptOutcome.SUCCEEDED, JobStatus.FAILED: AttemptOutcome.FAILED,
                     JobStatus.QUEUED: AttemptOutcome.RETRIED, JobStatus.PREEMPTED: AttemptOutcome.PREEMPTED,
                     JobStatus.CANCELLED: AttemptOutcome.CANCELLED}


class JobAttempt(models.Model):
    """One run of a job: from its admission (GPUs given) to the moment it stopped holding them.

    A job runs more than once when it is preempted and requeued or retried after an infrastructure failure; the
    job row says only what the current attempt does, these rows keep every one (written by ``lifecycle``). Where
    an attempt ran is in the job's allocations of its period; ``end_event`` says why it ended; ``log_tail`` is what
    the portal kept of its log once the cluster no longer has it.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField(_("attempt"))
    admitted_at = models.DateTimeField(_("admitted"))
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    ended_at = models.DateTimeField(_("ended"), null=True, blank=True)
    outcome = models.CharField(_("outcome"), max_length=16, choices=AttemptOutcome.choices, blank=True)
    failure_category = models.CharField(_("failure category"), max_length=20, choices=FailureCategory.choices,
                                        blank=True)
    end_event = models.ForeignKey(JobEvent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    log_tail = models.JSONField(_("kept log lines"), default=list, blank=True)

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="attempt_unique_number_per_job")]
        verbose_name = _("attempt")
        verbose_name_plural = _("attempts")

    def __str__(self):
        return f"{self.job_id} attempt {self.number}"

    def get_outcome_display(self) -> str:
        return label_of(AttemptOutcome, self.outcome)


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


class DependencyCondition(models.TextChoices):
    """When a job may start after the job it names (Slurm's ``--dependency``; ``scheduling/engine/dependencies.py``
    decides when each is met)."""

    AFTER_OK = "afterok", _("after it succeeds")
    AFTER_ANY = "afterany", _("after it ends, however")
    AFTER_NOT_OK = "afternotok", _("after it fails")
    AFTER_CORR = "aftercorr", _("after the same task of the other array succeeds")


class JobDependency(models.Model):
    """One job waits for another (``on_job``) to end as ``condition`` asks; with ``whole_array`` for every task
    of ``on_job``'s array (named by its first task's id, as Slurm names an array by its array job id). Whether it
    is met is not stored: the pass reads it from the statuses every time, so a parent's change needs no write here.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependencies")
    on_job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependents")
    condition = models.CharField(_("condition"), max_length=12, choices=DependencyCondition.choices)
    whole_array = models.BooleanField(_("every task of its array"), default=False)

    class Meta:
        ordering = ["job", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "on_job", "condition"], name="dependency_unique")]
        verbose_name = _("dependency")
        verbose_name_plural = _("dependencies")

    def __str__(self):
        return f"{self.job_id} {self.condition}:{self.on_job_id}"
