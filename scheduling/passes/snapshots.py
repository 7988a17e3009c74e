"""The world as the scheduling engine sees it: plain snapshots built from the database, one per cluster.

Quotas come from the one effective-quota rule (``tenants.quotas``: limit + active bursts); running jobs carry
their real placements; waiting jobs are routed to a cluster; work the portal did not submit (``fleet.OutsideWork``,
kept by the cluster's inventory sync) holds its GPUs in its cluster's snapshot. Nothing here decides anything.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, time, timedelta
from operator import itemgetter

from django.conf import settings
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Sum, Value
from django.db.models.functions import Greatest, TruncDate
from django.utils import timezone

from fleet.models import Cluster, ExecutorKind, Node, OutsideWork
from scheduling import engine
from scheduling.engine.estimate import runtime_from_history
from scheduling.jobs import dependencies
from scheduling.models import (
    ACTIVE_STATUSES,
    LONG_RUNNING_KINDS,
    WAITING_STATUSES,
    Job,
    JobAllocation,
    JobStatus,
    Reservation,
    WorkloadKind,
)
from scheduling.passes.workload import recent_shapes
from tenants.models import DepartmentQuota, Tenant
from tenants.quotas import effective_quotas

#: Finished jobs older than this many half-lives no longer matter for fair share.
USAGE_HALF_LIVES = 4
#: Runtime estimates come from up to this many recent successful jobs per task type and size.
HISTORY_JOBS = 2000


def policy_for(cluster: Cluster) -> engine.Policy:
    return engine.Policy(name=cluster.name, ordering=cluster.ordering, placement=cluster.placement,
                         backfill=cluster.backfill, preemption=cluster.preemption,
                         half_life_seconds=cluster.fair_share_half_life_hours * 3600)


def runtime_estimates(now, finished_before=None) -> dict[tuple[str, int], float]:
    """Expected runtime per (task type, GPUs): the 75th percentile of recent successful runs (of those finished
    before ``finished_before`` only, when given: a replay of a past month knows what was known then)."""
    samples: dict[tuple[str, int], list[float]] = defaultdict(list)
    done = Job.objects.filter(status=JobStatus.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
    if finished_before is not None:
        done = done.filter(finished_at__lt=finished_before)
    rows = (done
            .order_by("-finished_at").values_list("task_type__code", "gpus_per_node", "node_count", "started_at",
                                                  "finished_at")[:HISTORY_JOBS])
    for code, per_node, nodes, started, finished in rows:
        samples[(code, per_node * nodes)].append((finished - started).total_seconds())
    estimates = {key: runtime_from_history(values) for key, values in samples.items()}
    return {key: value for key, value in estimates.items() if value is not None}


def usage_history(now, half_life_seconds: float) -> tuple[engine.UsageRecord, ...]:
    """GPU-seconds of finished allocations per tenant and day (its noon, UTC), over the last few half-lives.

    Summed by the database per tenant, day and GPU share: a busy site releases thousands of allocations a day,
    and every pass reads this, so it reads a row per tenant and day rather than one per allocation."""
    since = now - timedelta(seconds=USAGE_HALF_LIVES * half_life_seconds)
    held = ExpressionWrapper(F("released_at") - Greatest("allocated_at", Value(since, DateTimeField())),
                             output_field=DurationField())
    per_day: dict[tuple[str, datetime], float] = defaultdict(float)
    rows = (JobAllocation.objects.filter(released_at__gte=since).order_by()
            .values_list("job__tenant__name", TruncDate("released_at", tzinfo=UTC), "fraction")
            .annotate(held=Sum(held)))
    for tenant, day, fraction, seconds in rows:
        noon = datetime.combine(day, time(12), tzinfo=UTC)
        per_day[(tenant, noon)] += seconds.total_seconds() * float(fraction)
    return tuple(engine.UsageRecord(t, day.timestamp(), seconds) for (t, day), seconds in per_day.items())


def _preemptible(job: dict) -> bool:
    """Services stay up: no lower class may take their GPUs (the task type decides for every other kind)."""
    return job["task_type__preemptible"] and job["kind"] != WorkloadKind.SERVICE


def _max_runtime(job: dict) -> float:
    """Seconds it may run; a job with no max runtime (a service) has no end."""
    minutes = job["max_runtime_minutes"]
    return math.inf if minutes is None else minutes * 60.0


def _expected_runtime(job: dict, estimates: dict) -> float | None:
    """What history says a batch job of its type and size runs; notebooks and services run until stopped, so
    only their max runtime (often none) bounds them."""
    if job["kind"] in LONG_RUNNING_KINDS:
        return None
    return estimates.get((job["task_type__code"], job["gpus_per_node"] * job["node_count"]))


def _array_of(job: dict) -> str:
    """The array an array task belongs to, as its wait reason names it ("" for any other job)."""
    if job["kind"] != WorkloadKind.ARRAY or job["group_id"] is None:
        return ""
    return f"#{job['group_id']} {job['group__name']}"


#: What a running job's row says to the engine (``running_jobs``), and a waiting job's (``waiting_job``): the reads
#: of a full rebuild and of the scheduler's kept view (``passes.kept``) select exactly these, so the fingerprint
#: that view keeps of a row covers everything the engine is told about it.
RUNNING_FIELDS = ("id", "tenant__name", "gpu_model", "priority", "task_type__preemptible", "task_type__code",
                  "submitted_at", "admitted_at", "started_at", "max_runtime_minutes", "gpus_per_node", "node_count",
                  "cpu_milli", "memory_mib", "kind", "group_id", "group__name", "owner_id")
WAITING_FIELDS = ("id", "tenant__name", "gpu_model", "gpus_per_node", "node_count", "priority", "task_type__code",
                  "task_type__preemptible", "submitted_at", "gpu_milli", "cpu_milli", "memory_mib", "topology",
                  "max_runtime_minutes", "held_by", "status", "cluster__name", "executor_state", "spare_own_jobs",
                  "kind", "group_id", "group__name", "group__parallelism", "accept_models", "owner_id",
                  "asked_cluster__name")


@dataclass
class JobRows:
    """The job rows a snapshot is built from, by job id: waiting and running jobs, and each running job's GPUs
    as (node id, index, share)."""

    waiting: dict[int, dict]
    running: dict[int, dict]
    placements: dict[int, list[tuple[int, int, float]]]
    #: The engine's job built from each row last time, with the row and what else it was built from: a kept row
    #: (the same dict, ``passes.kept``) built from the same inputs gives the same job, so it is not built again.
    built: dict[int, tuple] = field(default_factory=dict)

    def reuse(self, row: dict, inputs, runtime, build) -> tuple:
        """``build()``'s (extra, engine job) for ``row``, built only when the row or ``inputs`` (everything else
        it is built from but the expected runtime) changed; a new ``runtime`` alone (history moves as jobs end)
        is set on a copy (``_with_runtime``)."""
        last = self.built.get(row["id"])
        if last is None or last[0] is not row or last[1] != inputs:
            made = build()
        else:
            extra, job = last[2]
            if job.expected_runtime == runtime:
                return extra, job
            made = (extra, _with_runtime(job, runtime))
        self.built[row["id"]] = (row, inputs, made)
        return made


def _with_runtime(job, runtime):
    """``dataclasses.replace(job, expected_runtime=runtime)`` for the engine's plain frozen job types, at an eighth
    of its cost (0.6 against 5 microseconds a job; at 100,000 waiting jobs, whose runtimes all move as history
    does, ``replace`` took 0.4-0.9 s a pass): a copy of the instance's fields with the one that changed."""
    if not hasattr(job, "__dict__"):  # a type with slots: no fields to copy wholesale
        return replace(job, expected_runtime=runtime)
    copied = object.__new__(type(job))
    copied.__dict__.update(job.__dict__)
    object.__setattr__(copied, "expected_runtime", runtime)
    return copied


