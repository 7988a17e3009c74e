"""The monthly report's data and the capacity plan, as typed JSON.

The monthly report (``monthly.build_report``) is frozen into ``MonthlyReport.data`` once its month closes and
served as it is by the API (``/api/v1/reports/YYYY-MM/``), by ``monthly_report --format json``, the report page
and its CSV downloads. Its shape is therefore JSON itself, and is typed here as ``TypedDict``s: a snapshot
frozen by an earlier version loads as it was stored, and the API's output stays what its schema documents.
The review pack reads the same data (``metering.review``) and the improvement actions read their metrics
from it (``metering.improvements.queries``).

Units: ``gpu_hours_*`` are GPU-hours (one GPU held, or used, for one hour; two decimals), ``*_seconds_*`` are
seconds, ``efficiency``, ``measured_share``, ``allocation_rate``, ``share_of_guarantee`` and the advice's
``*_share`` are fractions 0..1, ``*_pct`` are percentages 0..100, ``cost`` is in ``currency``. Months are
"YYYY-MM" and days "YYYY-MM-DD" (the portal's time zone). None is "not known" (nothing allocated, no job
waited), never 0.
"""

from typing import Literal, NotRequired, TypedDict

# --- the monthly report ------------------------------------------------------------------------------------


class UsageRow(TypedDict):
    """Usage of one group of the month (a project "tenant/project", a task type code, a GPU model, a tenant,
    a user, or "total")."""

    name: str
    gpu_hours_allocated: float
    gpu_hours_used: float
    #: Used / allocated GPU-hours (0..1); None when nothing was allocated.
    efficiency: float | None
    #: Share of the allocated GPU-hours whose use was measured by an agent (0..1); None when nothing was allocated.
    measured_share: float | None
    cost: float


class TopUserRow(UsageRow):
    """A user's usage (``name`` is the username) and the jobs they submitted in the month."""

    jobs: int


class LeastEfficientJob(TypedDict):
    """A large job that ended in the month, by how little of what it held it used (its GPUs' readings)."""

    job: int
    name: str
    user: str
    tenant: str
    gpus: float
    gpu_hours_held: float
    #: Held GPU-hours times the mean utilisation of its GPUs.
    gpu_hours_used: float
    #: 0-100, over every reading of its GPUs while it held them.
    mean_gpu_utilization: float
    #: 0-1: the share of readings below the idle threshold.
    idle_share: float | None
    #: "ask for 2" where the readings make it clear, else "" (in the language of the report's builder).
    hint: str


class JobOutcomes(TypedDict):
    """Jobs submitted in the month and what became of them (counts); ``retries`` sums their retries."""

    submitted: int
    succeeded: int
    failed: int
    cancelled: int
    #: Jobs preempted at least once.
    preempted: int
    #: Jobs reclaimed because they held GPUs idle.
    reclaimed: int
    retries: int


class WaitRow(TypedDict):
    """Waits of one group (a task type, a GPU model, a tenant): jobs first admitted in the month, and jobs still
    waiting at its end (counted until then)."""

    name: str
    jobs: int
    wait_seconds_median: float | None
    wait_seconds_p95: float | None


class QuotaUse(TypedDict):
    """One quota (tenant, GPU model) against the GPUs the tenant held on average over the month's elapsed time."""

    tenant: str
    gpu_model: str
    #: GPUs guaranteed, and the most the tenant may hold (GPUs).
    guaranteed: int
    limit: int
    average_gpus_allocated: float
    #: Average held / guaranteed (0..1, above 1 beyond the guarantee); None without a guarantee.
    share_of_guarantee: float | None


class DailyUsage(TypedDict):
    """GPU-hours of one day and GPU model."""

    day: str
    gpu_model: str
    gpu_hours_allocated: float
    gpu_hours_used: float


