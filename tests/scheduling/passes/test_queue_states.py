"""The queue states written in bulk where the rows are (``passes.queue_states``, PostgreSQL) and compared in
Python (every other database) give the same answer and the same rows, and a steady queue writes nothing."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduling import engine, lifecycle
from scheduling.jobs import submission
from scheduling.models import JobQueueState, JobStatus
from scheduling.passes import queue_states
from scheduling.passes.kept import load_snapshots
from scheduling.passes.scheduler import QUEUE_FIELDS, _store_waits_here, run_pass
from tests.conftest import job_payload
from tests.factories import build_world

pytestmark = pytest.mark.django_db


def _stored(ids):
    return {row[0]: row[1:] for row in JobQueueState.objects.filter(job_id__in=ids).values_list(
        "job_id", *QUEUE_FIELDS)}


def test_both_writers_agree_and_a_steady_queue_writes_nothing():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(4)]
    lifecycle.transition(jobs[3], JobStatus.CANCELLED, "test: cancelled")  # no longer waits: left alone
    at = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    first = {job.pk: ("quota", {"used": i}, i, i, at, at, None) for i, job in enumerate(jobs)}
    found, written = queue_states.store([(pk, *row) for pk, row in first.items()])
    assert written == 3 and set(found) == {job.pk for job in jobs[:3]}
    assert all(changed for _status, changed in found.values())  # a first state: an event each
    assert _stored(first) == {pk: row for pk, row in first.items() if pk in found}
    assert queue_states.store([(pk, *row) for pk, row in first.items()]) == (
        dict.fromkeys(found, (JobStatus.QUEUED, False)), 0)

    moved = {**first, jobs[0].pk: ("quota", {"used": 0}, 9, 9, at, at, None),  # positions only
             jobs[1].pk: ("gpus_busy", {}, 1, 1, None, None, None)}  # a new reason
    here = _store_waits_here(moved)
    assert here == ({jobs[0].pk: (JobStatus.QUEUED, False), jobs[1].pk: (JobStatus.QUEUED, True),
                     jobs[2].pk: (JobStatus.QUEUED, False)}, 2)
    assert _stored(moved) == {pk: row for pk, row in moved.items() if pk in found}
    assert queue_states.store([(pk, *row) for pk, row in moved.items()])[1] == 0


def test_estimates_within_the_tolerance_are_left_alone_and_stay_true():
    users = build_world()["users"]
    for _ in range(6):  # more than alice's GPUs: some wait, with a likely start
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8))
    run_pass()
    states = list(JobQueueState.objects.exclude(estimated_start=None))
    assert states
    drifted, stale = states[0], states[1:]  # as a pass a little earlier (50 s) or long ago (2 min) wrote them
    for state, by in [(drifted, 50), *((s, 120) for s in stale)]:
        for name in queue_states.TIMES:
            if getattr(state, name) is not None:
                setattr(state, name, getattr(state, name) + timedelta(seconds=by))
        state.save()

    run_pass()

    engine_says = {w.job_id: w for snapshot in load_snapshots()[0].values() for w in engine.schedule(snapshot).waiting}
    tolerance = queue_states.tolerance()
    stored = {s.job_id: s for s in JobQueueState.objects.all()}
    assert stored[drifted.job_id].estimated_start == drifted.estimated_start  # within it: not written again
    for job_id, state in stored.items():
        wait = engine_says[job_id]
        for name in queue_states.TIMES:
            ours, theirs = getattr(state, name), getattr(wait, name)
            assert (ours is None) == (theirs is None)
            assert ours is None or abs(ours.timestamp() - theirs) <= tolerance + 1  # the second between the two
    assert all(abs((stored[s.job_id].estimated_start - s.estimated_start).total_seconds()) > tolerance
               for s in stale)  # moved further than the tolerance: written again


def test_both_writers_apply_the_same_tolerance():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(2)]
    at = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    first = {job.pk: ("quota", {}, 1, 1, at, at, at) for job in jobs}
    queue_states.store([(pk, *row) for pk, row in first.items()])
    near, far = timedelta(seconds=59), timedelta(seconds=61)
    moved = {jobs[0].pk: ("quota", {}, 1, 1, at + near, at - near, at), jobs[1].pk: ("quota", {}, 1, 1, at, at, None)}
    assert _store_waits_here(moved)[1] == 1  # the estimate that vanished; the one 59 s off stays
    moved[jobs[0].pk] = ("quota", {}, 1, 1, at + far, at, at)
    assert queue_states.store([(pk, *row) for pk, row in moved.items()])[1] == 1
    assert _stored(moved) == moved
