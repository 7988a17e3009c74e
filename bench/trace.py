"""Replay a real GPU cluster trace through the engine in simulated time.

Input: the Alibaba GPU trace (``../shared/traces/openb/``, cluster-trace-gpu-v2023, Weng et al., USENIX ATC
2023). Pods that ran (with a ``scheduled_time``) and ask for GPUs arrive at ``creation_time x time_scale``
and run for ``deletion_time - scheduled_time``. The engine never sees that duration: its runtime estimates
are the class's max runtime, refined by the 75th percentile of runtimes of finished jobs of the same class
and size seen so far in the replay — what a real deployment knows.

QoS classes map to task types: LS (latency-sensitive) -> inference (priority 100, not preemptible);
Guaranteed -> training (80, not preemptible); Burstable -> research (50); BE (best effort) -> test (10).
"""

from __future__ import annotations

import csv
import heapq
import math
import random
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass

from scheduling.engine import (
    ANY_MODEL,
    Capacity,
    NodeSnapshot,
    Policy,
    RunningJob,
    Snapshot,
    WaitingJob,
    schedule,
)
from scheduling.engine.estimate import RUNTIME_PERCENTILE, runtime_from_history

DAY = 86400.0
QOS_CLASSES = {  # qos: (task type, priority, preemptible, max runtime)
    "LS": ("inference", 100, False, 30 * DAY),
    "Guaranteed": ("training", 80, False, 30 * DAY),
    "Burstable": ("research", 50, True, 7 * DAY),
    "BE": ("test", 10, True, 7 * DAY),
}


@dataclass
class Pod:
    id: int
    name: str
    arrival: float
    duration: float
    gpus: int
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    models: tuple[str, ...]
    qos: str
    start: float | None = None
    first_eta: float | None = None
    first_range: tuple[float | None, float | None] = (None, None)
    first_seen_waiting: bool = False
    preempted: int = 0


def load_nodes(path: str, node_fraction: float = 1.0) -> tuple[NodeSnapshot, ...]:
    rows = [r for r in csv.DictReader(open(path)) if int(r["gpu"]) > 0]  # noqa: SIM115
    by_model: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_model[row["model"]].append(row)
    kept = []
    for model in sorted(by_model):
        group = sorted(by_model[model], key=lambda r: r["sn"])
        kept += group[:max(1, math.ceil(len(group) * node_fraction))]
    return tuple(NodeSnapshot(i + 1, r["sn"], r["model"], tuple(range(int(r["gpu"]))), cluster="trace",
                              rack=f"rack-{i // 16}", network_domain=f"net-{i // 64}",
                              cpu_milli=int(r["cpu_milli"]), memory_mib=int(r["memory_mib"]))
                 for i, r in enumerate(kept))


def load_pods(path: str, time_scale: float = 1.0) -> list[Pod]:
    pods = []
    for row in csv.DictReader(open(path)):  # noqa: SIM115
        if int(row["num_gpu"] or 0) == 0 or not row["scheduled_time"] or not row["deletion_time"]:
            continue
        duration = float(row["deletion_time"]) - float(row["scheduled_time"])
        if duration <= 0:
            continue
        gpus = int(row["num_gpu"])
        milli = int(row["gpu_milli"] or 1000) if gpus == 1 else 1000
        pods.append(Pod(len(pods) + 1, row["name"], float(row["creation_time"]) * time_scale, duration, gpus,
                        max(1, min(1000, milli)), int(row["cpu_milli"] or 0), int(row["memory_mib"] or 0),
                        tuple(m for m in row["gpu_spec"].split("|") if m), row["qos"] or "BE"))
    pods.sort(key=lambda p: (p.arrival, p.id))
    return pods


def never_fits(pod: Pod, nodes: tuple[NodeSnapshot, ...]) -> bool:
    for node in nodes:
        if pod.models and node.gpu_model not in pod.models:
            continue
        if len(node.gpu_indices) >= pod.gpus and node.cpu_milli >= pod.cpu_milli and node.memory_mib >= pod.memory_mib:
            return False
    return True