class ModelCapacity(TypedDict):
    """Capacity against demand of one GPU model over the month (platform reports only)."""

    gpu_model: str
    #: The most GPUs installed on any day of the month.
    capacity_gpus: int
    #: Days with capacity data.
    days: int
    capacity_gpu_hours: float
    allocated_gpu_hours: float
    used_gpu_hours: float
    #: The highest daily peak of demand (GPUs held plus asked for by waiting jobs).
    peak_demand_gpus: float
    days_over_capacity: int
    #: GPUs per node of the model (the step "add N" is rounded to).
    gpus_per_node: float
    #: Allocated / capacity GPU-hours (0..1); None without capacity.
    allocation_rate: float | None
    idle_gpu_hours: float
    mean_utilization_pct: float | None


class CapacityDay(TypedDict):
    """One day and GPU model of the capacity facts (platform reports only)."""

    day: str
    gpu_model: str
    capacity_gpus: int
    peak_allocated_gpus: float
    peak_demand_gpus: float
    mean_utilization_pct: float | None
    gpu_memory_high_water_mb: int | None


class AdviceFigures(TypedDict):
    """The figures one piece of capacity advice rests on."""

    days: int
    days_over_capacity: int
    wait_seconds_p95: float
    resource_failure_share: float
    idle_share: float
    allocation_rate: float | None
    capacity_gpus: int
    peak_demand_gpus: float
    #: Only with the advice "add": GPUs to add, whole nodes.
    add_gpus: NotRequired[int]


class Advice(TypedDict):
    """One piece of capacity advice per GPU model. ``action`` is a ``CapacityAction`` value ("add", "spread",
    "lend_or_move", "keep"); ``evidence`` says why in a sentence. Stored in English with the sentence's
    ``phrase`` (``gpuportal.text.phrases``) so a frozen report is read in each reader's language; ``in_reader_language``
    drops the phrase and translates the evidence before the report is shown or served."""

    gpu_model: str
    action: str
    evidence: str
    figures: AdviceFigures
    phrase: NotRequired[dict]


class SlurmOwnerUsage(TypedDict):
    """One tenant's GPU-hours on a Slurm cluster in the month, or one account's that no tenant is mapped to
    (``tenant`` None, ``account`` named; a tenant's row has ``account`` None): what its portal jobs were
    allocated, what its jobs submitted to Slurm directly held as slurmdb accounted them, and both together."""

    tenant: str | None
    account: str | None
    portal_gpu_hours: float
    outside_gpu_hours: float
    total_gpu_hours: float
    #: Jobs submitted to Slurm directly that started in the month.
    outside_jobs: int


class SlurmClusterUsage(TypedDict):
    """A Slurm cluster's month as a whole: the portal's allocations on it (the rollup), the work submitted to
    Slurm directly (slurmdb), and for the cross-check slurmdb's own figures of every job and of the portal's.
    ``*_gpu_seconds`` are the same figures unrounded."""

    cluster: str
    portal_gpu_hours: float
    outside_gpu_hours: float
    #: Portal plus outside: the whole cluster (a tenant's report: the tenant's share of it).
    total_gpu_hours: float
    #: What slurmdb accounted for every job of the cluster, the portal's included (a tenant's report: the same jobs
    #: as ``total_gpu_hours``, the tenant's portal jobs and its accounts' direct work).
    slurmdb_gpu_hours: float
    #: What slurmdb accounted for the jobs the portal submitted (to compare with ``portal_gpu_hours``, in the same
    #: scope).
    slurmdb_portal_gpu_hours: float
    portal_gpu_seconds: float
    outside_gpu_seconds: float
    slurmdb_gpu_seconds: float
    #: Per tenant (mapped accounts together) and per unmapped account, most GPU-hours first.
    owners: list[SlurmOwnerUsage]