@dataclass
class Fleet:
    """Clusters, and nodes with their GPUs prefetched (the decisions are applied with these instances)."""

    clusters: list
    nodes: list
    #: What is derived from ``nodes`` alone (GPUs by key, the engine's nodes per cluster): the kept view hands it on
    #: while the nodes are the same (``passes.kept``), so 10,000 nodes are not turned into engine nodes every pass.
    derived: dict = field(default_factory=dict)

    @property
    def node_by_id(self) -> dict:
        if "node_by_id" not in self.derived:
            self.derived["node_by_id"] = {n.id: n for n in self.nodes}
        return self.derived["node_by_id"]

    @property
    def gpu_by_key(self) -> dict:
        if "gpu_by_key" not in self.derived:
            self.derived["gpu_by_key"] = {(g.node_id, g.index): g for n in self.nodes for g in n.gpus.all()}
        return self.derived["gpu_by_key"]

    def healthy(self) -> tuple[dict[int, bool], dict[tuple[str, str], int]]:
        """Whether each node is schedulable, and the healthy GPUs on schedulable nodes per (cluster, model), what a
        waiting job's home cluster is chosen by (``home_cluster``); counted again when a cluster's name changed."""
        names = tuple(sorted((c.pk, c.name) for c in self.clusters))
        key, counted = self.derived.get("healthy", (None, None))
        if key != names:
            schedulable = {node.id: node.schedulable for node in self.nodes}
            healthy_gpus: dict[tuple[str, str], int] = defaultdict(int)
            for node in self.nodes:
                if schedulable[node.id]:
                    healthy_gpus[(node.cluster.name, node.gpu_model)] += sum(1 for g in node.gpus.all() if g.healthy)
            counted = (schedulable, dict(healthy_gpus))
            self.derived["healthy"] = (names, counted)
        return counted

    def engine_nodes(self, cluster: Cluster) -> tuple[engine.NodeSnapshot, ...]:
        """The engine's nodes of ``cluster`` (built again when its name, which they carry, changed)."""
        name, built = self.derived.get(("engine_nodes", cluster.pk), (None, ()))
        if name != cluster.name:
            built = tuple(_node_snapshot(n) for n in self.nodes if n.cluster_id == cluster.pk)
            self.derived[("engine_nodes", cluster.pk)] = (cluster.name, built)
        return built


