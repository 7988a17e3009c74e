"""Read-side questions about jobs: quota use per tenant and model, the cluster queue, fair share.

Nothing here writes. Quota limits come from the one effective-quota rule (``tenants.quotas``), fair share
from the same snapshots the pass decides on (``snapshots``).
"""

from __future__ import annotations

import heapq
import json
import re
from dataclasses import dataclass

from django.db.models import Case, Count, F, Func, IntegerField, Max, Q, QuerySet, When
from django.utils import timezone
from django.utils.translation import gettext

from fleet.models import Cluster
from fleet.queries import capacity_summary
from scheduling.engine.passes import decayed_usage, tenant_shares
from scheduling.engine.reasons import WaitReason, render_reason, render_reason_for_others
from scheduling.models import (
    WAITING_STATUSES,
    Job,
    JobQueueState,
    JobStatus,
    local_moments,
    queue_places,
    task_type_label,
)
from scheduling.passes.snapshots import load_snapshots
from tenants.models import Quota
from tenants.quotas import effective_quotas, quota_gpus


@dataclass(frozen=True)
class QuotaUse:
    tenant: str
    gpu_model: str
    guaranteed: int
    limit: int  # effective: the configured limit plus active bursts
    used: int  # GPUs held, a share counting as one (tenants.quotas)
    queued: int
    burst: int = 0

    @property
    def configured_limit(self) -> int:
        return self.limit - self.burst

    @property
    def used_pct(self) -> float:
        return min(100.0, 100.0 * self.used / self.limit) if self.limit else 0.0

    @property
    def guaranteed_pct(self) -> float:
        return 100.0 * self.guaranteed / self.limit if self.limit else 0.0

    @property
    def borrowing(self) -> int:
        return max(0, self.used - self.guaranteed)


#: What the job tables (tags ``job_table``: the dashboard, the job list) show of a job and its reason (its place
#: comes from the queue table): the rest of the wide job row (the command, the executor's state, the request) is
#: not read for them.
TABLE_COLUMNS = ("id", "name", "status", "gpu_model", "node_count", "gpus_per_node", "gpu_milli",
                 "submitted_at", "failure_category", "tenant__name", "project__name", "owner__username",
                 "task_type__code", "queue_state__wait_reason", "queue_state__wait_reason_params")


def table_rows(jobs, fields: tuple[str, ...] = TABLE_COLUMNS):
    """``jobs`` reading only what a job table shows (``fields``: with the columns chosen, jobs.columns), in one
    query."""
    return jobs.select_related(None).select_related("tenant", "project", "owner", "task_type", "queue_state") \
        .only(*fields)


def shown_values(job, fields: tuple[str, ...]) -> tuple:
    """``fields`` of a job built as an instance, as ``values_list`` reads them (None where an outer join finds
    nothing: no queue state, no cluster): what a kept row's key is made of when the row was drawn from an instance
    (``scheduling.templatetags.job_tables``, ``scheduling.api.rows``)."""
    values = []
    for column in fields:
        value = job
        for name in column.split("__"):
            value = getattr(value, name, None)
        values.append(value)
    return tuple(values)


@dataclass(frozen=True)
class Timeline:
    """A job's events for its page: ``version`` names them (events are only ever added, so the newest id and
    the count change exactly when the timeline does) and keys the page's kept fragment; ``events`` is read only
    when that fragment is drawn again."""

    version: str
    events: QuerySet  # of JobEvent, with each event's actor; lazy


def timeline(job: Job) -> Timeline:
    seen = job.events.aggregate(newest=Max("id"), count=Count("id"))
    return Timeline(f"{seen['newest']}-{seen['count']}", job.events.select_related("actor"))


