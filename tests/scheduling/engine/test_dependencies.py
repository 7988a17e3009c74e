"""Dependencies in the engine: the rule of when one is met, the wait reason naming what a job waits for, and the
estimate that chains through a pipeline, checked against what then happens when the passes run on."""

import pytest

from scheduling.engine import (
    Dependency,
    NodeSnapshot,
    Placement,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    WaitingJob,
    WaitReason,
    schedule,
)
from scheduling.engine.dependencies import (
    AFTER_ANY,
    AFTER_CORR,
    AFTER_NOT_OK,
    AFTER_OK,
    MET,
    NEVER,
    WAITING,
    find_cycle,
    parse,
    verdict,
)

NOW = 1_000_000.0
NODES = (NodeSnapshot(1, "n1", "A100", tuple(range(8))),)
QUOTAS = (QuotaSnapshot("t", "A100", 8, 8),)


@pytest.mark.parametrize(("condition", "statuses", "state"), [
    (AFTER_OK, ["running"], WAITING), (AFTER_OK, ["succeeded"], MET), (AFTER_OK, ["failed"], NEVER),
    (AFTER_OK, ["cancelled"], NEVER), (AFTER_OK, ["succeeded", "queued"], WAITING),
    (AFTER_OK, ["succeeded", "failed", "queued"], NEVER),
    (AFTER_ANY, ["failed"], MET), (AFTER_ANY, ["preempted"], WAITING), (AFTER_ANY, ["succeeded", "running"], WAITING),
    (AFTER_NOT_OK, ["failed"], MET), (AFTER_NOT_OK, ["cancelled"], MET), (AFTER_NOT_OK, ["succeeded"], NEVER),
    (AFTER_NOT_OK, ["failed", "running"], WAITING), (AFTER_NOT_OK, ["succeeded", "failed"], MET),
    (AFTER_CORR, ["succeeded"], MET), (AFTER_CORR, ["failed"], NEVER),
])
def test_when_a_dependency_is_met(condition, statuses, state):
    assert verdict(condition, statuses) == state


def test_parse_reads_slurms_form_and_refuses_the_rest():
    assert parse("afterok:812:813,afterany:820") == [("afterok", "812"), ("afterok", "813"), ("afterany", "820")]
    assert parse(" aftercorr:812_3 , afternotok:@2") == [("aftercorr", "812_3"), ("afternotok", "@2")]
    for bad in ("after:1", "afterok", "afterok:", "afterok:x", "afterok:1:?", "singleton", "afterok:@1_2"):
        with pytest.raises(ValueError):
            parse(bad)


def test_find_cycle_names_the_jobs_along_it():
    assert find_cycle({0: [], 1: [0], 2: [1]}) is None
    assert find_cycle({0: [2], 1: [0], 2: [1]}) == [0, 2, 1, 0]
    assert find_cycle({5: [5]}) == [5, 5]


def _running(job_id=11, gpus=8, runtime=3600.0, started=NOW - 600):
    return RunningJob(job_id, "t", "A100", (Placement(1, tuple(range(gpus))),), started_at=started,
                      max_runtime=runtime, expected_runtime=runtime)


def _waiting(job_id, after=(), gpus=8, runtime=1800.0, submitted=NOW):
    return WaitingJob(job_id, "t", "A100", gpus, submitted_at=submitted, max_runtime=runtime,
                      expected_runtime=runtime, after=tuple(after))


def test_a_job_waits_for_its_parent_and_says_for_what():
    parent = _running(11, gpus=4)  # four GPUs are free: the child would fit now but for its dependency
    child = _waiting(21, [Dependency(11, AFTER_OK, WAITING, "running", (11,))], gpus=4)
    result = schedule(Snapshot(nodes=NODES, running=(parent,), waiting=(child,), quotas=QUOTAS, now=NOW))
    assert not result.admissions
    wait = result.wait_for(21)
    assert wait.reason == WaitReason.DEPENDENCY
    assert wait.estimated_start == parent.end()
    assert wait.message.startswith("Waits for #11 to succeed; #11 is running, likely done by ")
    assert wait.params["done_by_ts"] == parent.end()


def test_a_met_dependency_holds_nothing_back():
    child = _waiting(21, [Dependency(11, AFTER_OK, MET, "succeeded")])
    result = schedule(Snapshot(nodes=NODES, waiting=(child,), quotas=QUOTAS, now=NOW))
    assert [a.job_id for a in result.admissions] == [21]


def test_a_dependency_that_can_never_be_met_is_said_so_without_an_estimate():
    child = _waiting(21, [Dependency(11, AFTER_OK, NEVER, "failed")])
    wait = schedule(Snapshot(nodes=NODES, waiting=(child,), quotas=QUOTAS, now=NOW)).wait_for(21)
    assert wait.reason == WaitReason.DEPENDENCY_NEVER
    assert wait.estimated_start is None
    assert "#11 failed" in wait.message


