"""A stretch of time replayed through the engine: jobs arrive, passes decide, jobs run their real runtime and end.

Pure, like the rest of the engine: the what-if runs (``metering.whatif``) hand in a month's demand as it was
read from the database, benchmarks and tests hand in synthetic or traced demand. The engine is never told a
job's real runtime (``SimJob.runtime``): it sees the ``WaitingJob`` it would have seen, with the expected
runtime history gave it. Passes are quantised as the real loop is: everything due within ``pass_interval`` of
an event is handled by one pass at the end of that interval.

A preempted job waits again and, once admitted, runs its whole runtime again (no checkpoint is assumed).
Nodes may join or leave during the stretch (``SimNode.available_from`` / ``available_until``): a fleet change
in the middle of a month is replayed as it happened.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.engine.model import (
    DepartmentQuota,
    NodeSnapshot,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    TenantInfo,
    UsageRecord,
    WaitingJob,
)
from scheduling.engine.passes import schedule
from scheduling.engine.policy import Policy

DAY = 86400.0


@dataclass(frozen=True)
class SimNode:
    """A node of the replayed fleet, there from ``available_from`` until ``available_until`` (seconds)."""

    node: NodeSnapshot
    available_from: float = -math.inf
    available_until: float = math.inf


@dataclass(frozen=True)
class SimJob:
    """A job of the demand: the engine's view of it (``job``; its ``submitted_at`` is its arrival) and the
    runtime it really had once it got its GPUs."""

    job: WaitingJob
    runtime: float

    @property
    def arrival(self) -> float:
        return self.job.submitted_at


@dataclass(frozen=True)
class Carried:
    """A job already holding GPUs when the stretch starts, which frees them at ``end``: it occupies the fleet but
    is not one of the stretch's jobs."""

    job: RunningJob
    end: float


@dataclass
class JobOutcome:
    """What became of one job in the replay: first start, last end, the model it ran on, preemptions, and the
    GPU-seconds it held inside the stretch."""

    job_id: int
    start: float | None = None
    end: float | None = None
    gpu_model: str = ""
    preemptions: int = 0
    gpu_seconds: float = 0.0


@dataclass
class SimulationResult:
    outcomes: dict[int, JobOutcome]
    passes: int = 0
    engine_seconds: float = 0.0
    #: GPU-seconds of capacity per model over the stretch (nodes counted while they were there).
    capacity_gpu_seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class World:
    """Everything but the jobs: the fleet, quotas, tenants and the usage fair share starts from."""

    nodes: tuple[SimNode, ...]
    policy: Policy = field(default_factory=Policy)
    quotas: tuple[QuotaSnapshot, ...] = ()
    departments: tuple[DepartmentQuota, ...] = ()
    tenants: tuple[TenantInfo, ...] = ()
    usage: tuple[UsageRecord, ...] = ()
    carried: tuple[Carried, ...] = ()


