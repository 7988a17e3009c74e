"""The columns a job list may show, how it may be ordered, and what each column says in an export.

One declaration for the job list page (its table, drawn by ``scheduling.templatetags.job_tables``), its live
refresh, ``GET /api/jobs/`` (``sort``) and ``GET /api/jobs/export/``: a column's key is the word of the page's
control, the API's ``columns=`` and the export's header, so that what is exported is what the list shows.

Why the values a column reads are listed (``fields``): each table row is kept in the cache under the values it
shows, so a column chosen adds its values to the row's key and a job whose shown values did not change is not
drawn again. Node names and the mean GPU utilisation are not columns of the job row: they are read for a page of
rows at once (``extras_of``: one query each, only when the column is shown).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Avg, DurationField, ExpressionWrapper, F, OuterRef, Subquery
from django.db.models.functions import Coalesce, Now
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, gettext_noop

from scheduling.jobs.queries import TABLE_COLUMNS, queue_rank
from scheduling.models import Job, JobAllocation


@dataclass(frozen=True)
class Column:
    key: str
    heading: str  # a message id (gettext_noop): translated when drawn
    css: str  # the table cell's class
    order: tuple = ()  # ascending order expressions (or field names); descending reverses each
    fields: tuple[str, ...] = field(default=())  # job fields read beyond TABLE_COLUMNS


def _elapsed():
    """How long the job has run (until now while it runs); NULL when it never started."""
    return ExpressionWrapper(Coalesce(F("finished_at"), Now()) - F("started_at"), output_field=DurationField())


def _wait():
    """How long it waited to start (until now while it waits, until it ended when it never started)."""
    return ExpressionWrapper(Coalesce(F("started_at"), F("finished_at"), Now()) - F("submitted_at"),
                             output_field=DurationField())


def _gpus():
    return F("node_count") * F("gpus_per_node") * F("gpu_milli")


def _node():
    """The first node (by name) of the job's latest allocation: where it runs or ran last."""
    return Subquery(JobAllocation.objects.filter(job=OuterRef("pk")).order_by("-allocated_at", "gpu__node__name")
                    .values("gpu__node__name")[:1])


def _efficiency():
    return Subquery(_held_readings(JobAllocation.objects.filter(job=OuterRef("pk"))).values("job")
                    .annotate(mean=Avg("gpu__readings__utilization_pct")).values("mean")[:1])


def _held_readings(allocations):
    """``allocations`` joined to the readings of their GPUs taken while they were held."""
    return allocations.filter(gpu__readings__at__gte=F("allocated_at"),
                              gpu__readings__at__lt=Coalesce(F("released_at"), Now()))


COLUMNS: dict[str, Column] = {c.key: c for c in (
    Column("name", gettext_noop("Name"), "name", ("name",)),
    Column("project", gettext_noop("Tenant / project"), "where", ("tenant__name", "project__name")),
    Column("task_type", gettext_noop("Task type"), "task", ("task_type__code",)),
    Column("gpus", gettext_noop("GPUs"), "gpus", (_gpus,)),
    Column("model", gettext_noop("GPU model"), "model", ("gpu_model",)),
    Column("status", gettext_noop("Status"), "state", ("status",)),
    Column("position", gettext_noop("Queue position"), "position", (queue_rank,)),
    Column("reason", gettext_noop("Why / result"), "reason", ("queue_state__wait_reason", "failure_category")),
    Column("submitted", gettext_noop("Submitted"), "submitted", ("submitted_at",)),
    Column("start", gettext_noop("Started"), "start", ("started_at",), ("started_at",)),
    Column("end", gettext_noop("Ended"), "end", ("finished_at",), ("finished_at",)),
    Column("elapsed", gettext_noop("Elapsed"), "elapsed", (_elapsed,), ("started_at", "finished_at")),
    Column("wait", gettext_noop("Waited"), "wait", (_wait,), ("started_at", "finished_at")),
    Column("exit_code", gettext_noop("Exit code"), "exit-code", ("exit_code",), ("exit_code",)),
    Column("node", gettext_noop("On nodes"), "node", (_node,)),
    Column("efficiency", gettext_noop("GPU use"), "efficiency", (_efficiency,)),
)}

#: Today's table, shown until a person chooses otherwise (the dashboard always shows it).
DEFAULT_COLUMNS = ("name", "project", "task_type", "gpus", "status", "position", "reason", "submitted")
#: Columns whose cell follows the clock: drawn at each read, never kept.
LIVE_COLUMNS = frozenset({"elapsed", "wait"})


def sort_choices() -> list[tuple[str, str]]:
    """``sort`` values and their labels: each column ascending (``key``) and descending (``-key``)."""
    choices = []
    for column in COLUMNS.values():
        heading = gettext_lazy(column.heading)
        choices.append((column.key, _SortLabel(heading, ascending=True)))
        choices.append(("-" + column.key, _SortLabel(heading, ascending=False)))
    return choices


class _SortLabel:
    """"Elapsed, ascending" in the reader's language when drawn (the choices are declared at import)."""

    def __init__(self, heading, ascending: bool):
        self.heading, self.ascending = heading, ascending

    def __deepcopy__(self, memo):  # immutable: every filter set copies its filters' choices
        return self

    def __str__(self):
        pattern = gettext("%(column)s, ascending") if self.ascending else gettext("%(column)s, descending")
        return pattern % {"column": self.heading}


def ordering(sort: str) -> list:
    """The order of ``sort`` (a column's key, ``-`` before it for descending); empty values last either way,
    the newest job first among equals. Unknown or empty: the default order (newest first)."""
    column = COLUMNS.get(sort.removeprefix("-")) if sort else None
    if column is None:
        return [F("submitted_at").desc(), F("id").desc()]
    descending = sort.startswith("-")
    terms = []
    for term in column.order:
        expression = term() if callable(term) else F(term)
        terms.append(expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True))
    return [*terms, F("id").desc()]