def quota_usage(user) -> list[QuotaUse]:
    """Each visible tenant's quota per GPU model, with GPUs in use and GPUs asked for by queued jobs (counted
    by size in the database: a queue of thousands is a handful of rows here)."""
    jobs = Job.objects.visible_to(user)
    used = {(r["tenant__name"], r["gpu_model"]): r["gpus"] for r in jobs.active()
            .values("tenant__name", "gpu_model")
            .annotate(gpus=Count("allocations", filter=Q(allocations__released_at__isnull=True)))}
    queued: dict[tuple[str, str], int] = {}
    for size in (jobs.filter(status=JobStatus.QUEUED).order_by()
                 .values("tenant__name", "gpu_model", "gpus_per_node", "node_count").annotate(jobs=Count("id"))):
        key = (size["tenant__name"], size["gpu_model"])
        queued[key] = queued.get(key, 0) + size["jobs"] * quota_gpus(size["gpus_per_node"], size["node_count"])
    return [QuotaUse(q.tenant, q.gpu_model, q.guaranteed, q.effective_limit, used.get((q.tenant, q.gpu_model), 0),
                     queued.get((q.tenant, q.gpu_model), 0), q.burst)
            for q in effective_quotas(Quota.objects.visible_to(user))]


def size_text(nodes: int, gpus_per_node: int, gpu_milli: int, gpu_model: str) -> str:
    """``nodes x GPUs per node [x share] model``: how the queue shows a job, also other tenants' jobs."""
    share = f" x {gpu_milli / 1000:g}" if gpu_milli < 1000 else ""
    return f"{nodes} x {gpus_per_node:g}{share} {gpu_model}"


def cluster_queue(user, cluster_name: str | None = None, gpu_model: str | None = None) -> list[dict]:
    """The waiting jobs in queue order, each with its reason as a sentence in the reader's language and its
    position among the jobs waiting for the same GPU model (``model_position``: the order in which that model's
    GPUs go; ``position`` counts every model). Other tenants' jobs show their tenant, size and reason, the
    sentence without who or which job (``render_reason_for_others``)."""
    visible = set(Job.objects.visible_to(user).waiting().values_list("pk", flat=True))
    states = (JobQueueState.objects.select_related("job__tenant", "job__task_type", "job__owner", "job__cluster")
              .filter(job__status__in=WAITING_STATUSES))
    clusters = {c.name for c in Cluster.objects.all()}
    places = queue_places()
    rows = []
    for state in sorted(states, key=lambda s: places.queue_key(s.job_id, s.job.submitted_at)):
        job = state.job
        home = job.cluster.name if job.cluster else None
        if cluster_name and cluster_name in clusters and home and home != cluster_name:
            continue
        if gpu_model and job.gpu_model != gpu_model:
            continue
        mine = job.pk in visible
        place = places.get(job.pk)
        rows.append({"position": place.position if place else None,
                     "model_position": place.model_position if place else None,
                     "tenant": job.tenant.name, "job": job if mine else None,
                     "id": job.pk if mine else None, "task_type": job.task_type.code,
                     "gpu_model": job.gpu_model,
                     "task_type_label": task_type_label(job.task_type.display_name, job.priority),
                     "size": size_text(job.node_count, job.gpus_per_node, job.gpu_milli, job.gpu_model),
                     "priority": job.priority, "reason": state.wait_reason,
                     "reason_label": job.get_wait_reason_display() if state.wait_reason else "",
                     "message": _queue_sentence(state, mine), "estimated_start": job.estimated_start,
                     "earliest_start": job.earliest_start, "latest_start": job.latest_start,
                     "likely_start": job.likely_start})
    return rows


#: What ``QueuePlaces.ranks_json`` is made of (job ids and ranks): nothing that needs quoting in SQL.
_RANKS = re.compile(r'[{}0-9":, ]*')


class _RankOf(Func):
    """A job's rank looked up by its id in a JSON object of ranks (``queue_rank``): PostgreSQL finds a key of a
    ``jsonb`` object by binary search, so a list of every job sorts in one pass over it.

    The ranks are written into the SQL as a constant, not bound as a parameter: a prepared query's generic plan
    (``settings.base.postgresql_options``) would read a parameter's JSON again for every row, where a constant is
    read once, when the query is planned."""

    output_field = IntegerField()

    def __init__(self, ranks: str, pk, **extra):
        if not _RANKS.fullmatch(ranks):
            raise ValueError("queue ranks hold job ids and ranks only")
        self.ranks = ranks
        super().__init__(pk, **extra)

    def as_sql(self, compiler, connection, **extra):
        pk, pk_params = compiler.compile(self.get_source_expressions()[0])
        if connection.vendor == "postgresql":
            return f"('{self.ranks}'::jsonb ->> ({pk})::text)::integer", pk_params
        return f"CAST(json_extract('{self.ranks}', '$.\"' || {pk} || '\"') AS INTEGER)", pk_params