def simulate(world: World, jobs: list[SimJob] | tuple[SimJob, ...], start: float, end: float,
             pass_interval: float = 60.0, progress: Callable[[float], None] | None = None,
             clock: Callable[[], float] | None = None) -> SimulationResult:
    """Replay ``jobs`` (arriving in ``[start, end)``) on ``world`` until ``end``; a job not started by then never
    started. ``progress`` is told the share of the stretch done (0-1) about every simulated hour; ``clock`` (a
    wall clock, e.g. ``time.perf_counter``) measures the engine's own time when given."""
    pending = sorted(jobs, key=lambda j: (j.arrival, j.job.id), reverse=True)  # a stack, next arrival last
    by_id = {j.job.id: j for j in jobs}
    outcomes = {j.job.id: JobOutcome(j.job.id) for j in jobs}
    waiting: dict[int, WaitingJob] = {}
    running: dict[int, RunningJob] = {c.job.id: c.job for c in world.carried}
    ends: list[tuple[float, int, float]] = [(c.end, c.job.id, c.job.started_at) for c in world.carried]
    heapq.heapify(ends)
    changes = sorted({t for n in world.nodes for t in (n.available_from, n.available_until)
                      if start < t < end})
    usage: dict[tuple[str, int], float] = defaultdict(float)
    result = SimulationResult(outcomes)
    result.capacity_gpu_seconds = _capacity(world.nodes, start, end)
    now = start
    reported = start
    nodes = _nodes_at(world.nodes, now)
    while now < end:
        upcoming = [pending[-1].arrival if pending else math.inf, ends[0][0] if ends else math.inf,
                    changes[0] if changes else math.inf]
        moment = max(now, min(upcoming))
        if moment >= end:
            break
        now = min(end, moment + pass_interval) if pass_interval else moment
        while changes and changes[0] <= now:
            changes.pop(0)
            nodes = _nodes_at(world.nodes, now)
            present = {n.id for n in nodes}
            for job_id in [j for j, r in running.items() if any(p.node_id not in present for p in r.placements)]:
                _stop(running.pop(job_id), job_id, by_id, outcomes, waiting, now, usage, preempted=False)
        while ends and ends[0][0] <= now:
            finish, job_id, started = heapq.heappop(ends)
            job = running.get(job_id)
            if job is None or job.started_at != started:
                continue  # a stale end of a run that was preempted
            del running[job_id]
            _account(job, started, finish, outcomes, usage)
            if job_id in outcomes:
                outcomes[job_id].end = finish
        while pending and pending[-1].arrival <= now:
            sim = pending.pop()
            waiting[sim.job.id] = sim.job
        if not waiting:
            continue
        snapshot = Snapshot(nodes=nodes, running=tuple(running.values()), waiting=tuple(waiting.values()),
                            quotas=world.quotas, departments=world.departments, tenants=world.tenants,
                            usage=(*world.usage, *(UsageRecord(t, day * DAY, s) for (t, day), s in usage.items())),
                            now=now, policy=world.policy)
        began = clock() if clock else 0.0
        decided = schedule(snapshot)
        result.engine_seconds += (clock() - began) if clock else 0.0
        result.passes += 1
        for preemption in decided.preemptions:
            victim = running.pop(preemption.victim_id, None)
            if victim is not None:
                _stop(victim, preemption.victim_id, by_id, outcomes, waiting, now, usage, preempted=True)
        node_models = {n.id: n.gpu_model for n in nodes}
        for admission in decided.admissions:
            asked = waiting.pop(admission.job_id)
            model = node_models[admission.placements[0].node_id]
            running[asked.id] = RunningJob(
                asked.id, asked.tenant, model, admission.placements, priority=asked.priority,
                preemptible=asked.preemptible, task_type=asked.task_type, submitted_at=asked.submitted_at,
                started_at=now, max_runtime=asked.max_runtime, expected_runtime=asked.expected_runtime,
                cpu_milli=asked.cpu_milli, memory_mib=asked.memory_mib, group=asked.group, owner=asked.owner)
            outcome = outcomes[asked.id]
            outcome.gpu_model = model
            if outcome.start is None:
                outcome.start = now
            heapq.heappush(ends, (now + min(by_id[asked.id].runtime, asked.max_runtime), asked.id, now))
        if progress and now - reported >= 3600:
            reported = now
            progress(min(1.0, (now - start) / max(end - start, 1.0)))
    for job in running.values():
        _account(job, job.started_at, end, outcomes, usage)
    if progress:
        progress(1.0)
    return result


def _nodes_at(nodes: tuple[SimNode, ...], now: float) -> tuple[NodeSnapshot, ...]:
    return tuple(n.node for n in nodes if n.available_from <= now < n.available_until)


def _capacity(nodes: tuple[SimNode, ...], start: float, end: float) -> dict[str, float]:
    capacity: dict[str, float] = defaultdict(float)
    for n in nodes:
        seconds = max(0.0, min(end, n.available_until) - max(start, n.available_from))
        capacity[n.node.gpu_model] += seconds * n.node.total_gpus
    return dict(capacity)


def _account(job: RunningJob, started: float, finished: float, outcomes, usage) -> None:
    """GPU-seconds ``job`` held from ``started`` to ``finished``: its outcome's, and its tenant's usage of the day
    (fair share sees finished work as the database pass does)."""
    seconds = max(0.0, finished - started) * job.gpus
    usage[(job.tenant, int(finished // DAY))] += seconds
    if job.id in outcomes:
        outcomes[job.id].gpu_seconds += seconds


def _stop(job: RunningJob, job_id: int, by_id, outcomes, waiting, now: float, usage, preempted: bool) -> None:
    """A run ends early (preempted, or its node left the fleet): its GPU-time counts, and a job of the stretch
    waits again (a carried job is simply gone)."""
    _account(job, job.started_at, now, outcomes, usage)
    if job_id in by_id:
        waiting[job_id] = by_id[job_id].job
        if preempted:
            outcomes[job_id].preemptions += 1