def _pipeline():
    """preprocess (running, 1 h, 10 min in) -> train (waiting, 30 min) -> evaluate (waiting, 20 min), each on
    the whole node; the evaluation is queued first, so its estimate must wait for the training's."""
    train = _waiting(21, [Dependency(11, AFTER_OK, WAITING, "running", (11,))], runtime=1800)
    evaluate = _waiting(22, [Dependency(21, AFTER_OK, WAITING, "queued", (21,))], runtime=1200,
                        submitted=NOW - 60)
    return _running(11), train, evaluate


def test_the_estimate_chains_through_the_pipeline():
    preprocess, train, evaluate = _pipeline()
    result = schedule(Snapshot(nodes=NODES, running=(preprocess,), waiting=(train, evaluate), quotas=QUOTAS,
                               now=NOW))
    assert result.wait_for(21).estimated_start == preprocess.end()
    assert result.wait_for(22).estimated_start == preprocess.end() + 1800
    assert "#21 is queued" in result.wait_for(22).message


def test_the_chained_estimates_come_true_when_the_passes_run_on():
    """Run passes every minute, ending each job after its runtime and meeting the dependencies of the jobs that
    waited for it: each job starts within a pass of the estimate the first pass gave it."""
    preprocess, train, evaluate = _pipeline()
    first = schedule(Snapshot(nodes=NODES, running=(preprocess,), waiting=(train, evaluate), quotas=QUOTAS,
                              now=NOW))
    estimated = {w.job_id: w.estimated_start for w in first.waiting}
    running, waiting, started, ended = {11: preprocess}, {21: train, 22: evaluate}, {}, {}
    now = NOW
    while waiting and now < NOW + 6 * 3600:
        now += 60
        for job_id, job in list(running.items()):
            if job.end() <= now:
                ended[job_id] = "succeeded"
                del running[job_id]
        waiting = {job_id: WaitingJob(**{**job.__dict__, "after": tuple(
            Dependency(d.on_job, d.condition, verdict(d.condition, [ended.get(d.on_job, "running")]),
                       ended.get(d.on_job, "running"), d.waits_on) for d in job.after)})
                   for job_id, job in waiting.items()}
        result = schedule(Snapshot(nodes=NODES, running=tuple(running.values()), waiting=tuple(waiting.values()),
                                   quotas=QUOTAS, now=now))
        for admission in result.admissions:
            job = waiting.pop(admission.job_id)
            started[job.id] = now
            running[job.id] = RunningJob(job.id, "t", "A100", admission.placements, started_at=now,
                                         max_runtime=job.max_runtime, expected_runtime=job.expected_runtime)
    assert set(started) == {21, 22}
    assert started[21] < started[22]
    for job_id in (21, 22):
        assert 0 <= started[job_id] - estimated[job_id] <= 60


def test_a_job_awaiting_approval_or_held_is_still_told_its_dependency_can_never_be_met():
    """Approved or released, it could never run: the pass ends it now rather than after a decision."""
    for flags in ({"awaiting_approval": True}, {"held": "user"}):
        child = WaitingJob(21, "t", "A100", 1, submitted_at=NOW, after=(Dependency(11, AFTER_OK, NEVER, "failed"),),
                           **flags)
        wait = schedule(Snapshot(nodes=NODES, waiting=(child,), quotas=QUOTAS, now=NOW)).wait_for(21)
        assert wait.reason == WaitReason.DEPENDENCY_NEVER, flags
    waiting = WaitingJob(22, "t", "A100", 1, submitted_at=NOW, awaiting_approval=True,
                         after=(Dependency(11, AFTER_OK, WAITING, "running", (11,)),))
    wait = schedule(Snapshot(nodes=NODES, waiting=(waiting,), quotas=QUOTAS, now=NOW)).wait_for(22)
    assert wait.reason == WaitReason.AWAITING_APPROVAL  # the approver's decision comes first while it may still run


def test_it_names_the_job_it_waits_for_longest_and_counts_the_others():
    short, long_ = _running(11, gpus=2, runtime=600), RunningJob(
        12, "t", "A100", (Placement(1, (2, 3)),), started_at=NOW - 60, max_runtime=7200, expected_runtime=7200)
    child = _waiting(21, [Dependency(11, AFTER_ANY, WAITING, "running", (11,)),
                          Dependency(12, AFTER_OK, WAITING, "running", (12,))], gpus=2)
    wait = schedule(Snapshot(nodes=NODES, running=(short, long_), waiting=(child,), quotas=QUOTAS,
                             now=NOW)).wait_for(21)
    assert wait.params["on_job"] == 12 and wait.estimated_start == long_.end()
    assert wait.message.endswith("It waits for 1 more job(s) too.")
