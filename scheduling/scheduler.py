"""The scheduling pass: database -> engine snapshot -> decisions -> database, in one transaction.

Only one pass runs at a time across all workers: on PostgreSQL a transaction-level advisory lock is
taken first and a second pass that finds it held returns at once (the next beat tick comes soon). The
whole apply step is one transaction, so a pass that dies halfway leaves nothing half-applied.

Each cluster is scheduled with its own policy. A queued job belongs to the cluster it names, else to the
cluster with the most healthy GPUs of its model. Quotas count the tenant's jobs on every cluster.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit import log as audit
from audit.models import AuditAction
from gpuportal.db import bulk_insert, bulk_set
from tenants.models import DepartmentQuota, Quota, QuotaBurst, Tenant

from . import engine, lifecycle
from .engine.estimate import runtime_from_history
from .models import (
    ACTIVE_STATUSES,
    Cluster,
    FailureCategory,
    Job,
    JobAllocation,
    JobEvent,
    JobQueueState,
    JobStatus,
    Node,
    Reservation,
)

logger = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock that serialises scheduling passes ("GPUSCHED").
PASS_LOCK_KEY = 0x47505553434845
#: Finished jobs older than this many half-lives no longer matter for fair share.
USAGE_HALF_LIVES = 4
#: Runtime estimates come from up to this many recent successful jobs per task type and size.
HISTORY_JOBS = 2000


@dataclass
class PassReport:
    """What a pass did, for `schedule_once`, logs and tests."""

    ran: bool = True
    admitted: list[tuple[int, str]] = field(default_factory=list)
    preempted: list[tuple[int, int, str]] = field(default_factory=list)
    waiting: list[tuple[int, str, str]] = field(default_factory=list)
    shares: dict[str, list] = field(default_factory=dict)
    seconds: float = 0.0
    load_seconds: float = 0.0
    engine_seconds: float = 0.0
    apply_seconds: float = 0.0


def _acquire_pass_lock() -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite serialises writers itself (IMMEDIATE transactions)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [PASS_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def policy_for(cluster: Cluster) -> engine.Policy:
    return engine.Policy(name=cluster.name, ordering=cluster.ordering, placement=cluster.placement,
                         backfill=cluster.backfill, preemption=cluster.preemption,
                         half_life_seconds=cluster.fair_share_half_life_hours * 3600)


def runtime_estimates(now) -> dict[tuple[str, int], float]:
    """Expected runtime per (task type, GPUs): the 75th percentile of recent successful runs."""
    samples: dict[tuple[str, int], list[float]] = defaultdict(list)
    rows = (Job.objects.filter(status=JobStatus.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
            .order_by("-finished_at").values_list("task_type__code", "gpus_per_node", "node_count", "started_at",
                                                  "finished_at")[:HISTORY_JOBS])
    for code, per_node, nodes, started, finished in rows:
        samples[(code, per_node * nodes)].append((finished - started).total_seconds())
    estimates = {key: runtime_from_history(values) for key, values in samples.items()}
    return {key: value for key, value in estimates.items() if value is not None}


def usage_history(now, half_life_seconds: float) -> tuple[engine.UsageRecord, ...]:
    """GPU-seconds of finished allocations per tenant and day, over the last few half-lives."""
    since = now - timedelta(seconds=USAGE_HALF_LIVES * half_life_seconds)
    per_day: dict[tuple[str, datetime], float] = defaultdict(float)
    rows = JobAllocation.objects.filter(released_at__gte=since).values_list(
        "job__tenant__name", "allocated_at", "released_at", "fraction")
    for tenant, start, end, fraction in rows:
        day = end.replace(hour=12, minute=0, second=0, microsecond=0)
        per_day[(tenant, day)] += (end - max(start, since)).total_seconds() * float(fraction)
    return tuple(engine.UsageRecord(t, day.timestamp(), seconds) for (t, day), seconds in per_day.items())


def load_snapshots(now=None):
    """One engine snapshot per cluster, plus the rows needed to apply decisions."""
    now = now or timezone.now()
    clusters = list(Cluster.objects.all())
    nodes = list(Node.objects.select_related("cluster").prefetch_related("gpus"))
    node_by_id = {n.id: n for n in nodes}
    gpu_by_key = {(g.node_id, g.index): g for n in nodes for g in n.gpus.all()}
    estimates = runtime_estimates(now)
    placements: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    for job_id, node_id, index, fraction in JobAllocation.objects.filter(
            released_at__isnull=True, job__status__in=ACTIVE_STATUSES).values_list(
            "job_id", "gpu__node_id", "gpu__index", "fraction"):
        placements[job_id].append((node_id, index, float(fraction)))
    running = []
    for job in Job.objects.active().values("id", "tenant__name", "gpu_model", "priority", "task_type__preemptible",
                                           "task_type__code", "submitted_at", "admitted_at", "started_at",
                                           "max_runtime_minutes", "gpus_per_node", "node_count", "cpu_milli",
                                           "memory_mib"):
        per_node: dict[tuple[int, int], list[int]] = defaultdict(list)
        for node_id, index, fraction in placements.get(job["id"], []):
            per_node[(node_id, round(fraction * 1000))].append(index)
        started = job["started_at"] or job["admitted_at"] or now
        running.append(engine.RunningJob(
            id=job["id"], tenant=job["tenant__name"], gpu_model=job["gpu_model"], priority=job["priority"],
            preemptible=job["task_type__preemptible"], task_type=job["task_type__code"],
            submitted_at=job["submitted_at"].timestamp(), started_at=started.timestamp(),
            max_runtime=job["max_runtime_minutes"] * 60.0,
            expected_runtime=estimates.get((job["task_type__code"], job["gpus_per_node"] * job["node_count"])),
            cpu_milli=job["cpu_milli"], memory_mib=job["memory_mib"],
            placements=tuple(engine.Placement(n, tuple(sorted(ix)), milli) for (n, milli), ix in
                             sorted(per_node.items()))))
    departments = {t.name: t.department.name for t in Tenant.objects.select_related("department") if t.department}
    bursts: dict[tuple[str, str], int] = defaultdict(int)
    for tenant, model, extra in QuotaBurst.objects.filter(start__lte=now, end__gt=now).values_list(
            "tenant__name", "gpu_model", "extra_gpus"):
        bursts[(tenant, model)] += extra
    quotas = tuple(engine.QuotaSnapshot(q.tenant.name, q.gpu_model, q.guaranteed_gpus,
                                        q.limit_gpus + bursts.get((q.tenant.name, q.gpu_model), 0),
                                        departments.get(q.tenant.name, ""))
                   for q in Quota.objects.select_related("tenant"))
    department_quotas = tuple(engine.DepartmentQuota(d.department.name, d.gpu_model, d.limit_gpus)
                              for d in DepartmentQuota.objects.select_related("department"))
    tenants = tuple(engine.TenantInfo(t.name, t.fair_share_weight) for t in Tenant.objects.all())
    reservations = tuple(engine.Reservation(r.pk, r.tenant.name, r.gpu_model, r.gpus, r.start.timestamp(),
                                            r.end.timestamp())
                         for r in Reservation.objects.filter(end__gt=now).select_related("tenant"))

    # route queued jobs to clusters
    healthy_gpus: dict[tuple[str, str], int] = defaultdict(int)
    for node in nodes:
        if node.schedulable:
            healthy_gpus[(node.cluster.name, node.gpu_model)] += sum(1 for g in node.gpus.all() if g.healthy)
    by_cluster: dict[str, list] = defaultdict(list)
    for j in Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.PENDING)).values(
            "id", "tenant__name", "gpu_model", "gpus_per_node", "node_count", "priority", "task_type__code",
            "task_type__preemptible", "submitted_at", "gpu_milli", "cpu_milli", "memory_mib", "topology",
            "max_runtime_minutes", "held_by", "status", "cluster__name", "executor_state"):
        home = j["cluster__name"] or max(
            (c.name for c in clusters), key=lambda name: (healthy_gpus.get((name, j["gpu_model"]), 0), name),
            default="")
        by_cluster[home].append(engine.WaitingJob(
            id=j["id"], tenant=j["tenant__name"], gpu_model=j["gpu_model"], gpus_per_node=j["gpus_per_node"],
            nodes=j["node_count"], priority=j["priority"], task_type=j["task_type__code"],
            submitted_at=j["submitted_at"].timestamp(), gpu_milli=j["gpu_milli"], cpu_milli=j["cpu_milli"],
            memory_mib=j["memory_mib"], topology=j["topology"], max_runtime=j["max_runtime_minutes"] * 60.0,
            expected_runtime=estimates.get((j["task_type__code"], j["gpus_per_node"] * j["node_count"])),
            preemptible=j["task_type__preemptible"], held=j["held_by"],
            awaiting_approval=j["status"] == JobStatus.PENDING,
            avoid_nodes=tuple((j["executor_state"] or {}).get("avoid_nodes", ()))))
    snapshots = {}
    for cluster in clusters:
        policy = policy_for(cluster)
        snapshots[cluster.name] = engine.Snapshot(
            nodes=tuple(_node_snapshot(n) for n in nodes if n.cluster_id == cluster.pk),
            running=tuple(running), waiting=tuple(by_cluster.get(cluster.name, ())), quotas=quotas,
            departments=department_quotas, reservations=reservations, tenants=tenants,
            usage=usage_history(now, policy.half_life_seconds), now=now.timestamp(), policy=policy)
    return snapshots, node_by_id, gpu_by_key


def _node_snapshot(node: Node) -> engine.NodeSnapshot:
    gpus = list(node.gpus.all())
    return engine.NodeSnapshot(
        id=node.id, name=node.name, gpu_model=node.gpu_model, cluster=node.cluster.name,
        datacenter=node.datacenter, rack=node.rack, network_domain=node.network_domain,
        schedulable=node.schedulable, gpu_total=len(gpus), cpu_milli=node.cpu_milli,
        memory_mib=node.memory_mib, gpu_indices=tuple(sorted(g.index for g in gpus if g.healthy)))


def run_pass() -> PassReport:
    """Run one pass over every cluster; admitted jobs are handed to dispatch after commit."""
    started = time.monotonic()
    report = PassReport()
    with transaction.atomic():
        if not _acquire_pass_lock():
            logger.info("Another scheduling pass holds the lock; skipping this one.")
            return PassReport(ran=False)
        snapshots, node_by_id, gpu_by_key = load_snapshots()
        report.load_seconds = time.monotonic() - started
        for name, snapshot in snapshots.items():
            engine_started = time.monotonic()
            result = engine.schedule(snapshot)
            applied = time.monotonic()
            report.engine_seconds += applied - engine_started
            report.shares[name] = result.shares
            _apply(result, node_by_id, gpu_by_key, report)
            report.apply_seconds += time.monotonic() - applied
        if report.preempted:  # the preemptors start as soon as their victims have let go: one more pass
            from .tasks import run_scheduling_pass

            transaction.on_commit(lambda: run_scheduling_pass.delay())
    report.seconds = time.monotonic() - started
    from metering import telemetry

    telemetry.observe("gpuportal_scheduling_pass_duration_seconds", report.seconds)
    return report


def _apply(result: engine.PassResult, node_by_id, gpu_by_key, report: PassReport) -> None:
    from .executors import executor_for
    from .tasks import dispatch_jobs

    now = timezone.now()
    ids = ([a.job_id for a in result.admissions] + [p.victim_id for p in result.preemptions]
           + [p.preemptor_id for p in result.preemptions])
    jobs = Job.objects.select_related("cluster", "tenant").in_bulk(ids)

    for preemption in result.preemptions:
        victim, preemptor = jobs[preemption.victim_id], jobs[preemption.preemptor_id]
        text = _("Preempted by job #%(job)d of tenant %(tenant)s (%(rule)s).") % {
            "job": preemptor.pk, "tenant": preemption.preemptor_tenant, "rule": _(preemption.rule)}
        data = {"preemptor": preemptor.pk, "preemptor_tenant": preemption.preemptor_tenant, "rule": preemption.rule}
        lifecycle.transition(victim, JobStatus.PREEMPTED, text, at=now, data=data,
                             failure_category=FailureCategory.PREEMPTED, failure_message=text)
        audit.record(AuditAction.JOB_PREEMPT, victim, reason=text, actor=None,
                     after={"preemptor": preemptor.pk, "preemptor_tenant": preemption.preemptor_tenant,
                            "rule": preemption.rule})
        if victim.cluster_id:
            executor_for(victim.cluster).stop(victim)
        if victim.requeue_on_preemption:
            lifecycle.transition(victim, JobStatus.QUEUED, _("Requeued after preemption (retry %(n)d).") % {
                "n": victim.retry_count + 1}, at=now, retry_count=victim.retry_count + 1, cluster=None,
                executor_state={}, failure_category="", failure_message="", data=data)
        report.preempted.append((victim.pk, preemptor.pk, preemption.rule))

    allocations, by_cluster = [], defaultdict(list)
    reasons, data = {}, {}
    for admission in result.admissions:
        job = jobs[admission.job_id]
        where = []
        for placement in admission.placements:
            node = node_by_id[placement.node_id]
            share = "" if placement.gpu_milli >= engine.WHOLE else f" x {placement.gpu_milli / 1000:g}"
            where.append(f"{node.name} (GPU {', '.join(str(i) for i in placement.gpu_indices)}{share})")
            allocations += [JobAllocation(job=job, gpu=gpu_by_key[(node.id, i)], allocated_at=now,
                                          fraction=placement.gpu_milli / 1000) for i in placement.gpu_indices]
        how = []
        if admission.backfilled:
            how.append(_("backfilled: it ends before the first waiting job of its model can start"))
        if admission.borrowing:
            how.append(_("borrowing idle GPUs beyond the tenant's guarantee (reclaimable)"))
        reason = _("Admitted: %(n)s x %(model)s on %(where)s.") % {
            "n": f"{job.total_gpus:g}", "model": job.gpu_model, "where": "; ".join(where)}
        reasons[job.pk] = f"{reason} ({'; '.join(how)})" if how else reason
        data[job.pk] = {"placements": [{"node": node_by_id[p.node_id].name, "gpus": list(p.gpu_indices),
                                        "share": p.gpu_milli / 1000} for p in admission.placements],
                        "backfilled": admission.backfilled, "borrowing": admission.borrowing}
        by_cluster[node_by_id[admission.placements[0].node_id].cluster].append(job)
        report.admitted.append((job.pk, "; ".join(where)))
    JobAllocation.objects.bulk_create(allocations, batch_size=5000)
    for cluster, admitted in by_cluster.items():
        lifecycle.transition_many(admitted, JobStatus.ADMITTED, reasons, at=now, data=data, cluster=cluster)
    admitted_ids = [a.job_id for a in result.admissions]
    if admitted_ids:
        transaction.on_commit(lambda: dispatch_jobs.delay(admitted_ids))

    waiting_ids = [w.job_id for w in result.waiting]
    statuses = dict(Job.objects.filter(pk__in=waiting_ids).values_list("id", "status"))
    states = JobQueueState.objects.in_bulk(waiting_ids)
    new, changed, events = [], [], []
    for wait in result.waiting:
        params = _jsonable(wait.params)
        estimate = (datetime.fromtimestamp(wait.estimated_start, tz=UTC)
                    if wait.estimated_start is not None and math.isfinite(wait.estimated_start) else None)
        values = (wait.reason.value, params, wait.position, wait.tenant_position, estimate)
        state = states.get(wait.job_id)
        if state is None or state.wait_reason != wait.reason.value:
            status = statuses.get(wait.job_id, JobStatus.QUEUED)
            events.append(JobEvent(job_id=wait.job_id, at=now, kind=JobEvent.Kind.WAIT_REASON, from_status=status,
                                   to_status=status, reason=wait.message, data={"code": wait.reason.value}))
        if state is None:
            new.append(JobQueueState(job_id=wait.job_id, wait_reason=values[0], wait_reason_params=params,
                                     queue_position=values[2], tenant_queue_position=values[3],
                                     estimated_start=estimate))
        elif values != (state.wait_reason, state.wait_reason_params, state.queue_position,
                        state.tenant_queue_position, state.estimated_start):  # a steady queue writes nothing
            (state.wait_reason, state.wait_reason_params, state.queue_position, state.tenant_queue_position,
             state.estimated_start) = values
            changed.append(state)
        report.waiting.append((wait.job_id, wait.reason.value, wait.message))
    bulk_insert(JobQueueState, new)
    bulk_set(JobQueueState, changed, QUEUE_FIELDS)
    bulk_insert(JobEvent, events)


QUEUE_FIELDS = ["wait_reason", "wait_reason_params", "queue_position", "tenant_queue_position", "estimated_start"]


def _jsonable(params: dict) -> dict:
    return {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in params.items()}

