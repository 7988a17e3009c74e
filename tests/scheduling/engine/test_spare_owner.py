"""A waiting job that spares its owner's running jobs: the engine picks other victims or lets it wait."""

from scheduling.engine import (
    NodeSnapshot,
    Placement,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    WaitingJob,
    WaitReason,
    schedule,
)

NOW = 1_000_000.0


def _world(spare: bool, other_victim: bool) -> Snapshot:
    """One node of 8 GPUs: 4 held by alice's (owner 7) low-priority job, 4 by bob's (owner 8) when asked; alice
    submits a non-preemptible job of 4 GPUs at a higher priority."""
    nodes = (NodeSnapshot(1, "n1", "A100", tuple(range(8))),)
    running = [RunningJob(11, "t", "A100", (Placement(1, (0, 1, 2, 3)),), priority=10, started_at=NOW - 50,
                          max_runtime=7200, owner=7)]
    if other_victim:
        running.append(RunningJob(12, "t", "A100", (Placement(1, (4, 5, 6, 7)),), priority=10,
                                  started_at=NOW - 500, max_runtime=7200, owner=8))
    else:
        running.append(RunningJob(12, "t", "A100", (Placement(1, (4, 5, 6, 7)),), priority=10,
                                  started_at=NOW - 500, max_runtime=7200, owner=8, preemptible=False))
    waiting = (WaitingJob(1, "t", "A100", 4, priority=80, preemptible=False, submitted_at=NOW, owner=7,
                          spare_owner=spare),)
    return Snapshot(nodes=nodes, running=tuple(running), waiting=waiting,
                    quotas=(QuotaSnapshot("t", "A100", 16, 16),), now=NOW)


def test_without_the_flag_the_newest_victim_is_the_owners_own_job():
    result = schedule(_world(spare=False, other_victim=True))
    assert [p.victim_id for p in result.preemptions] == [11]


def test_sparing_the_owner_picks_another_owners_job_instead():
    result = schedule(_world(spare=True, other_victim=True))
    assert [p.victim_id for p in result.preemptions] == [12]
    assert result.wait_for(1).reason == WaitReason.PREEMPTION_PENDING


def test_sparing_the_owner_waits_when_only_own_jobs_could_make_room():
    result = schedule(_world(spare=True, other_victim=False))
    assert result.preemptions == []
    assert result.wait_for(1).reason == WaitReason.INSUFFICIENT_GPUS
    assert not result.admissions


def test_owner_unknown_spares_nobody():
    """Jobs of unknown owner (0) are never taken for the submitter's own."""
    world = _world(spare=True, other_victim=False)
    world = Snapshot(nodes=world.nodes, running=tuple(RunningJob(**{**j.__dict__, "owner": 0}) for j in world.running),
                     waiting=tuple(WaitingJob(**{**j.__dict__, "owner": 0}) for j in world.waiting),
                     quotas=world.quotas, now=NOW)
    assert [p.victim_id for p in schedule(world).preemptions] == [11]


def test_reclaim_takes_no_borrower_job_of_a_higher_priority():
    """Requeued, such a job would be ordered first in the next pass and take the GPUs back, pass after pass."""
    nodes = (NodeSnapshot(1, "n1", "A100", tuple(range(8))),)
    running = (RunningJob(11, "borrower", "A100", (Placement(1, tuple(range(8))),), priority=50, started_at=NOW - 5,
                          max_runtime=7200),)
    quotas = (QuotaSnapshot("owner", "A100", 8, 8), QuotaSnapshot("borrower", "A100", 0, 8))
    low = WaitingJob(1, "owner", "A100", 8, priority=30, submitted_at=NOW)
    assert schedule(Snapshot(nodes=nodes, running=running, waiting=(low,), quotas=quotas, now=NOW)).preemptions == []
    same = WaitingJob(1, "owner", "A100", 8, priority=50, submitted_at=NOW)
    result = schedule(Snapshot(nodes=nodes, running=running, waiting=(same,), quotas=quotas, now=NOW))
    assert [(p.victim_id, p.rule) for p in result.preemptions] == [(11, "reclaim within guarantee")]