def replay(nodes_csv: str, pods_csv: str, policy: Policy, time_scale: float = 1.0, node_fraction: float = 1.0,
           pass_interval: float = 60.0, limit: int = 0, runtime_percentile: float = RUNTIME_PERCENTILE,
           sample: float = 1.0, seed: int = 42) -> dict:
    """``sample`` below 1 keeps that share of the pods, drawn with ``seed``: a resample of the trace that no
    policy was tuned on (each seed a different one)."""
    nodes = load_nodes(nodes_csv, node_fraction)
    pods = load_pods(pods_csv, time_scale)
    if sample < 1:
        rng = random.Random(seed)
        pods = [p for p in pods if rng.random() < sample]
    if limit:
        pods = pods[:limit]
    fit = [p for p in pods if not never_fits(p, nodes)]
    never = len(pods) - len(fit)
    capacity_gpus = sum(len(n.gpu_indices) for n in nodes)
    policy = Policy(**{**policy.__dict__, "enforce_quotas": False})

    pending = list(reversed(fit))  # a stack, next arrival last
    waiting: dict[int, Pod] = {}
    running: dict[int, tuple[Pod, RunningJob]] = {}
    completions: list[tuple[float, int]] = []
    history: dict[tuple[str, int], list[float]] = defaultdict(list)
    estimate_cache: dict[tuple[str, int], float] = {}
    engine_seconds = 0.0
    preemptions = 0
    first_arrival = fit[0].arrival if fit else 0.0
    last_arrival = fit[-1].arrival if fit else 0.0
    allocated_integral = 0.0
    fragmentation_integral = 0.0
    allocated_now = 0.0
    fragmentation_now = 0.0
    clock = first_arrival

    def advance(to: float) -> None:
        nonlocal allocated_integral, fragmentation_integral, clock
        lo, hi = max(clock, first_arrival), min(to, last_arrival)
        if hi > lo:
            allocated_integral += allocated_now * (hi - lo)
            fragmentation_integral += fragmentation_now * (hi - lo)
        clock = to

    def expected(pod: Pod) -> float | None:
        key = (pod.qos, pod.gpus)
        return estimate_cache.get(key)

    while pending or waiting or running:
        next_arrival = pending[-1].arrival if pending else math.inf
        next_completion = completions[0][0] if completions else math.inf
        now = min(next_arrival, next_completion)
        if now == math.inf:
            break  # jobs left waiting that can never start
        # quantise passes like a real scheduler loop: everything due within the interval is handled together
        now = max(now, clock)
        boundary = now + pass_interval if pass_interval else now
        advance(now)
        while completions and completions[0][0] <= boundary:
            end, pod_id = heapq.heappop(completions)
            if pod_id not in running:
                continue  # preempted meanwhile
            pod, job = running.pop(pod_id)
            if abs(job.started_at + pod.duration - end) > 1e-6:
                continue  # a stale completion of an earlier, preempted run
            samples = history[(pod.qos, pod.gpus)]
            samples.append(pod.duration)
            estimate = runtime_from_history(samples[-200:], runtime_percentile)
            if estimate is not None:
                estimate_cache[(pod.qos, pod.gpus)] = estimate
        while pending and pending[-1].arrival <= boundary:
            pod = pending.pop()
            waiting[pod.id] = pod
        now = boundary if pass_interval else now
        advance(now)
        snapshot = Snapshot(nodes=nodes, running=tuple(job for _p, job in running.values()),
                            waiting=tuple(_waiting_job(p, expected(p)) for p in waiting.values()), now=now,
                            policy=policy)
        started = time.perf_counter()
        result = schedule(snapshot)
        engine_seconds += time.perf_counter() - started
        for preemption in result.preemptions:
            pod, _job = running.pop(preemption.victim_id)
            pod.preempted += 1
            preemptions += 1
            waiting[pod.id] = pod
        for admission in result.admissions:
            pod = waiting.pop(admission.job_id)
            model = next(n.gpu_model for n in nodes if n.id == admission.placements[0].node_id)
            task_type, priority, preemptible, max_runtime = QOS_CLASSES.get(pod.qos, QOS_CLASSES["BE"])
            job = RunningJob(pod.id, "trace", model, admission.placements, priority=priority, preemptible=preemptible,
                             task_type=task_type, submitted_at=pod.arrival, started_at=now, max_runtime=max_runtime,
                             expected_runtime=expected(pod), cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib)
            running[pod.id] = (pod, job)
            if pod.start is None:
                pod.start = now
            heapq.heappush(completions, (now + pod.duration, pod.id))
        for wait in result.waiting:
            pod = waiting[wait.job_id]
            if not pod.first_seen_waiting:
                pod.first_seen_waiting = True
                pod.first_eta = wait.estimated_start
                pod.first_range = (wait.earliest_start, wait.latest_start)
        capacity = Capacity(nodes)
        for _pod, job in running.values():
            capacity.take(job.placements, job.cpu_milli, job.memory_mib)
        allocated_now = sum(job.gpus for _p, job in running.values())
        fragmentation_now = capacity.fragmentation()
        if not pending and not running and waiting:
            break  # nothing will ever change: what still waits cannot start
    window = max(last_arrival - first_arrival, 1.0)
    return {**_metrics(fit, never, policy, engine_seconds, preemptions, allocated_integral / (capacity_gpus * window),
                       fragmentation_integral / window, len(nodes), capacity_gpus),
            **eta_range_quality(fit, tolerance=max(pass_interval, 60.0))}