def waiting_queryset():
    """The jobs the pass schedules (the kept view reads the same, by fingerprint)."""
    return Job.objects.filter(status__in=WAITING_STATUSES).order_by()


def running_queryset():
    """The jobs that hold GPUs (the kept view reads the same, by fingerprint)."""
    return Job.objects.active().order_by()


def waiting_rows() -> dict[int, dict]:
    """Waiting jobs' rows by id."""
    return {row["id"]: row for row in waiting_queryset().values(*WAITING_FIELDS)}


def running_rows() -> dict[int, dict]:
    """Running (GPU-holding) jobs' rows by id."""
    return {row["id"]: row for row in running_queryset().values(*RUNNING_FIELDS)}


def placements_of_running() -> dict[int, list[tuple[int, int, float]]]:
    """The GPUs each running job holds, as (node id, index, share), in one query."""
    placements: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    for job_id, node_id, index, fraction in JobAllocation.objects.filter(
            released_at__isnull=True, job__status__in=ACTIVE_STATUSES).order_by().values_list(
            "job_id", "gpu__node_id", "gpu__index", "fraction"):
        placements[job_id].append((node_id, index, float(fraction)))
    return placements


def read_job_rows() -> JobRows:
    return JobRows(waiting=waiting_rows(), running=running_rows(), placements=placements_of_running())


def read_fleet_clusters() -> list:
    return list(Cluster.objects.all())


def read_fleet() -> Fleet:
    return Fleet(clusters=read_fleet_clusters(),
                 nodes=list(Node.objects.select_related("cluster").prefetch_related("gpus")))


def _newest_first(rows: dict[int, dict]) -> list[dict]:
    """The order the job list has everywhere (newest submission first), whichever way the rows were read."""
    return sorted(rows.values(), key=_SUBMITTED, reverse=True)


#: The sort key of ``_newest_first`` (``itemgetter``: half the cost of a lambda over 140,000 rows).
_SUBMITTED = itemgetter("submitted_at", "id")


