"""The scheduling pass: database -> engine snapshot -> decisions -> database, in one transaction.

Only one pass runs at a time across all workers: on PostgreSQL a transaction-level advisory lock is
taken first and a second pass that finds it held returns at once (the next beat tick comes soon). The
whole apply step is one transaction, so a pass that dies halfway leaves nothing half-applied.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from tenants.models import Quota

from . import engine, lifecycle
from .models import (
    ACTIVE_STATUSES,
    GPU,
    Job,
    JobAllocation,
    JobEvent,
    JobStatus,
    Node,
)

logger = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock that serialises scheduling passes ("GPUSCHED").
PASS_LOCK_KEY = 0x47505553434845


@dataclass
class PassReport:
    """What a pass did, for `schedule_once`, logs and tests."""

    ran: bool = True
    admitted: list[tuple[int, str]] = field(default_factory=list)
    waiting: list[tuple[int, str, str]] = field(default_factory=list)
    seconds: float = 0.0


def _acquire_pass_lock() -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite serialises writers itself (IMMEDIATE transactions)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [PASS_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def load_snapshot() -> tuple[engine.Snapshot, dict[int, Node], dict[tuple[int, int], GPU]]:
    nodes = list(Node.objects.select_related("cluster").prefetch_related("gpus"))
    node_by_id = {n.id: n for n in nodes}
    gpu_by_key = {(g.node_id, g.index): g for n in nodes for g in n.gpus.all()}
    node_snaps = tuple(
        engine.NodeSnapshot(
            id=n.id, name=n.name, gpu_model=n.gpu_model, cluster=n.cluster.name, datacenter=n.datacenter,
            rack=n.rack, network_domain=n.network_domain, schedulable=n.schedulable,
            gpu_indices=tuple(sorted(g.index for g in n.gpus.all() if g.healthy)))
        for n in nodes)
    placements: dict[int, list[tuple[int, int]]] = {}
    for job_id, node_id, index in JobAllocation.objects.filter(
            released_at__isnull=True, job__status__in=ACTIVE_STATUSES).values_list("job_id", "gpu__node_id",
                                                                                    "gpu__index"):
        placements.setdefault(job_id, []).append((node_id, index))
    running = []
    for job in Job.objects.active().values("id", "tenant__name", "gpu_model", "priority"):
        per_node: dict[int, list[int]] = {}
        for node_id, index in placements.get(job["id"], []):
            per_node.setdefault(node_id, []).append(index)
        running.append(engine.RunningJob(
            id=job["id"], tenant=job["tenant__name"], gpu_model=job["gpu_model"], priority=job["priority"],
            placements=tuple(engine.Placement(n, tuple(sorted(ix))) for n, ix in sorted(per_node.items()))))
    waiting = tuple(
        engine.WaitingJob(id=j["id"], tenant=j["tenant__name"], gpu_model=j["gpu_model"],
                          gpus_per_node=j["gpus_per_node"], nodes=j["node_count"], priority=j["priority"],
                          task_type=j["task_type__code"], submitted_at=j["submitted_at"].timestamp())
        for j in Job.objects.filter(status=JobStatus.QUEUED).values(
            "id", "tenant__name", "gpu_model", "gpus_per_node", "node_count", "priority", "task_type__code",
            "submitted_at"))
    quotas = tuple(engine.QuotaSnapshot(q["tenant__name"], q["gpu_model"], q["guaranteed_gpus"], q["limit_gpus"])
                   for q in Quota.objects.values("tenant__name", "gpu_model", "guaranteed_gpus", "limit_gpus"))
    snapshot = engine.Snapshot(nodes=node_snaps, running=tuple(running), waiting=waiting, quotas=quotas,
                               now=timezone.now().timestamp())
    return snapshot, node_by_id, gpu_by_key


def run_pass() -> PassReport:
    """Run one pass; returns what it decided. Admitted jobs are handed to dispatch after commit."""
    started = time.monotonic()
    report = PassReport()
    with transaction.atomic():
        if not _acquire_pass_lock():
            logger.info("Another scheduling pass holds the lock; skipping this one.")
            return PassReport(ran=False)
        snapshot, node_by_id, gpu_by_key = load_snapshot()
        result = engine.schedule(snapshot)
        _apply(result, node_by_id, gpu_by_key, report)
    report.seconds = time.monotonic() - started
    return report


def _apply(result: engine.PassResult, node_by_id, gpu_by_key, report: PassReport) -> None:
    from .tasks import dispatch_job

    now = timezone.now()
    jobs = Job.objects.in_bulk([a.job_id for a in result.admissions] + [w.job_id for w in result.waiting])
    for admission in result.admissions:
        job = jobs[admission.job_id]
        allocations, where = [], []
        for placement in admission.placements:
            node = node_by_id[placement.node_id]
            where.append(f"{node.name} (GPU {', '.join(str(i) for i in placement.gpu_indices)})")
            allocations += [JobAllocation(job=job, gpu=gpu_by_key[(node.id, i)], allocated_at=now)
                            for i in placement.gpu_indices]
        JobAllocation.objects.bulk_create(allocations)
        cluster = node_by_id[admission.placements[0].node_id].cluster
        lifecycle.transition(job, JobStatus.ADMITTED, _("Admitted: %(n)d x %(model)s on %(where)s.") % {
            "n": job.total_gpus, "model": job.gpu_model, "where": "; ".join(where)}, at=now, cluster=cluster,
            data={"placements": [{"node": node_by_id[p.node_id].name, "gpus": list(p.gpu_indices)}
                                 for p in admission.placements]})
        report.admitted.append((job.pk, "; ".join(where)))
        transaction.on_commit(lambda job_id=job.pk: dispatch_job.delay(job_id))

    changed, events = [], []
    for wait in result.waiting:
        job = jobs[wait.job_id]
        if job.wait_reason != wait.reason.value:
            events.append(JobEvent(job=job, at=now, kind=JobEvent.Kind.WAIT_REASON, from_status=job.status,
                                   to_status=job.status, reason=wait.message,
                                   data={"code": wait.reason.value, "params": wait.params}))
        job.wait_reason, job.wait_reason_params = wait.reason.value, wait.params
        job.queue_position, job.tenant_queue_position = wait.position, wait.tenant_position
        job.estimated_start = (datetime.fromtimestamp(wait.estimated_start, tz=UTC)
                               if wait.estimated_start else None)
        changed.append(job)
        report.waiting.append((job.pk, wait.reason.value, wait.message))
    Job.objects.bulk_update(changed, ["wait_reason", "wait_reason_params", "queue_position",
                                      "tenant_queue_position", "estimated_start"], batch_size=500)
    JobEvent.objects.bulk_create(events, batch_size=500)
