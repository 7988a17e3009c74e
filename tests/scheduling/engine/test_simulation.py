"""The simulation loop: jobs run their real runtime, wait while the fleet is full, and a node that joins in the
middle of the stretch takes work from then on."""

from __future__ import annotations

import math

from scheduling.engine import NodeSnapshot, Policy, QuotaSnapshot, WaitingJob
from scheduling.engine.simulation import SimJob, SimNode, World, simulate

HOUR = 3600.0


def _node(node_id: int, gpus: int = 8, model: str = "H100") -> NodeSnapshot:
    return NodeSnapshot(node_id, f"n{node_id}", model, tuple(range(gpus)))


def _job(job_id: int, arrival: float, runtime: float, gpus: int = 8, tenant: str = "a") -> SimJob:
    return SimJob(WaitingJob(job_id, tenant, "H100", gpus, submitted_at=arrival, task_type="training",
                             priority=80, preemptible=False, expected_runtime=runtime), runtime)


def test_jobs_queue_behind_each_other_on_a_full_node_and_run_their_real_runtime():
    world = World(nodes=(SimNode(_node(1)),), policy=Policy(enforce_quotas=False))
    jobs = [_job(1, 0, 2 * HOUR), _job(2, 60, 1 * HOUR), _job(3, 120, 1 * HOUR)]
    result = simulate(world, jobs, 0, 24 * HOUR, pass_interval=60)
    starts = {i: result.outcomes[i].start for i in (1, 2, 3)}
    assert starts[1] == 60  # the first pass, at the end of the interval the arrival fell in
    assert starts[2] >= starts[1] + 2 * HOUR  # the node is whole-booked until job 1 ends
    assert starts[3] >= starts[2] + 1 * HOUR
    assert result.outcomes[1].end == starts[1] + 2 * HOUR
    assert math.isclose(result.outcomes[2].gpu_seconds, 8 * HOUR)
    assert result.capacity_gpu_seconds == {"H100": 8 * 24 * HOUR}


def test_a_node_that_joins_mid_stretch_takes_work_only_from_then_on_and_shortens_the_waits():
    jobs = [_job(i, i * 60, 10 * HOUR) for i in range(1, 4)]
    one = World(nodes=(SimNode(_node(1)),), policy=Policy(enforce_quotas=False))
    joined = World(nodes=(SimNode(_node(1)), SimNode(_node(2), available_from=5 * HOUR)),
                   policy=Policy(enforce_quotas=False))
    alone = simulate(one, jobs, 0, 48 * HOUR)
    grown = simulate(joined, jobs, 0, 48 * HOUR)
    assert grown.outcomes[2].start >= 5 * HOUR  # not before the node was there
    assert grown.outcomes[2].start < alone.outcomes[2].start
    assert grown.capacity_gpu_seconds["H100"] == 8 * 48 * HOUR + 8 * 43 * HOUR


def test_a_job_not_started_by_the_end_never_started_and_quotas_hold_it_back():
    world = World(nodes=(SimNode(_node(1)), SimNode(_node(2))), quotas=(QuotaSnapshot("a", "H100", 0, 8),))
    jobs = [_job(1, 0, 30 * HOUR), _job(2, 60, 1 * HOUR)]
    result = simulate(world, jobs, 0, 10 * HOUR)
    assert result.outcomes[1].start is not None
    assert result.outcomes[2].start is None  # a free node, but tenant a's limit of 8 is held by job 1
    assert math.isclose(result.outcomes[1].gpu_seconds, 8 * (10 * HOUR - 60))