def running_jobs(now, estimates: dict | None = None, rows: JobRows | None = None) -> tuple[engine.RunningJob, ...]:
    """Every job holding GPUs, with its real placements (node, indices, share)."""
    estimates = runtime_estimates(now) if estimates is None else estimates
    if rows is None:
        rows = JobRows(waiting={}, running=running_rows(), placements=placements_of_running())
    running = []
    for job in _newest_first(rows.running):
        placements = tuple(rows.placements.get(job["id"], ()))
        # ``now`` counts only for a job with neither start: then it is built again every time
        inputs = (placements, job["started_at"] or job["admitted_at"] or now)
        running.append(rows.reuse(job, inputs, _expected_runtime(job, estimates), lambda job=job, p=placements: (
            None, running_job(job, p, estimates, now)))[1])
    for gone in rows.built.keys() - rows.running.keys() - rows.waiting.keys():
        del rows.built[gone]
    return tuple(running)


def running_job(job: dict, placements, estimates: dict, now) -> engine.RunningJob:
    """A running job as the engine sees it, from its row and the GPUs it holds."""
    per_node: dict[tuple[int, int], list[int]] = defaultdict(list)
    for node_id, index, fraction in placements:
        per_node[(node_id, round(fraction * 1000))].append(index)
    started = job["started_at"] or job["admitted_at"] or now
    return engine.RunningJob(
        id=job["id"], tenant=job["tenant__name"], gpu_model=job["gpu_model"], priority=job["priority"],
        preemptible=_preemptible(job), task_type=job["task_type__code"],
        submitted_at=job["submitted_at"].timestamp(), started_at=started.timestamp(),
        max_runtime=_max_runtime(job), expected_runtime=_expected_runtime(job, estimates),
        cpu_milli=job["cpu_milli"], memory_mib=job["memory_mib"], group=_array_of(job), owner=job["owner_id"],
        placements=tuple(engine.Placement(n, tuple(sorted(ix)), milli) for (n, milli), ix in
                         sorted(per_node.items())))


#: The name a wait reason gives the scheduler that work outside the portal was submitted to, by executor (a name,
#: not a word: it reads the same in every language). A kind not listed has none: the reason says "outside the
#: portal" only.
SCHEDULER_NAMES = {ExecutorKind.SLURM: "Slurm", ExecutorKind.KUBERNETES: "Kubernetes"}


def outside_holds(now) -> dict[int, tuple[engine.OutsideHold, ...]]:
    """The GPUs work the portal did not submit holds, by cluster id, in one query. A hold frees its GPUs at its
    start plus its time limit; without either the end is unknown (infinite), so no estimate counts on it."""
    holds: dict[int, list[engine.OutsideHold]] = defaultdict(list)
    for cluster_id, executor, node_id, external_id, indices, started, limit in OutsideWork.objects.values_list(
            "cluster_id", "cluster__executor", "node_id", "external_id", "gpu_indices", "started_at",
            "time_limit_seconds"):
        known = started is not None and limit is not None
        holds[cluster_id].append(engine.OutsideHold(
            node_id=node_id, gpu_indices=tuple(sorted(int(i) for i in indices or ())), external_id=external_id,
            started_at=(started or now).timestamp(), time_limit=float(limit) if known else math.inf,
            scheduler=SCHEDULER_NAMES.get(executor, "")))
    return {cluster_id: tuple(found) for cluster_id, found in holds.items()}


def avoided_nodes(state: dict | None, now, schedulable: dict[int, bool]) -> tuple[int, ...]:
    """The nodes a waiting job still avoids (``executor_state``'s ``avoid_nodes``, written by the retry rule,
    ``lifecycle.fail_or_retry``). An avoidance older than ``SCHEDULER["AVOID_NODE_HOURS"]`` ends once its node
    is schedulable again (repaired, healthy, not cordoned): a fault of last week does not exclude a node for ever,
    while a node that keeps failing is avoided again after its next fault. Avoidances without a time (older
    states) do not expire."""
    state = state or {}
    since = state.get("avoid_since") or {}
    bound = now - timedelta(hours=settings.SCHEDULER["AVOID_NODE_HOURS"])
    kept = []
    for node_id in state.get("avoid_nodes", ()):
        at = since.get(str(node_id))
        if at and datetime.fromisoformat(at) < bound and schedulable.get(node_id):
            continue
        kept.append(node_id)
    return tuple(kept)