class MonthlyReportData(TypedDict):
    """Every figure of one month's report, platform-wide (``scope`` "platform", ``tenant`` None) or of one
    tenant. The keys marked NotRequired are in platform reports only."""

    month: str
    scope: Literal["platform", "tenant"]
    tenant: str | None
    #: The currency every ``cost`` is in (settings ``METERING["CURRENCY"]``).
    currency: str
    #: When the figures were computed (ISO 8601 with offset): the freezing moment of a frozen report.
    generated_at: str
    #: Whether the month had closed when the figures were computed.
    closed: bool
    gpu_hours_allocated: float
    gpu_hours_used: float
    efficiency: float | None
    measured_share: float | None
    cost: float
    by_project: list[UsageRow]
    by_task_type: list[UsageRow]
    by_gpu_model: list[UsageRow]
    jobs: JobOutcomes
    #: Failed jobs by ``FailureCategory`` value ("unclassified" for none), most first.
    failures_by_category: dict[str, int]
    wait_seconds_median: float | None
    wait_seconds_p95: float | None
    #: Longest 95th percentile wait first.
    wait_by_task_type: list[WaitRow]
    wait_by_gpu_model: list[WaitRow]
    #: The ten users with the most GPU-hours allocated.
    top_users: list[TopUserRow]
    #: The large jobs that ended in the month and used least of what they held (``monthly.least_efficient_jobs``);
    #: reports frozen before it lack it: readers take it as empty.
    least_efficient_jobs: list[LeastEfficientJob]
    quota_vs_use: list[QuotaUse]
    daily: list[DailyUsage]
    #: The Slurm clusters with accounting in the month (a tenant's: its own accounts). Reports frozen before
    #: Slurm accounting have neither this nor ``outside_gpu_hours``: readers take them as empty.
    slurm: list[SlurmClusterUsage]
    #: GPU-hours of work submitted to Slurm directly, not in ``gpu_hours_allocated`` (the portal's allocations).
    outside_gpu_hours: float
    by_tenant: NotRequired[list[UsageRow]]
    #: The five tenants with the longest 95th percentile wait.
    longest_waiting_tenants: NotRequired[list[WaitRow]]
    utilisation_by_gpu_model: NotRequired[list[ModelCapacity]]
    capacity_daily: NotRequired[list[CapacityDay]]
    recommendations: NotRequired[list[Advice]]


# --- the capacity plan -------------------------------------------------------------------------------------


class PlanMonth(TypedDict):
    """One past month of a GPU model: the mean and 95th percentile of its daily peak demand, the mean of the GPUs
    held at the daily peak, the GPUs installed (the month's most) and its days with data."""

    month: str
    demand_mean_gpus: float | None
    demand_p95_gpus: float | None
    held_mean_gpus: float | None
    capacity_gpus: int
    days: int


class Forecast(TypedDict):
    """The demand forecast for one month to come (GPUs)."""

    month: str
    demand_gpus: float


class Backtest(TypedDict):
    """The forecast method replayed on the past months: how many could be checked, the mean absolute error
    (GPUs) and the mean absolute percentage error (0..100; None when every actual demand was 0), said in ``text``."""

    months_tested: int
    mae_gpus: float | None
    mape: float | None
    text: str


class ModelPlan(TypedDict):
    """The plan of one GPU model: its history, trend (GPUs per month, None when carried forward), forecast and
    "add ``add_gpus`` (whole nodes of ``gpus_per_node``) by ``add_by``" (0 and None: no addition needed), with
    the method ("linear" or "carry_forward") and the reasons in words."""

    gpu_model: str
    capacity_gpus: int
    gpus_per_node: int
    history: list[PlanMonth]
    trend_per_month: float | None
    method: str
    method_text: str
    forecast: list[Forecast]
    error: Backtest
    add_gpus: int
    add_by: str | None
    why: str
    #: Set by ``capacity_plan.with_advice`` where the month's advice says "add" another number.
    beside_advice: NotRequired[str]


class CapacityPlan(TypedDict):
    """The capacity plan for ``report_month``: ``month`` is the last closed month it uses (the one before when
    the report's month is still open, which ``note`` then says), ``months`` the past months with data, ``text``
    says when there is no history at all."""

    month: str
    report_month: str
    note: str
    months: list[str]
    models: list[ModelPlan]
    text: str
