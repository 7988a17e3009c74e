"""Metering facts: who used which GPUs for how long, how well, at what price.

Shaped like Open XDMoD's fact tables: ``UsageDaily`` (one row per day and attribution key) is rebuilt from
allocations and agent readings by ``metering.usage.rollup``; ``UsageMonthly`` is the sum of a month's daily rows;
``JobFact`` is one row per job (wait, outcome, preemptions) for counts and percentiles; ``CapacityDaily`` is
one row per day and GPU model (capacity, peaks, host counters) for the platform report and the capacity
advice. Every table is rebuilt for a range by deleting and re-inserting it, so re-running a range gives
the same rows and late readings are absorbed by re-running.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from gpuportal.models import TimeStampedModel
from tenants.scoping import TenantScopedQuerySet


class CapacityAction(models.TextChoices):
    """What the capacity advice of a report recommends for a GPU model (``reports.recommendations``)."""

    ADD = "add", _("Add GPUs")
    SPREAD = "spread", _("Spread the peaks")
    LEND_OR_MOVE = "lend_or_move", _("Lend or move")
    KEEP = "keep", _("Keep")


class GpuPrice(TimeStampedModel):
    """What one GPU-hour of a model costs from ``effective_from`` on (until the next row of that model).

    Rows are never edited in place: a new price is a new row, so past months keep the price they had.
    """

    gpu_model = models.CharField(_("GPU model"), max_length=64)
    price_per_gpu_hour = models.DecimalField(_("price per GPU-hour"), max_digits=10, decimal_places=4)
    effective_from = models.DateField(_("effective from"))
    note = models.CharField(_("note"), max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    class Meta:
        ordering = ["gpu_model", "-effective_from"]
        constraints = [models.UniqueConstraint(fields=["gpu_model", "effective_from"], name="gpu_price_unique_day"),
                       models.CheckConstraint(condition=models.Q(price_per_gpu_hour__gte=0),
                                              name="gpu_price_not_negative")]
        verbose_name = _("GPU price")
        verbose_name_plural = _("GPU prices")

    def __str__(self):
        return f"{self.gpu_model} {self.price_per_gpu_hour}/h from {self.effective_from}"


class UsageFields(models.Model):
    """The attribution key and the measures shared by the daily and monthly usage tables."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("tenants.Project", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    task_type = models.ForeignKey("scheduling.TaskType", on_delete=models.CASCADE, related_name="+")
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    allocated_gpu_seconds = models.FloatField(_("allocated GPU-seconds"), default=0)
    used_gpu_seconds = models.FloatField(
        _("used GPU-seconds"), default=0,
        help_text=_("Allocated seconds weighted by the GPU utilisation the node agents measured."))
    measured_gpu_seconds = models.FloatField(
        _("measured GPU-seconds"), default=0, help_text=_("Allocated seconds for which readings exist."))
    cost = models.DecimalField(_("cost"), max_digits=16, decimal_places=4, default=0)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        abstract = True


class UsageDaily(UsageFields):
    day = models.DateField(_("day"), db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "day"])]
        verbose_name = _("daily usage")
        verbose_name_plural = _("daily usage")

    def __str__(self):
        return f"{self.day} {self.tenant_id}/{self.project_id} {self.gpu_model}: {self.allocated_gpu_seconds:.0f} s"


class UsageMonthly(UsageFields):
    month = models.DateField(_("month"), db_index=True, help_text=_("First day of the month."))

    class Meta:
        indexes = [models.Index(fields=["tenant", "month"])]
        verbose_name = _("monthly usage")
        verbose_name_plural = _("monthly usage")

    def __str__(self):
        return (f"{self.month:%Y-%m} {self.tenant_id}/{self.project_id} {self.gpu_model}: "
                f"{self.allocated_gpu_seconds:.0f} s")