def chosen(columns: Iterable[str]) -> tuple[str, ...]:
    """The known columns of ``columns`` in the order of ``COLUMNS`` (the table's order), each once; the default
    columns when none is known."""
    wanted = set(columns)
    picked = tuple(key for key in COLUMNS if key in wanted)
    return picked or DEFAULT_COLUMNS


def read_fields(columns: Iterable[str]) -> tuple[str, ...]:
    """What a row of ``columns`` reads of each job: the table's columns and those the chosen columns add."""
    extra = [name for key in columns for name in COLUMNS[key].fields if name not in TABLE_COLUMNS]
    return TABLE_COLUMNS + tuple(dict.fromkeys(extra))


@dataclass(frozen=True)
class Extras:
    """What a page of rows shows beyond the job rows: per job id, the nodes it holds (or last held) and the mean
    utilisation of its GPUs while it held them (None: no reading)."""

    nodes: dict[int, tuple[str, ...]]
    utilization: dict[int, float | None]

    def of(self, job_id: int) -> tuple:
        """The part of a row's cache key these add (empty when neither column is shown)."""
        return self.nodes.get(job_id, ()), self.utilization.get(job_id)


NO_EXTRAS = Extras({}, {})


def extras_of(job_ids: Iterable[int], columns: Iterable[str]) -> Extras:
    """The nodes and the mean utilisation of ``job_ids``, read only for the columns shown (one query each)."""
    columns, ids = set(columns), list(job_ids)
    if not ids or not columns & {"node", "efficiency"}:
        return NO_EXTRAS
    return Extras(nodes_of(ids) if "node" in columns else {},
                  mean_utilization(ids) if "efficiency" in columns else {})


def nodes_of(job_ids: list[int]) -> dict[int, tuple[str, ...]]:
    """Each job's nodes: those it holds GPUs on now, or, once it holds none, those of its latest allocation."""
    held: dict[int, set[str]] = {}
    latest: dict[int, tuple[datetime, set[str]]] = {}
    rows = JobAllocation.objects.filter(job_id__in=job_ids).order_by() \
        .values_list("job_id", "allocated_at", "released_at", "gpu__node__name")
    for job_id, allocated_at, released_at, node in rows:
        if released_at is None:
            held.setdefault(job_id, set()).add(node)
        when, names = latest.get(job_id, (allocated_at, set()))
        if allocated_at > when:
            when, names = allocated_at, set()
        if allocated_at == when:
            names.add(node)
        latest[job_id] = (when, names)
    return {job_id: tuple(sorted(held.get(job_id) or names)) for job_id, (_when, names) in latest.items()}


def mean_utilization(job_ids: list[int]) -> dict[int, float | None]:
    """Each job's mean GPU utilisation (0-100) over the readings its GPUs gave while it held them: the
    list's "GPU use" column. The figure of the job's efficiency summary (``scheduling.jobs.efficiency``), read in
    SQL because the list sorts by it (``_efficiency``: the same join). Jobs older than the readings kept
    (``prune_readings``) have none."""
    rows = _held_readings(JobAllocation.objects.filter(job_id__in=job_ids)).order_by().values("job_id") \
        .annotate(mean=Avg("gpu__readings__utilization_pct")).values_list("job_id", "mean")
    return {job_id: (round(float(mean), 1) if mean is not None else None) for job_id, mean in rows}


def elapsed_seconds(job, now: datetime | None = None) -> int | None:
    if job.started_at is None:
        return None
    return int(((job.finished_at or now or timezone.now()) - job.started_at).total_seconds())


def wait_seconds(job, now: datetime | None = None) -> int | None:
    """Until it started; while it waits, until now; a job that ended without starting waited until it ended."""
    end = job.started_at or job.finished_at or (now or timezone.now())
    return max(0, int((end - job.submitted_at).total_seconds()))


#: What each column says of a job in an export (``export_value``).
_EXPORTS = {
    "name": lambda job, extras, now: job.name,
    "project": lambda job, extras, now: f"{job.tenant.name}/{job.project.name}",
    "task_type": lambda job, extras, now: job.task_type.code,
    "gpus": lambda job, extras, now: job.total_gpus,
    "model": lambda job, extras, now: job.gpu_model,
    "status": lambda job, extras, now: job.status,
    "position": lambda job, extras, now: job.queue_position,
    "reason": lambda job, extras, now: _reason_text(job),
    "submitted": lambda job, extras, now: job.submitted_at.isoformat(),
    "start": lambda job, extras, now: job.started_at.isoformat() if job.started_at else None,
    "end": lambda job, extras, now: job.finished_at.isoformat() if job.finished_at else None,
    "elapsed": lambda job, extras, now: elapsed_seconds(job, now),
    "wait": lambda job, extras, now: wait_seconds(job, now),
    "exit_code": lambda job, extras, now: job.exit_code,
    "node": lambda job, extras, now: ", ".join(extras.nodes.get(job.pk, ())),
    "efficiency": lambda job, extras, now: extras.utilization.get(job.pk),
}


def export_value(key: str, job: Job, extras: Extras, now: datetime):
    """What column ``key`` says of ``job`` in an export: numbers as numbers, moments in ISO 8601, durations
    in seconds, the reason as the sentence the list shows."""
    return _EXPORTS[key](job, extras, now)


def _reason_text(job) -> str:
    if job.wait_reason:
        return f"{job.get_wait_reason_display()}: {job.wait_reason_message}"
    return job.get_failure_category_display() if job.failure_category else ""