def queue_rank() -> Case:
    """Each job's rank in queue order (1 first) while it waits, NULL otherwise, as an expression to sort a
    queryset by: the places are the queue table's (``models.queue_places``), not columns of the job rows."""
    return Case(When(status__in=WAITING_STATUSES, then=_RankOf(queue_places().ranks_json, F("pk"))), default=None,
                output_field=IntegerField())


def in_queue_order(jobs, limit: int) -> QuerySet:
    """The first ``limit`` of ``jobs`` (waiting ones) in queue order (``QueuePlaces.queue_key``): by the queue
    table's rank, then the jobs no pass has ranked yet by submission.

    Only the ids of ``jobs`` are read and ranked here, and the rows of the first ``limit`` are read in that order:
    sorting every waiting job in SQL by a rank looked up in the queue's JSON took 6 ms of the database's time for
    each dashboard at 2,800 waiting jobs, and sent that JSON (37 kB) with the query."""
    ranks = queue_places().ranks
    ids = list(jobs.filter(status__in=WAITING_STATUSES).order_by().values_list("pk", flat=True))
    first = [pk for _rank, pk in heapq.nsmallest(limit, ((ranks[pk], pk) for pk in ids if pk in ranks))]
    if len(first) < limit:  # then the unranked ones: every ranked job is in ``first`` already
        unranked = [pk for pk in ids if pk not in ranks]
        first += jobs.filter(pk__in=unranked).order_by("submitted_at", "pk").values_list(
            "pk", flat=True)[:limit - len(first)] if unranked else []
    # One lookup in a constant of the first ranks: a CASE of twenty WHENs cost the ORM a filter to build and
    # compile for each (1.6 ms of CPU a dashboard for the query's SQL, against 0.3 ms).
    order = _RankOf(json.dumps({str(pk): place for place, pk in enumerate(first)}), F("pk"))
    return jobs.filter(pk__in=first).order_by(order) if first else jobs.none()


def _queue_sentence(state: JobQueueState, mine: bool) -> str:
    """The job page's sentence for the reader's own jobs; for another tenant's, the same without identities."""
    if not state.wait_reason:
        return ""
    render = render_reason if mine else render_reason_for_others
    try:
        return render(state.wait_reason, local_moments(state.wait_reason_params), translate=gettext)
    except (KeyError, TypeError, ValueError):  # numbers stored by an older pass: the reason's label still reads
        return gettext(WaitReason(state.wait_reason).label)


def queue_models() -> list[str]:
    """The GPU models some job waits for (the queue page's filter)."""
    return sorted(set(JobQueueState.objects.filter(job__status__in=WAITING_STATUSES)
                      .values_list("job__gpu_model", flat=True)))


def fair_share_report() -> list:
    """Each tenant's weight, fair share, decayed usage and running GPUs: why another tenant goes first.

    Read from the snapshot the pass would schedule the first cluster with (every snapshot holds every
    tenant's running jobs and usage), so the page shows what the pass uses."""
    snapshots, _nodes, _gpus = load_snapshots(timezone.now())
    if not snapshots:
        return []
    snapshot = snapshots[min(snapshots)]
    return tenant_shares(snapshot, decayed_usage(snapshot))


def usable_gpu_model(user, models: list[str], tenants: set[str]) -> str | None:
    """The model the submit form opens on: of ``models`` (in the catalogue's order), the first where one of
    ``tenants`` (those the user may submit in) has quota left now and the cluster a free GPU; failing that, the
    first with quota left; None when none has any (the form then keeps its first model)."""
    free = {row.gpu_model: row.free for row in capacity_summary()}
    left = {q.gpu_model for q in quota_usage(user) if q.tenant in tenants and q.used < q.limit}
    with_quota = [model for model in models if model in left]
    return next((model for model in with_quota if free.get(model, 0) > 0), with_quota[0] if with_quota else None)