class JobFact(models.Model):
    """One job as reports count it: when it was asked for, how long it waited, how it ended."""

    job = models.OneToOneField("scheduling.Job", on_delete=models.CASCADE, primary_key=True, related_name="fact")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("tenants.Project", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    task_type = models.ForeignKey("scheduling.TaskType", on_delete=models.CASCADE, related_name="+")
    gpu_model = models.CharField(max_length=64)
    gpus = models.FloatField(help_text="GPUs asked for (nodes x GPUs per node x share).")
    submitted_at = models.DateTimeField(db_index=True)
    first_admitted_at = models.DateTimeField(null=True)
    wait_seconds = models.FloatField(null=True, help_text="Submission to first admission.")
    finished_at = models.DateTimeField(null=True)
    status = models.CharField(max_length=20)
    failure_category = models.CharField(max_length=20, blank=True)
    preemptions = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    reclaimed = models.BooleanField(default=False)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        verbose_name = _("job fact")
        verbose_name_plural = _("job facts")

    def __str__(self):
        return f"job {self.job_id}: {self.status}, waited {self.wait_seconds} s"


class ClusterAccountingDaily(models.Model):
    """What a Slurm cluster's own accounting (slurmdb) says was held on one day, per account, user, GPU model and
    whether the portal submitted the job.

    ``UsageDaily`` needs a project, a portal user and a task type, which work submitted to Slurm directly does not
    have, so the whole cluster is kept here as Slurm counted it. Jobs the portal submitted are already counted
    from their allocations: their rows here serve the cross-check, and only the others (``from_portal`` False)
    add to the reports. Rebuilt per window by ``metering.usage.slurm.import_accounting`` (deleted and inserted
    again), so importing a window twice gives the same rows."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="+")
    day = models.DateField(_("day"))
    account = models.CharField(_("Slurm account"), max_length=64)
    user_name = models.CharField(_("user on the cluster"), max_length=64)
    #: A portal job's tenant; for other work the tenant the cluster's ``slurm_accounts`` maps the account to;
    #: empty: the account is unmapped.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    from_portal = models.BooleanField(_("submitted by the portal"))
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0)
    jobs_started = models.PositiveIntegerField(_("jobs started"), default=0)

    class Meta:
        ordering = ["cluster", "day", "account", "user_name"]
        indexes = [models.Index(fields=["cluster", "day"]), models.Index(fields=["day", "tenant"])]
        verbose_name = _("daily Slurm accounting")
        verbose_name_plural = _("daily Slurm accounting")

    def __str__(self):
        return (f"{self.day} {self.cluster_id} {self.account}/{self.user_name} {self.gpu_model}: "
                f"{self.gpu_seconds:.0f} s")


class CapacityDaily(models.Model):
    """One GPU model on one day: how many GPUs there were, how busy they were, how much was asked for."""

    day = models.DateField(_("day"))
    gpu_model = models.CharField(_("GPU model"), max_length=64)
    capacity_gpus = models.PositiveIntegerField(_("GPUs"))
    allocated_gpu_seconds = models.FloatField(default=0)
    used_gpu_seconds = models.FloatField(default=0)
    peak_allocated_gpus = models.FloatField(default=0)
    peak_demand_gpus = models.FloatField(default=0, help_text="Most GPUs held plus asked for by waiting jobs.")
    mean_utilization_pct = models.FloatField(null=True, help_text="Mean of all readings of this model's GPUs.")
    gpu_memory_high_water_mb = models.PositiveIntegerField(null=True)
    node_cpu_pct = models.FloatField(null=True)
    node_memory_pct = models.FloatField(null=True)
    network_bytes_per_s = models.FloatField(null=True, help_text="Ethernet and InfiniBand, received and sent.")
    storage_read_bytes_per_s = models.FloatField(null=True)

    class Meta:
        ordering = ["day", "gpu_model"]
        constraints = [models.UniqueConstraint(fields=["day", "gpu_model"], name="capacity_daily_unique")]
        verbose_name = _("daily capacity")
        verbose_name_plural = _("daily capacity")

    def __str__(self):
        return f"{self.day} {self.gpu_model}: {self.capacity_gpus} GPUs, peak demand {self.peak_demand_gpus}"


class MonthlyReport(models.Model):
    """A frozen report of a closed month (``tenant`` empty: the platform-wide report).

    Regenerating writes a new row with who asked and why, and marks the old one superseded; nothing is
    overwritten, so what a manager read last month can still be shown.
    """

    month = models.DateField(_("month"))
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    data = models.JSONField()
    generated_at = models.DateTimeField(_("generated"))
    generated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+")
    reason = models.CharField(_("reason"), max_length=500)
    superseded_at = models.DateTimeField(null=True, blank=True)

    #: The reason the beat task records. Stored in English and shown in the reader's language (``reason_text``):
    #: stored translated, the sentence stayed in the language of the worker that froze the month.
    FROZEN_REASON = gettext_noop("Frozen after the month closed.")

    class Meta:
        ordering = ["-month", "-generated_at"]
        indexes = [models.Index(fields=["month", "tenant"])]
        constraints = [
            # One current snapshot per month and tenant. The platform report has no tenant and NULLs are
            # distinct in a unique index, so the tenant is coalesced to 0 (no tenant has that id).
            models.UniqueConstraint(Coalesce("tenant", Value(0)), "month", condition=Q(superseded_at__isnull=True),
                                    name="metering_one_current_report"),
        ]
        verbose_name = _("monthly report")
        verbose_name_plural = _("monthly reports")

    def __str__(self):
        return f"{self.month:%Y-%m} {self.tenant or 'platform'} ({self.generated_at:%Y-%m-%d %H:%M})"

    @property
    def reason_text(self) -> str:
        """The reason in the reader's language where it is the portal's own sentence; an admin's words as written."""
        return gettext(self.FROZEN_REASON) if self.reason == self.FROZEN_REASON else self.reason


class StoredReviewPack(models.Model):
    """A frozen month's review pack as it was first rendered, per format and language.

    Rendering a pack takes seconds (charts, the PDF layout), and a frozen month's figures do not change, so the
    bytes are kept and served again. ``digest`` names what the pack was made from (the snapshot's figures and
    the previous month's snapshot it is compared with): when either is regenerated the digest changes and the
    old rendering is simply no longer asked for (it goes with its snapshot)."""

    snapshot = models.ForeignKey(MonthlyReport, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64)
    language = models.CharField(max_length=16)
    fmt = models.CharField(max_length=8)
    # the reader's zone: the pack says when its live parts were read, in the zone of whoever downloads it
    time_zone = models.CharField(max_length=64)
    filename = models.CharField(max_length=200)
    content = models.BinaryField()
    rendered_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["snapshot", "digest", "language", "fmt", "time_zone"],
                                               name="metering_one_stored_pack")]

    def __str__(self):
        return f"{self.snapshot} {self.language} {self.fmt}"


