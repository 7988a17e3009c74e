"""The default placement under a target workload: a single-node job goes where the node's
fragmentation under the queue's shapes grows least, ties to the fullest node — hand-checked examples."""

from __future__ import annotations

import pytest

from scheduling import engine
from scheduling.engine.fragmentation import TaskShape, target_workload

NODES = (engine.NodeSnapshot(1, "n1", "A100", tuple(range(8))), engine.NodeSnapshot(2, "n2", "A100", tuple(range(8))))
QUOTA = (engine.QuotaSnapshot("t", "A100", 64, 64),)


def _pass(running, waiting):
    return engine.schedule(engine.Snapshot(nodes=NODES, running=running, waiting=waiting, quotas=QUOTA, now=10.0))


def _holding(job_id: int, node: int, gpus: int) -> engine.RunningJob:
    return engine.RunningJob(job_id, "t", "A100", (engine.Placement(node, tuple(range(gpus))),), preemptible=False)


def test_target_workload_counts_waiting_and_running_shapes():
    waiting = [engine.WaitingJob(i, "t", "A100", 4) for i in range(3)]
    workload = target_workload(waiting, [_holding(9, 1, 8)])
    assert dict(workload.shapes) == pytest.approx({TaskShape(4, 1000, 0, 0, ("A100",)): 0.75,
                                                   TaskShape(8, 1000, 0, 0): 0.25})
    assert target_workload([], []) is None


def test_a_small_job_spares_the_node_a_queued_4_gpu_job_needs():
    """n1 has 4 free GPUs, n2 8. Best fit alone puts a 1-GPU job on n1 (fewest free that fit), which leaves 3
    GPUs no queued 4-GPU job can use; under the queue's workload it goes to n2, where 7 free still take one."""
    running = tuple(engine.RunningJob(10 + i, "t", "A100", (engine.Placement(1, (i,)),), preemptible=False)
                    for i in range(4))  # four 1-GPU jobs hold half of n1
    small = engine.WaitingJob(1, "t", "A100", 1, submitted_at=1, priority=9)
    queued = tuple(engine.WaitingJob(i, "t", "A100", 4, submitted_at=i, held="user") for i in (2, 3, 4))
    result = _pass(running, (small, *queued))
    assert [(a.job_id, a.placements[0].node_id) for a in result.admissions] == [(1, 2)]

    alone = _pass(running, (small,))  # only 1-GPU jobs in view: nothing to spare, the fullest node it fits on
    assert [(a.job_id, a.placements[0].node_id) for a in alone.admissions] == [(1, 1)]
