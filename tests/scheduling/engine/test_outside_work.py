"""Work the portal did not submit (``Snapshot.outside``): it holds its GPUs, counts against no quota and no fair
share, is never a victim, ends at its time limit in the estimates, and the wait reasons say where it holds GPUs."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import (
    NodeSnapshot,
    OutsideHold,
    Placement,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    WaitingJob,
    WaitReason,
    render_reason,
    schedule,
)
from scheduling.engine.reasons import render_reason_for_others

NOW = 1_000_000.0
HOUR = 3600.0


def h800(count=2, gpus=8):
    return tuple(NodeSnapshot(i, f"sx-h800-{i}", "H800", tuple(range(gpus)), cluster="sx") for i in range(1, count + 1))


def hold(node, gpus, started=NOW - HOUR, limit=math.inf, scheduler="Slurm", external_id="4242"):
    return OutsideHold(node, tuple(gpus), external_id, started_at=started, time_limit=limit, scheduler=scheduler)


def job(job_id, g, tenant="vision", priority=10, **kw):
    return WaitingJob(job_id, tenant, "H800", g, priority=priority, submitted_at=float(job_id), **kw)


def quota(tenant="vision", guaranteed=16, limit=16):
    return QuotaSnapshot(tenant, "H800", guaranteed, limit)


def snap(**kw):
    return Snapshot(now=NOW, **{"nodes": h800(), "quotas": (quota(),), **kw})


def test_outside_work_takes_its_gpus_and_the_job_goes_around_it():
    result = schedule(snap(waiting=(job(1, 6),), outside=(hold(1, range(4)),)))
    (admission,) = result.admissions
    # node 1 has only 4 free: the job lands on node 2, never on a GPU outside work holds
    assert admission.placements == (Placement(2, tuple(range(6))),)


def test_outside_work_blocks_placement_and_the_reason_names_node_and_counts():
    result = schedule(snap(nodes=h800(count=1), waiting=(job(1, 8),), outside=(hold(1, range(4)),)))
    assert not result.admissions
    wait = result.wait_for(1)
    assert wait.reason == WaitReason.INSUFFICIENT_GPUS
    assert wait.message == (
        "Needs 8 H800 GPUs on one node; the most free on any healthy H800 node is 4 (4 free in total). "
        "4 of the 8 H800 GPUs of sx-h800-1 are held by work submitted to Slurm directly, outside the portal.")
    # numbers and names only: no user, account or job id of the outside work
    assert {k: v for k, v in wait.params.items() if k.startswith("outside_")} == {
        "outside_held": 4, "outside_node_gpus": 8, "outside_model": "H800", "outside_node": "sx-h800-1",
        "outside_scheduler": "Slurm"}
    assert render_reason_for_others(wait.reason, wait.params) == wait.message


def test_the_reason_counts_every_node_outside_work_holds_and_names_the_busiest():
    outside = (hold(1, range(3)), hold(2, range(5), external_id="77"), hold(2, (5,), external_id="78"))
    result = schedule(snap(waiting=(job(1, 8),), outside=outside))
    wait = result.wait_for(1)
    assert wait.params["outside_node"] == "sx-h800-2" and wait.params["outside_held"] == 6
    assert wait.message.endswith("6 of the 8 H800 GPUs of sx-h800-2 are held by work submitted to Slurm directly, "
                                 "outside the portal (9 GPUs on 2 nodes in all).")


def test_without_a_scheduler_name_the_reason_says_outside_the_portal_only():
    result = schedule(snap(nodes=h800(count=1), waiting=(job(1, 8),), outside=(hold(1, (0,), scheduler=""),)))
    assert result.wait_for(1).message.endswith(
        "1 of the 8 H800 GPUs of sx-h800-1 are held by work outside the portal.")


def test_a_reason_not_about_free_gpus_gets_no_clause():
    # the tenant's quota, not the outside work, keeps it waiting
    result = schedule(snap(waiting=(job(1, 4),), quotas=(quota(limit=2, guaranteed=2),),
                           outside=(hold(1, range(8)),)))
    wait = result.wait_for(1)
    assert wait.reason == WaitReason.QUOTA_EXHAUSTED
    assert not any(k.startswith("outside_") for k in wait.params) and "outside the portal" not in wait.message


def test_outside_work_is_never_preempted_and_counts_against_no_quota_or_fair_share():
    outside = (hold(1, range(8)),)
    running = (RunningJob(5, "nlp", "H800", (Placement(2, tuple(range(8))),), priority=10, preemptible=True,
                          started_at=NOW - HOUR, max_runtime=10 * HOUR),)
    # a non-preemptible job of a higher class may stop the portal's preemptible job, never the outside work
    urgent = job(1, 8, priority=100, preemptible=False)
    result = schedule(snap(waiting=(urgent,), running=running, outside=outside,
                           quotas=(quota(), quota("nlp"))))
    assert [p.victim_id for p in result.preemptions] == [5]
    # with only outside work in the way there is nobody to preempt: it waits, and is told why
    alone = schedule(snap(nodes=h800(count=1), waiting=(urgent,), outside=outside))
    assert not alone.preemptions and not alone.admissions
    assert alone.wait_for(1).params["outside_held"] == 8
    # the outside work is no tenant's: shares list only the portal's tenants, its GPUs count in no quota
    assert {s.tenant for s in result.shares} == {"vision", "nlp"}
    assert {s.tenant: s.running_gpus for s in result.shares}["nlp"] == 8
    quota_fits = schedule(snap(waiting=(job(2, 8),), outside=(hold(1, range(8)),), quotas=(quota(limit=8),)))
    assert [a.job_id for a in quota_fits.admissions] == [2]


def test_estimate_counts_on_the_outside_work_ending_at_its_time_limit():
    # started an hour ago with a two-hour limit: its GPUs free in an hour
    ends = schedule(snap(nodes=h800(count=1), waiting=(job(1, 8),),
                         outside=(hold(1, range(4), started=NOW - HOUR, limit=2 * HOUR),)))
    assert ends.wait_for(1).estimated_start == NOW + HOUR
    # without a time limit its end is unknown, and so is the job's start
    never = schedule(snap(nodes=h800(count=1), waiting=(job(1, 8),), outside=(hold(1, range(4)),)))
    assert never.wait_for(1).estimated_start is None


def test_backfill_sees_the_outside_work_end():
    # the head (8 GPUs) waits until the outside work ends in an hour; a 4-GPU job of 30 minutes fits before that,
    # one of 2 hours would delay the head and waits
    outside = (hold(1, range(4), started=NOW - HOUR, limit=2 * HOUR),)
    head, short, long = job(1, 8), job(2, 4, max_runtime=HOUR / 2), job(3, 4, max_runtime=2 * HOUR)
    result = schedule(snap(nodes=h800(count=1), waiting=(head, short), outside=outside))
    assert [(a.job_id, a.backfilled) for a in result.admissions] == [(2, True)]
    blocked = schedule(snap(nodes=h800(count=1), waiting=(head, long), outside=outside))
    assert not blocked.admissions and blocked.wait_for(3).reason == WaitReason.PRIORITY


def test_a_hold_on_a_node_of_another_cluster_or_an_unhealthy_gpu_takes_nothing_here():
    # node 9 is not in this snapshot (another cluster's); GPU 7 of node 1 is unhealthy, so not offered anyway
    nodes = (NodeSnapshot(1, "sx-h800-1", "H800", tuple(range(7)), gpu_total=8, cluster="sx"),)
    result = schedule(snap(nodes=nodes, waiting=(job(1, 7),), outside=(hold(9, range(8)), hold(1, (7,)))))
    assert [(a.job_id, a.placements) for a in result.admissions] == [(1, (Placement(1, tuple(range(7))),))]
    waiting = schedule(snap(nodes=nodes, waiting=(job(2, 7), job(3, 7)), outside=(hold(1, (7,)),)))
    # the second job waits for GPUs portal work holds; the unhealthy GPU's hold is not blamed
    assert waiting.wait_for(3).reason == WaitReason.INSUFFICIENT_GPUS
    assert "outside the portal" not in waiting.wait_for(3).message
    assert render_reason(WaitReason.INSUFFICIENT_GPUS, waiting.wait_for(3).params) == waiting.wait_for(3).message


@settings(max_examples=100, deadline=None)
@given(node_gpus=st.lists(st.integers(1, 8), min_size=1, max_size=5),
       holds=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 7), st.integers(1, 8)), max_size=6),
       jobs=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 2), st.integers(0, 100), st.booleans()),
                     max_size=12),
       runs=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 4), st.integers(0, 50)), max_size=6))
def test_no_job_is_ever_placed_on_a_gpu_outside_work_holds(node_gpus, holds, jobs, runs):
    nodes = tuple(NodeSnapshot(i, f"n{i}", "H800", tuple(range(g))) for i, g in enumerate(node_gpus))
    outside = tuple(hold(n % len(nodes), range(first, first + count)) for n, first, count in holds)
    held = {(h.node_id, i) for h in outside for i in h.gpu_indices}
    taken, running = set(held), []
    for k, (n, count, priority) in enumerate(runs):
        node = nodes[n % len(nodes)]
        free = tuple(i for i in node.gpu_indices if (node.id, i) not in taken)[:count]
        if free:
            taken |= {(node.id, i) for i in free}
            running.append(RunningJob(1000 + k, "nlp", "H800", (Placement(node.id, free),), priority=priority,
                                      started_at=NOW - HOUR, max_runtime=4 * HOUR))
    waiting = tuple(job(i, g, nodes=n, priority=p, preemptible=pre) for i, (g, n, p, pre) in enumerate(jobs))
    result = schedule(Snapshot(nodes=nodes, running=tuple(running), waiting=waiting, outside=outside, now=NOW,
                               quotas=(QuotaSnapshot("vision", "H800", 64, 64), QuotaSnapshot("nlp", "H800", 0, 64))))
    placed = [(p.node_id, i) for a in result.admissions for p in a.placements for i in p.gpu_indices]
    assert not held & set(placed)
    assert {p.victim_id for p in result.preemptions} <= {r.id for r in running}
    for wait in result.waiting:  # a clause only where outside work holds GPUs, and its counts are held GPUs
        if "outside_node" in wait.params:
            assert 0 < wait.params["outside_held"] <= wait.params["outside_node_gpus"]
            assert "held by work submitted to Slurm directly" in wait.message