def eta_range_quality(pods: list[Pod], tolerance: float) -> dict:
    """How good the likely start ranges were, judged at the first pass that saw each job wait: the share of
    jobs that started inside their range (``tolerance`` seconds either side: a start happens at a pass), the
    median range width, and the share of waiting jobs shown "unknown"."""
    waited = [p for p in pods if p.start is not None and p.first_seen_waiting and p.start > p.arrival]
    ranged = [p for p in waited if None not in p.first_range]
    covered = sum(1 for p in ranged if p.first_range[0] - tolerance <= p.start <= p.first_range[1] + tolerance)
    widths = sorted(p.first_range[1] - p.first_range[0] for p in ranged)
    return {"eta_range_coverage": round(covered / len(ranged), 4) if ranged else None,
            "eta_range_median_width_hours": round(widths[len(widths) // 2] / 3600, 2) if widths else None,
            "eta_range_unknown_share": round(1 - len(ranged) / len(waited), 4) if waited else None}


def _waiting_job(pod: Pod, expected_runtime: float | None) -> WaitingJob:
    task_type, priority, preemptible, max_runtime = QOS_CLASSES.get(pod.qos, QOS_CLASSES["BE"])
    return WaitingJob(pod.id, "trace", ANY_MODEL if not pod.models else pod.models[0], pod.gpus, nodes=1,
                      priority=priority, task_type=task_type, submitted_at=pod.arrival, gpu_milli=pod.gpu_milli,
                      cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, max_runtime=max_runtime,
                      expected_runtime=expected_runtime, preemptible=preemptible, accept_models=pod.models)


def _summary(waits: list[float]) -> dict:
    if not waits:
        return {"jobs": 0, "mean_wait_seconds": 0.0, "p95_wait_seconds": 0.0}
    ordered = sorted(waits)
    return {"jobs": len(waits), "mean_wait_seconds": round(statistics.fmean(waits), 1),
            "p95_wait_seconds": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)}


def _metrics(pods, never, policy, engine_seconds, preemptions, allocation, fragmentation, nodes, gpus) -> dict:
    started = [p for p in pods if p.start is not None]
    waits = [p.start - p.arrival for p in started]
    by_qos = defaultdict(list)
    for pod in started:
        by_qos[pod.qos].append(pod.start - pod.arrival)
    waited = [p for p in started if p.first_seen_waiting and p.start - p.arrival > 0]
    within = sum(1 for p in waited if p.first_eta is not None and abs((p.first_eta - p.arrival) - (
        p.start - p.arrival)) <= max(0.2 * (p.start - p.arrival), 600))
    return {
        "policy": policy.name, "nodes": nodes, "gpus": gpus, "jobs": len(started), "never_fit": never,
        "never_started": len(pods) - len(started),
        **{k: v for k, v in _summary(waits).items() if k != "jobs"},
        "by_qos": {q: _summary(w) for q, w in sorted(by_qos.items())},
        "gpu_allocation_ratio": round(allocation, 4), "fragmentation_ratio": round(fragmentation, 4),
        "preemptions": preemptions, "engine_seconds_total": round(engine_seconds, 2),
        "jobs_that_waited": len(waited), "eta_within_20pct": round(within / len(waited), 4) if waited else None,
    }