class ImprovementMetric(models.TextChoices):
    """The report figures an improvement action promises to move (keys of the monthly report, or of its
    per-model capacity figures when the action names a GPU model)."""

    GPU_HOURS_ALLOCATED = "gpu_hours_allocated", _("GPU-hours allocated")
    EFFICIENCY = "efficiency", _("Efficiency (used / allocated)")
    WAIT_P95 = "wait_seconds_p95", _("95th percentile wait")
    FAILED_SHARE = "failed_share", _("Share of jobs that failed")
    RESOURCE_FAILURE_SHARE = "resource_failure_share", _("Share of failures that were resource-related")
    ALLOCATION_RATE = "allocation_rate", _("Allocation rate")
    DAYS_OVER_CAPACITY = "days_over_capacity", _("Days with demand above capacity")
    IDLE_SHARE = "idle_share", _("Idle share")


class ImprovementDirection(models.TextChoices):
    DOWN = "down", _("should go down")
    UP = "up", _("should go up")


class ImprovementStatus(models.TextChoices):
    PLANNED = "planned", _("Planned")
    IN_PROGRESS = "in_progress", _("In progress")
    DONE = "done", _("Done")
    DROPPED = "dropped", _("Dropped")


class ImprovementAction(TimeStampedModel):
    """A recommendation of a month's report turned into work someone owns, followed month to month.

    ``baseline`` is the metric's value in ``month`` (the report the recommendation came from); the next
    months' review packs compare the metric with it and say whether it moved the expected way."""

    month = models.DateField(_("report month"), help_text=_("The month whose report recommended it."))
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+",
                               verbose_name=_("tenant"))
    gpu_model = models.CharField(_("GPU model"), max_length=64, blank=True)
    recommendation = models.CharField(_("recommendation"), max_length=500, blank=True)
    title = models.CharField(_("action"), max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+", verbose_name=_("owner"))
    due_month = models.DateField(_("due month"))
    metric = models.CharField(_("metric"), max_length=32, choices=ImprovementMetric.choices)
    direction = models.CharField(_("expected effect"), max_length=8, choices=ImprovementDirection.choices)
    baseline = models.FloatField(_("baseline"), null=True, blank=True)
    target = models.FloatField(_("target"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=ImprovementStatus.choices,
                              default=ImprovementStatus.PLANNED)
    notes = models.TextField(_("notes"), blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["due_month", "pk"]
        indexes = [models.Index(fields=["due_month", "status"])]
        verbose_name = _("improvement action")
        verbose_name_plural = _("improvement actions")

    def __str__(self):
        return f"{self.title} ({self.due_month:%Y-%m}, {self.status})"


class AcceptanceArea(models.TextChoices):
    """The four rows of the acceptance checklist (proof of concept or go-live review)."""

    MULTI_CARD = "multi_card", _("Multi-card")
    MULTI_NODE = "multi_node", _("Multi-node")
    MULTI_TENANT = "multi_tenant", _("Multi-tenant")
    OPERATIONS = "operations", _("Operations")


class AcceptanceNote(models.Model):
    """What a pilot adds to a checklist row by hand: a note, the configuration used, a screenshot.

    The screenshot is kept in the database (bounded size) so the evidence travels with backups and is
    served only through the checklist's permission check."""

    area = models.CharField(_("area"), max_length=16, choices=AcceptanceArea.choices)
    text = models.TextField(_("note"), blank=True)
    configuration = models.TextField(_("configuration"), blank=True)
    screenshot = models.BinaryField(null=True, blank=True)
    screenshot_name = models.CharField(max_length=200, blank=True)
    screenshot_type = models.CharField(max_length=50, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+")
    created_at = models.DateTimeField(_("added"), auto_now_add=True)

    class Meta:
        ordering = ["area", "created_at"]
        verbose_name = _("acceptance note")
        verbose_name_plural = _("acceptance notes")

    def __str__(self):
        return f"{self.get_area_display()} note by {self.author or '?'} ({self.created_at:%Y-%m-%d})"


class WhatIfRun(models.Model):
    """A month's demand replayed through the scheduling engine as it was and with one change (``metering.whatif``).

    Started from the page, the API or ``manage.py what_if``, run by a Celery task that writes its progress here, and
    kept with its figures, so that advice can cite it and anyone can read it again. ``kind`` says what it answers:
    a change someone asked about, the capacity advice's sizing of a month, or the backtest of a real fleet change."""

    class Kind(models.TextChoices):
        CHANGE = "change", _("Change")
        SIZING = "sizing", _("Capacity sizing")
        BACKTEST = "backtest", _("Backtest")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    month = models.DateField(_("month"), help_text=_("First day of the month replayed."))
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices, default=Kind.CHANGE)
    change = models.JSONField(_("change"), default=dict, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(_("progress"), default=0, help_text=_("Share done, 0 to 1."))
    result = models.JSONField(_("result"), null=True, blank=True)
    error = models.TextField(_("error"), blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created = models.DateTimeField(_("created"), auto_now_add=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["month", "kind", "status"])]
        verbose_name = _("what-if run")
        verbose_name_plural = _("what-if runs")

    def __str__(self):
        return f"what-if #{self.pk} {self.month:%Y-%m} {self.kind} ({self.status})"

    @property
    def error_text(self) -> str:
        """Why it failed, in the reader's language (``error`` holds a message id of ``metering.whatif.services``)."""
        return gettext(self.error) if self.error else ""

    @property
    def month_text(self) -> str:
        return f"{self.month:%Y-%m}"
