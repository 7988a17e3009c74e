"""A past stretch of time as the engine would have seen it, read from the database for a replay.

Every job submitted in the stretch as it arrived (size, model, accepted models, tenant, task type, topology,
share) with the runtime it really had (its attempts' GPU time, a preempted attempt excepted: a replay reruns
the job), the jobs that already held GPUs when the stretch began, the fleet with the moment each node joined,
and the quotas, tenants and usage of the moment the stretch began. The conversions are those of the pass
(``snapshots``): a replay sees a job exactly as the pass saw it.

What the database cannot tell is left as it is now and said in docs/metering-and-reports.md ("What-if runs"):
nodes deleted since, quota rows changed since (their current values stand in, raised to what a tenant really
held at once) and jobs cancelled before they got GPUs (left out: nobody knows how long they would have run).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Q

from fleet.models import Cluster, Node
from scheduling.engine import NodeSnapshot, QuotaSnapshot, WaitingJob
from scheduling.engine.simulation import Carried, SimJob, SimNode, World
from scheduling.models import AttemptOutcome, Job, JobAllocation, JobAttempt, JobStatus
from scheduling.passes.snapshots import (
    RUNNING_FIELDS,
    WAITING_FIELDS,
    _node_snapshot,
    department_snapshots,
    policy_for,
    quota_snapshots,
    running_job,
    runtime_estimates,
    tenant_infos,
    usage_history,
    waiting_job,
)


@dataclass(frozen=True)
class Actual:
    """What really happened to a job inside the stretch: its first start (None: not in the stretch), the model
    it ran on, its preemptions and the GPU-seconds it held inside the stretch."""

    start: float | None
    gpu_model: str
    preemptions: int
    gpu_seconds: float


@dataclass(frozen=True)
class DemandJob:
    sim: SimJob
    actual: Actual

    @property
    def job(self) -> WaitingJob:
        return self.sim.job


@dataclass(frozen=True)
class History:
    """A stretch ``[start, end)`` (seconds) ready to replay: ``world`` and ``jobs`` go to ``engine.simulate``."""

    start: float
    end: float
    world: World
    jobs: tuple[DemandJob, ...]


def read_history(t0: datetime, t1: datetime, now: datetime | None = None) -> History:
    """The stretch from ``t0`` to ``t1`` as it was (``now``: when runs still going are cut, default ``t1``)."""
    now = max(now or t1, t1)
    start, end = t0.timestamp(), t1.timestamp()
    estimates = runtime_estimates(t0, finished_before=t0)
    nodes = _nodes(t0, t1)
    clusters = list(Cluster.objects.all())
    gpus_by_cluster = defaultdict(int)
    for node in Node.objects.filter(created__lt=t1).prefetch_related("gpus"):
        gpus_by_cluster[node.cluster_id] += len(node.gpus.all())
    home = max(clusters, key=lambda c: (gpus_by_cluster[c.pk], c.name), default=None)
    policy = policy_for(home) if home is not None else None
    world = World(nodes=nodes, quotas=_as_held(quota_snapshots(t0), t0, t1), departments=department_snapshots(),
                  tenants=tenant_infos(),
                  usage=usage_history(t0, policy.half_life_seconds) if policy else (),
                  carried=_carried(t0, estimates, {n.node.id for n in nodes}),
                  **({"policy": policy} if policy else {}))
    return History(start, end, world, _demand(t0, t1, now, estimates))


def _as_held(quotas: tuple[QuotaSnapshot, ...], t0: datetime, t1: datetime) -> tuple[QuotaSnapshot, ...]:
    """The quotas of ``t0``, each raised to the most GPUs its tenant really held of its model at once in the
    stretch: a tenant that held more had a burst or a quota changed since, and the replay must allow what really
    ran (otherwise its error would be the quota's, not the method's)."""
    changes: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for tenant, model, allocated, released in JobAllocation.objects.filter(
            allocated_at__lt=t1).filter(Q(released_at__isnull=True) | Q(released_at__gt=t0)).values_list(
            "job__tenant__name", "gpu__model", "allocated_at", "released_at"):
        changes[(tenant, model)] += [(max(allocated, t0).timestamp(), 1), (min(released or t1, t1).timestamp(), -1)]
    peaks = {}
    for key, steps in changes.items():
        held = peak = 0
        for _at, step in sorted(steps):
            held += step
            peak = max(peak, held)
        peaks[key] = peak
    raised = []
    for quota in quotas:
        peak = peaks.pop((quota.tenant, quota.gpu_model), 0)
        raised.append(replace(quota, limit=max(quota.limit, peak)))
    return tuple(raised)


def _nodes(t0: datetime, t1: datetime) -> tuple[SimNode, ...]:
    """Nodes registered before ``t1``; one registered inside the stretch joins then. Every GPU counts as healthy:
    the faults of the past are not kept per moment, and a replay of a month asks about capacity, not repairs."""
    nodes = []
    for node in Node.objects.filter(created__lt=t1).select_related("cluster").prefetch_related("gpus"):
        snapshot: NodeSnapshot = replace(_node_snapshot(node), schedulable=True,
                                         gpu_indices=tuple(sorted(g.index for g in node.gpus.all())))
        joined = node.created.timestamp() if node.created > t0 else -math.inf
        nodes.append(SimNode(snapshot, available_from=joined))
    return tuple(sorted(nodes, key=lambda n: n.node.name))


def _carried(t0: datetime, estimates: dict, present: set[int]) -> tuple[Carried, ...]:
    """Jobs holding GPUs at ``t0`` (submitted before it), each until it released them."""
    held = (JobAllocation.objects.filter(allocated_at__lt=t0)
            .filter(Q(released_at__isnull=True) | Q(released_at__gt=t0)).exclude(job__submitted_at__gte=t0))
    placements: dict[int, list] = defaultdict(list)
    spans: dict[int, tuple[datetime, datetime | None]] = {}
    for job_id, node_id, index, fraction, allocated, released in held.values_list(
            "job_id", "gpu__node_id", "gpu__index", "fraction", "allocated_at", "released_at"):
        if node_id in present:
            placements[job_id].append((node_id, index, float(fraction)))
            spans[job_id] = (allocated, released)
    carried = []
    for row in Job.objects.filter(pk__in=list(placements)).values(*RUNNING_FIELDS):
        allocated, released = spans[row["id"]]
        job = running_job({**row, "started_at": allocated}, placements[row["id"]], estimates, t0)
        carried.append(Carried(job, released.timestamp() if released else math.inf))
    return tuple(carried)


def _demand(t0: datetime, t1: datetime, now: datetime, estimates: dict) -> tuple[DemandJob, ...]:
    """Every job submitted in the stretch that got GPUs at some time, or still waited at its end (a job cancelled
    before it got GPUs is left out)."""
    stretch = Job.objects.filter(submitted_at__gte=t0, submitted_at__lt=t1)
    rows = {row["id"]: row for row in stretch.order_by("submitted_at", "id").values(*WAITING_FIELDS)}
    ids = stretch.order_by().values("id")  # a subquery: a month's ids are too many for a list of parameters
    attempts: dict[int, list] = defaultdict(list)
    for job_id, admitted, ended, outcome in JobAttempt.objects.filter(job_id__in=ids).order_by(
            "job_id", "number").values_list("job_id", "admitted_at", "ended_at", "outcome"):
        attempts[job_id].append((admitted, ended, outcome))
    models = dict(JobAllocation.objects.filter(job_id__in=ids).order_by("job_id", "allocated_at").values_list(
        "job_id", "gpu__model").distinct())
    held: dict[int, float] = defaultdict(float)
    for job_id, allocated, released, fraction in JobAllocation.objects.filter(job_id__in=ids).values_list(
            "job_id", "allocated_at", "released_at", "fraction"):
        inside = (min(released or now, t1) - max(allocated, t0)).total_seconds()
        held[job_id] += max(0.0, inside) * float(fraction)
    cancelled_waiting = {job_id for job_id, row in rows.items() if not attempts[job_id]
                         and row["status"] in (JobStatus.CANCELLED, JobStatus.FAILED)}
    demand = []
    for job_id, row in rows.items():
        if job_id in cancelled_waiting:
            continue
        job = waiting_job({**row, "held_by": "", "status": JobStatus.QUEUED, "executor_state": None,
                           "spare_own_jobs": row["spare_own_jobs"]}, estimates, t0, {})
        ran = [(a, e, o) for a, e, o in attempts[job_id]]
        runtime = sum(((e or now) - a).total_seconds() for a, e, o in ran if o != AttemptOutcome.PREEMPTED)
        if not ran:
            runtime = job.runtime_estimate
        first = ran[0][0] if ran else None
        actual = Actual(start=first.timestamp() if first and first < t1 else None,
                        gpu_model=models.get(job_id, job.accept_models[0] if job.accept_models else job.gpu_model),
                        preemptions=sum(1 for _a, _e, o in ran if o == AttemptOutcome.PREEMPTED),
                        gpu_seconds=held[job_id])
        demand.append(DemandJob(SimJob(job, max(1.0, runtime)), actual))
    return tuple(demand)


@dataclass(frozen=True)
class FleetChange:
    """Nodes that joined the fleet on one day: when the first of them was registered, and GPUs per model."""

    joined: datetime
    gpus: dict[str, int]


def fleet_changes(t0: datetime, t1: datetime) -> list[FleetChange]:
    """The days in ``[t0, t1)`` on which nodes were registered (a real fleet change to backtest the method on)."""
    by_day: dict = defaultdict(list)
    for node in Node.objects.filter(created__gte=t0, created__lt=t1).prefetch_related("gpus"):
        by_day[node.created.date()].append(node)
    changes = []
    for _day, nodes in sorted(by_day.items()):
        gpus: dict[str, int] = defaultdict(int)
        for node in nodes:
            gpus[node.gpu_model] += len(node.gpus.all())
        changes.append(FleetChange(min(n.created for n in nodes), dict(gpus)))
    return changes
