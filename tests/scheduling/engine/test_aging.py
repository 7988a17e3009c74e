"""Aging across priority classes (``Policy.aging_points_per_hour``) and the site's history as the placement's
target workload (``Snapshot.history``)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import Placement, Policy, RunningJob, Snapshot, WaitingJob, WaitReason, schedule
from scheduling.engine.fragmentation import TaskShape, target_workload
from scheduling.engine.passes import decayed_usage, order_jobs
from tests.scheduling.engine.test_engine import HOUR, NOW, job, nodes, quota, running, snap

STRICT = Policy(aging_points_per_hour=0)


def test_a_long_waiting_lower_class_job_goes_before_newer_higher_class_jobs():
    waiting = (job(1, 8, priority=10, submitted=NOW - 20 * HOUR), job(2, 8, priority=100, submitted=NOW - 60))
    base = {"nodes": nodes(1), "quotas": (quota(),), "waiting": waiting}
    assert [a.job_id for a in schedule(snap(**base, policy=STRICT)).admissions] == [2]
    # 10 + 5 points x 20 hours = 110 > 100: the old best-effort job's turn
    assert [a.job_id for a in schedule(snap(**base)).admissions] == [1]
    # not yet: after 10 hours it counts 60, still behind
    younger = (job(1, 8, priority=10, submitted=NOW - 10 * HOUR), waiting[1])
    assert [a.job_id for a in schedule(snap(**base | {"waiting": younger})).admissions] == [2]


def test_a_held_job_does_not_age():
    held = job(1, 8, priority=10, submitted=NOW - 100 * HOUR, held="user")
    order = order_jobs(snap(nodes=nodes(1), waiting=(held, job(2, 8, priority=100, submitted=NOW))), {})
    assert [j.id for j in order] == [2, 1]


def test_the_sentence_says_why_a_lower_priority_job_is_ahead():
    # 4 of 8 GPUs busy for 2 more hours: the aged 8-GPU job waits for them; the priority-100 job would fit now
    # but runs past that shadow (max runtime 10 hours), so it waits behind the older, lower-priority job.
    result = schedule(snap(nodes=nodes(1), quotas=(quota(),),
                           running=(running(9, "t", 1, range(4), started=NOW, runtime=2 * HOUR),),
                           waiting=(job(1, 8, priority=10, submitted=NOW - 20 * HOUR),
                                    job(2, 2, priority=100, submitted=NOW, max_runtime=10 * HOUR))))
    wait = result.wait_for(2)
    assert wait.reason == WaitReason.PRIORITY
    assert wait.params["blocker_priority"] == 10 and wait.params["blocker_waited_hours"] == 20.0
    assert wait.message.endswith("It has waited 20 hours, and a job that has waited that long goes ahead of "
                                 "newer jobs of higher priority.")
    assert "blocker_waited_hours" not in result.wait_for(1).params


def test_a_long_waiting_head_gets_a_node_kept_that_only_short_jobs_may_use():
    # Node 1 frees in 2 hours, node 2 in 10: node 1 is kept for the 8-GPU job that has waited 20 hours (aging
    # off, so it is last in the order). Job 2 goes to node 2; job 3 fits only on node 1 and would hold it for 10
    # hours, so it waits and is told for whom; job 4 ends within the 2 hours and may use it.
    busy = (running(8, "t", 1, range(4), started=NOW, runtime=2 * HOUR),
            running(9, "t", 2, range(2), started=NOW, runtime=10 * HOUR))
    waiting = (job(1, 8, submitted=NOW - 20 * HOUR), job(2, 4, priority=100, submitted=NOW - 3, max_runtime=10 * HOUR),
               job(3, 4, priority=100, submitted=NOW - 2, max_runtime=10 * HOUR),
               job(4, 4, priority=100, submitted=NOW - 1, max_runtime=HOUR))
    result = schedule(snap(nodes=nodes(2), quotas=(quota(),), running=busy, waiting=waiting, policy=STRICT))
    assert {a.job_id: a.placements[0].node_id for a in result.admissions} == {2: 2, 4: 1}
    wait = result.wait_for(3)
    assert wait.reason == WaitReason.PRIORITY and wait.params["blocker_id"] == 1
    assert wait.params["blocker_waited_hours"] == 20.0
    never = Policy(aging_points_per_hour=0, keep_node_after_hours=0)
    result = schedule(snap(nodes=nodes(2), quotas=(quota(),), running=busy, waiting=waiting, policy=never))
    assert {a.job_id for a in result.admissions} >= {2, 3}  # without it the node is refilled


def test_a_job_held_back_by_a_kept_node_is_estimated_after_the_job_it_is_kept_for():
    # One node of 2 GPUs, one busy for 8 hours: it is kept for the 2-GPU job that has waited 20 hours (last in the
    # order). The day-long job of a higher class is ahead in the queue but cannot start before it; the hour-long
    # one ends before the node drains and may use the free GPU now. The estimates follow what will happen: the
    # kept job at 8 hours, whether or not the short job takes the free GPU meanwhile, the day-long one an hour
    # later. (Estimated in queue order, the day-long job took the free GPU first: 24 hours, or 25 with the
    # short job.)
    waiting = (job(1, 2, submitted=NOW - 20 * HOUR, max_runtime=HOUR),
               job(2, 1, priority=100, submitted=NOW - 2, max_runtime=24 * HOUR),
               job(3, 1, priority=100, submitted=NOW - 1, max_runtime=HOUR))
    base = {"nodes": nodes(1, gpus=2), "quotas": (quota(),), "policy": STRICT,
            "running": (running(9, "t", 1, (0,), started=NOW, runtime=8 * HOUR),)}
    for queue, admitted in ((waiting, [3]), (waiting[:2], [])):
        result = schedule(snap(**base, waiting=queue))
        assert [a.job_id for a in result.admissions] == admitted
        assert result.wait_for(2).reason == WaitReason.PRIORITY and result.wait_for(2).params["blocker_id"] == 1
        assert result.wait_for(1).estimated_start == NOW + 8 * HOUR
        assert result.wait_for(2).estimated_start == NOW + 9 * HOUR



def test_a_kept_node_never_holds_back_a_job_that_has_waited_longer():
    # The same nodes: node 1 is kept for the 8-GPU job waiting 20 hours; a gang of 2 x 4 GPUs (never kept for:
    # more than one node) has waited 30 hours and fits only with node 1's free half: it is not held back.
    busy = (running(8, "t", 1, range(4), started=NOW, runtime=2 * HOUR),
            running(9, "t", 2, range(2), started=NOW, runtime=10 * HOUR))
    waiting = (job(1, 8, submitted=NOW - 20 * HOUR), job(5, 4, n=2, submitted=NOW - 30 * HOUR, max_runtime=10 * HOUR))
    result = schedule(snap(nodes=nodes(2), quotas=(quota(),), running=busy, waiting=waiting, policy=STRICT))
    assert [a.job_id for a in result.admissions] == [5]
    assert result.wait_for(1) is not None

jobs = st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from([10, 50, 80, 100]), st.integers(0, 48 * 60),
                          st.integers(1, 8)), max_size=30)


@settings(max_examples=100, deadline=None)
@given(jobs=jobs, rate=st.sampled_from([1.0, 5.0, 20.0]))
def test_aging_merges_the_classes_and_keeps_each_class_in_its_fair_share_order(jobs, rate):
    waiting = tuple(WaitingJob(i, tenant, "A100", g, priority=p, submitted_at=NOW - minutes * 60)
                    for i, (tenant, p, minutes, g) in enumerate(jobs))
    strict = order_jobs(snap(nodes=nodes(1), waiting=waiting, policy=STRICT), {})
    aged = order_jobs(snap(nodes=nodes(1), waiting=waiting, policy=Policy(aging_points_per_hour=rate)), {})
    assert sorted(j.id for j in aged) == sorted(j.id for j in strict)
    for priority in {j.priority for j in waiting}:  # inside a class: the same order as without aging
        assert [j.id for j in aged if j.priority == priority] == [j.id for j in strict if j.priority == priority]
    position = {j.id: k for k, j in enumerate(aged)}
    single = [j for j in waiting if j.tenant == "a"]
    if len(single) == len(waiting):  # one tenant: a class is in arrival order, and no job is overtaken by a
        for low in single:            # job of a higher class that arrived more than the gap's aging later
            for high in single:
                gap_hours = (high.priority - low.priority) / rate
                if high.priority > low.priority and high.submitted_at - low.submitted_at > gap_hours * 3600 + 1:
                    assert position[low.id] < position[high.id]


def test_aging_off_is_strict_priority():
    waiting = (job(1, 1, priority=10, submitted=0.0), job(2, 1, priority=100, submitted=NOW))
    snapshot = snap(nodes=nodes(1), waiting=waiting, policy=STRICT)
    assert [j.id for j in order_jobs(snapshot, decayed_usage(snapshot))] == [2, 1]


def test_history_is_the_target_workload_when_present():
    history = ((TaskShape(8), 3.0), (TaskShape(1, 500), 1.0))
    waiting = (WaitingJob(1, "t", "A100", 2),)
    from_history = target_workload(waiting, (), history)
    assert {s: round(p, 2) for s, p in from_history.shapes} == {TaskShape(8): 0.75, TaskShape(1, 500): 0.25}
    fallback = target_workload(waiting, ())
    assert [s.gpus for s, _p in fallback.shapes] == [2]


def test_the_pass_places_against_the_history():
    # Node 1 has 4 whole GPUs free, node 2 has 6. Without a history the queue and the running jobs (a 4-GPU and
    # a 2-GPU one) stand in: node 1 must stay able to take a 4-GPU job, so this 2-GPU job goes to node 2. The
    # site's history of 6-GPU jobs says otherwise: node 2 must stay able to take one, so node 1.
    busy = (RunningJob(8, "t", "A100", (Placement(1, (0, 1, 2, 3)),), started_at=NOW, max_runtime=HOUR),
            RunningJob(9, "t", "A100", (Placement(2, (0, 1)),), started_at=NOW, max_runtime=HOUR))
    chosen = {}
    for name, history in (("none", ()), ("six", ((TaskShape(6), 1.0),))):
        result = schedule(Snapshot(nodes=nodes(2), running=busy, waiting=(job(1, 2),), quotas=(quota(),), now=NOW,
                                   history=history))
        chosen[name] = result.admissions[0].placements[0].node_id
    assert chosen == {"none": 2, "six": 1}