#: Executors that run batch work on whole GPUs only (Slurm, docs/slurm.md): notebooks, services and GPU shares are
#: never routed to their clusters.
BATCH_ONLY_EXECUTORS = frozenset({ExecutorKind.SLURM})


def clusters_for(executors: dict[str, str], kind: str, gpu_milli: int) -> list[str]:
    """The clusters (``executors``: name -> executor kind) whose executor can run a job of ``kind`` with
    ``gpu_milli`` of each GPU: the pass routes a waiting job only to these, and the preview routes a new one the
    same way."""
    if kind in LONG_RUNNING_KINDS or gpu_milli < 1000:
        return [name for name, executor in executors.items() if executor not in BATCH_ONLY_EXECUTORS]
    return list(executors)


def home_cluster(healthy_gpus: dict[tuple[str, str], int], cluster_names, gpu_model: str) -> str:
    """The cluster a waiting job that names none is scheduled on: the one with the most healthy GPUs of its
    model on schedulable nodes (``healthy_gpus``: (cluster, model) -> GPUs), the last name on a tie."""
    return max(cluster_names, key=lambda name: (healthy_gpus.get((name, gpu_model), 0), name), default="")


def healthy_gpus_of(snapshots: dict[str, engine.Snapshot]) -> dict[tuple[str, str], int]:
    """``home_cluster``'s count read from engine snapshots (their nodes list healthy GPUs only)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for name, snapshot in snapshots.items():
        for node in snapshot.nodes:
            if node.schedulable:
                counts[(name, node.gpu_model)] += len(node.gpu_indices)
    return counts


def _waiting_by_cluster(fleet: Fleet, estimates, now, rows: JobRows,
                        after: dict[int, tuple[engine.Dependency, ...]] | None = None) -> dict[str, list]:
    """Waiting jobs by the cluster they belong to: the one they name (placed there, or asked for at submission),
    else the one with the most healthy GPUs of their model. ``after``: each job's dependencies as read this pass
    (``jobs.dependencies.waiting_dependencies``), part of what a kept job is built from, so that a parent's new
    status reaches the engine although the waiting job's own row is unchanged."""
    after, clusters = after or {}, fleet.clusters
    schedulable, healthy_gpus = fleet.healthy()
    by_cluster: dict[str, list] = defaultdict(list)
    executors = {c.name: c.executor for c in clusters}
    homes = (sorted(healthy_gpus.items()), sorted(executors.items()))  # what a job's home cluster depends on

    def routed(j):
        home = j["cluster__name"] or j["asked_cluster__name"] or home_cluster(
            healthy_gpus, clusters_for(executors, j["kind"], j["gpu_milli"]), j["gpu_model"])
        return home, waiting_job(j, estimates, now, schedulable, after.get(j["id"], ()))

    for j in _newest_first(rows.waiting):
        # avoided nodes depend on the clock and the nodes' state: such a job is built again every time
        inputs = (now if (j["executor_state"] or {}).get("avoid_nodes") else None, homes, after.get(j["id"]))
        home, job = rows.reuse(j, inputs, _expected_runtime(j, estimates), lambda j=j: routed(j))
        by_cluster[home].append(job)
    return by_cluster


def waiting_job(j: dict, estimates: dict, now, schedulable: dict[int, bool],
                after: tuple[engine.Dependency, ...] = ()) -> engine.WaitingJob:
    """A waiting job as the engine sees it, from the row ``_waiting_by_cluster`` reads (the preview of a new
    submission builds the same row, so that it sees the job as the pass will once it is stored)."""
    return engine.WaitingJob(
        id=j["id"], tenant=j["tenant__name"], gpu_model=j["gpu_model"], gpus_per_node=j["gpus_per_node"],
        nodes=j["node_count"], priority=j["priority"], task_type=j["task_type__code"],
        submitted_at=j["submitted_at"].timestamp(), gpu_milli=j["gpu_milli"], cpu_milli=j["cpu_milli"],
        memory_mib=j["memory_mib"], topology=j["topology"], max_runtime=_max_runtime(j),
        expected_runtime=_expected_runtime(j, estimates), preemptible=_preemptible(j), held=j["held_by"],
        group=_array_of(j), group_limit=(j["group__parallelism"] or 0) if _array_of(j) else 0,
        accept_models=tuple(j["accept_models"] or ()),
        awaiting_approval=j["status"] == JobStatus.PENDING, owner=j["owner_id"],
        spare_owner=j["spare_own_jobs"], after=after,
        avoid_nodes=avoided_nodes(j["executor_state"], now, schedulable))


def quota_snapshots(now) -> tuple[engine.QuotaSnapshot, ...]:
    """Every tenant's quota as the engine sees it at ``now`` (the one effective-quota rule, bursts included)."""
    return tuple(engine.QuotaSnapshot(q.tenant, q.gpu_model, q.guaranteed, q.effective_limit, q.department)
                 for q in effective_quotas(now=now))


def department_snapshots() -> tuple[engine.DepartmentQuota, ...]:
    return tuple(engine.DepartmentQuota(d.department.name, d.gpu_model, d.limit_gpus)
                 for d in DepartmentQuota.objects.select_related("department"))


def tenant_infos() -> tuple[engine.TenantInfo, ...]:
    return tuple(engine.TenantInfo(name, weight) for name, weight in Tenant.objects.values_list(
        "name", "fair_share_weight"))


def load_snapshots(now=None, fleet: Fleet | None = None, rows: JobRows | None = None):
    """One engine snapshot per cluster, plus the nodes and GPUs by key, to apply decisions with.

    The pass, the impact preview of a request and the fair-share report all read the world through here, so
    what they show is what the pass would decide on. The pass hands in the fleet and job rows its kept view
    holds (``passes.kept``); everything else is read here every time (small, or changing with the clock)."""
    now = now or timezone.now()
    fleet = fleet or read_fleet()
    rows = rows or read_job_rows()
    clusters = fleet.clusters
    estimates = runtime_estimates(now)
    running = running_jobs(now, estimates, rows)
    quotas, department_quotas, tenants = quota_snapshots(now), department_snapshots(), tenant_infos()
    reservations = tuple(engine.Reservation(r.pk, r.tenant.name, r.gpu_model, r.gpus, r.start.timestamp(),
                                            r.end.timestamp())
                         for r in Reservation.objects.filter(end__gt=now).select_related("tenant"))

    by_cluster = _waiting_by_cluster(fleet, estimates, now, rows, dependencies.waiting_dependencies())
    outside = outside_holds(now)
    history = recent_shapes(now, [cluster.pk for cluster in clusters])
    snapshots = {}
    for cluster in clusters:
        policy = policy_for(cluster)
        snapshots[cluster.name] = engine.Snapshot(
            nodes=fleet.engine_nodes(cluster),
            running=running, waiting=tuple(by_cluster.get(cluster.name, ())), quotas=quotas,
            departments=department_quotas, reservations=reservations, tenants=tenants,
            usage=usage_history(now, policy.half_life_seconds), now=now.timestamp(), policy=policy,
            outside=outside.get(cluster.pk, ()), history=history.get(cluster.pk, ()))
    return snapshots, fleet.node_by_id, fleet.gpu_by_key


def _node_snapshot(node: Node) -> engine.NodeSnapshot:
    gpus = list(node.gpus.all())
    return engine.NodeSnapshot(
        id=node.id, name=node.name, gpu_model=node.gpu_model, cluster=node.cluster.name,
        datacenter=node.datacenter, rack=node.rack, network_domain=node.network_domain,
        schedulable=node.schedulable, gpu_total=len(gpus), cpu_milli=node.cpu_milli,
        memory_mib=node.memory_mib, gpu_indices=tuple(sorted(g.index for g in gpus if g.healthy)))
