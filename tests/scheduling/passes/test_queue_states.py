"""What the pass says of waiting jobs: reasons compared with the ones the worker kept and checked by the rows'
fingerprints (PostgreSQL) or read and compared (every other database), with the same answer, and the queue table
of places and estimates, which a steady queue does not write again and every reader reads as the engine said it."""

import math
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduling import engine, lifecycle
from scheduling.jobs import submission
from scheduling.models import NO_TIME, Job, JobQueueState, JobStatus, QueueTable, queue_places
from scheduling.passes import queue_states
from scheduling.passes.kept import load_snapshots
from scheduling.passes.scheduler import run_pass
from tests.conftest import job_payload
from tests.factories import build_world

pytestmark = pytest.mark.django_db


def _stored(ids):
    return {row[0]: row[1:] for row in JobQueueState.objects.filter(job_id__in=ids).values_list(
        "job_id", *queue_states.REASON_FIELDS)}


def test_both_reason_writers_agree_and_a_steady_queue_writes_nothing():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(4)]
    lifecycle.transition(jobs[3], JobStatus.CANCELLED, "test: cancelled")  # no longer waits: left alone
    first = {job.pk: ("quota", {"used": i}) for i, job in enumerate(jobs)}
    found, written = queue_states.store(first)
    assert written == 3 and set(found) == {job.pk for job in jobs[:3]}
    assert all(changed for _status, changed in found.values())  # a first state: an event each
    assert _stored(first) == {pk: row for pk, row in first.items() if pk in found}
    assert queue_states.store(first) == (dict.fromkeys(found, (JobStatus.QUEUED, False)), 0)

    moved = {**first, jobs[0].pk: ("quota", {"used": 7}),  # new numbers, the same reason: no event
             jobs[1].pk: ("gpus_busy", {})}  # a new reason
    here = queue_states._store_here(moved)
    assert here == ({jobs[0].pk: (JobStatus.QUEUED, False), jobs[1].pk: (JobStatus.QUEUED, True),
                     jobs[2].pk: (JobStatus.QUEUED, False)}, 2)
    assert _stored(moved) == {pk: row for pk, row in moved.items() if pk in found}
    assert queue_states.store(moved)[1] == 0


def test_a_number_with_no_finite_value_is_stored_as_null_and_written_once():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(2)]
    for store, job in ((queue_states.store, jobs[0]), (queue_states._store_here, jobs[1])):
        values = {job.pk: ("gpus_busy", {"until": math.inf, "free": 2})}
        assert store(values)[1] == 1
        assert _stored(values) == {job.pk: ("gpus_busy", {"until": None, "free": 2})}
        assert store(values)[1] == 0  # equal to the engine's, or to what is stored: not written again


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the kept reasons are checked by PostgreSQL's hash")
def test_kept_reasons_are_trusted_only_where_the_database_holds_them():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(3)]
    values = {job.pk: ("quota", {"used": i}) for i, job in enumerate(jobs)}
    queue_states.store(values)
    moved = {**values, jobs[0].pk: ("quota", {"used": 9})}
    assert queue_states.store(moved)[1] == 1 and queue_states.KEPT.last == {"read": 0, "written": 1}
    # Written behind the pass's back (another worker, a bare update) and deleted: read again, then set right.
    JobQueueState.objects.filter(job_id=jobs[1].pk).update(wait_reason="gpus_busy")
    JobQueueState.objects.filter(job_id=jobs[2].pk).delete()
    found, written = queue_states.store(moved)
    assert queue_states.KEPT.last == {"read": 1, "written": 2}
    assert found[jobs[1].pk] == (JobStatus.QUEUED, True) and found[jobs[2].pk] == (JobStatus.QUEUED, True)
    assert _stored(moved) == moved
    assert queue_states.store(moved) == (dict.fromkeys(moved, (JobStatus.QUEUED, False)), 0)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the kept reasons are checked by PostgreSQL's hash")
def test_kept_reasons_survive_other_clusters_rollbacks_and_restarts():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(4)]
    one, two = ({job.pk: ("quota", {"used": 1}) for job in half} for half in (jobs[:2], jobs[2:]))
    queue_states.store(one)
    queue_states.store(two)  # another batch (a pass stores them all at once) leaves the first one's kept
    assert queue_states.store(one)[1] == 0 and queue_states.KEPT.last == {"read": 0, "written": 0}

    moved = {**one, jobs[0].pk: ("gpus_busy", {}), jobs[1].pk: ("quota", {"used": 2})}
    with pytest.raises(RuntimeError), transaction.atomic():  # a pass that failed after storing
        queue_states.store(moved)
        JobQueueState.objects.filter(job_id=jobs[2].pk).delete()
        raise RuntimeError
    found, written = queue_states.store(moved)  # the rolled-back rows are read again, and written over
    assert (written, queue_states.KEPT.last["read"]) == (2, 2) and found[jobs[0].pk] == (JobStatus.QUEUED, True)
    assert found[jobs[1].pk] == (JobStatus.QUEUED, False)  # new numbers, the same reason: no event

    restarted = queue_states.KeptReasons()  # a fresh worker reads what is stored once, and writes nothing equal
    assert restarted.store({**moved, **two})[1] == 0 and restarted.last == {"read": 4, "written": 0}
    lifecycle.transition(jobs[3], JobStatus.CANCELLED, "test: cancelled")
    found, written = restarted.store({**moved, **two})
    assert jobs[3].pk not in found and written == 0 and jobs[3].pk not in restarted.rows


def test_every_reader_sees_the_places_and_estimates_the_engine_gave():
    users = build_world()["users"]
    for _ in range(6):  # more than alice's GPUs: some wait, with a likely start
        submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpus_per_node=8,
                                                        gpu_model="H100"))
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8))
    report = run_pass()
    assert report.table_written

    snapshots = load_snapshots()[0]
    says = {w.job_id: w for snapshot in snapshots.values() for w in engine.schedule(snapshot).waiting}
    models = {job.id: job.gpu_model for snapshot in snapshots.values() for job in snapshot.waiting}
    waiting = list(Job.objects.waiting().order_by("pk"))
    assert len(waiting) == len(says) > 2
    for job in waiting:
        wait = says[job.pk]
        assert (job.queue_position, job.tenant_queue_position) == (wait.position, wait.tenant_position)
        for name in ("estimated_start", "earliest_start", "latest_start"):
            ours, theirs = getattr(job, name), getattr(wait, name)
            assert (ours is None) == (theirs is None)
            assert ours is None or abs(ours.timestamp() - theirs) <= queue_states.tolerance() + 1
    for model in set(models.values()):  # among the jobs of a model: 1, 2, 3... in the order of the pass
        mine = sorted((j for j in waiting if j.gpu_model == model), key=lambda j: (j.queue_position, j.pk))
        assert [j.model_queue_position for j in mine] == list(range(1, len(mine) + 1))

    gone = waiting[0]
    lifecycle.transition(gone, JobStatus.CANCELLED, "test: cancelled")
    assert Job.objects.get(pk=gone.pk).queue_position is None  # the table lists it, but it no longer waits


def test_a_steady_queue_leaves_the_table_alone_within_the_tolerance():
    users = build_world()["users"]
    jobs = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8)) for _ in range(2)]
    at = datetime(2026, 1, 2, 3, 4, tzinfo=UTC).timestamp()
    first = [(jobs[0].pk, 1, 1, at, at, at), (jobs[1].pk, 2, 2, None, None, None)]
    models = {job.pk: job.gpu_model for job in jobs}
    assert queue_states.write_table(queue_states.place_rows(first, models), datetime.now(tz=UTC))
    token = QueueTable.objects.get().token

    near = [(jobs[0].pk, 1, 1, at + 59, at - 59, at), first[1]]
    assert not queue_states.write_table(queue_states.place_rows(near, models), datetime.now(tz=UTC))
    assert QueueTable.objects.get().token == token
    assert Job.objects.get(pk=jobs[0].pk).estimated_start == datetime.fromtimestamp(at, tz=UTC)  # 59 s off: kept

    for changed in ([(jobs[0].pk, 1, 1, at + 61, at, at), first[1]],  # an estimate moved further
                    [(jobs[0].pk, 1, 1, at, at, None), first[1]],  # one vanished
                    [(jobs[0].pk, 2, 1, at, at, at), (jobs[1].pk, 1, 2, None, None, None)],  # places moved
                    [first[0]]):  # a job left the queue
        assert queue_states.write_table(queue_states.place_rows(changed, models), datetime.now(tz=UTC))
        rows = {row[0]: row[1:] for row in queue_states.place_rows(changed, models)}
        for job in Job.objects.filter(pk__in=rows):
            position, tenant, _model, estimate, *_ = rows[job.pk]
            assert (job.queue_position, job.tenant_queue_position) == (position, tenant)
            assert job.estimated_start == (None if estimate == NO_TIME else datetime.fromtimestamp(
                estimate / 1000, tz=UTC))
    assert Job.objects.get(pk=jobs[1].pk).queue_position is None  # not in the last table: no place yet


def test_model_places_are_counted_over_every_cluster_in_the_order_of_each_pass():
    models = {1: "H100", 2: "H100", 3: "A100", 4: "H100", 5: "H100"}
    places = [(2, 1, 1, None, None, None), (3, 2, 1, None, None, None), (5, 3, 1, None, None, None),  # cluster a
              (1, 1, 1, None, None, None), (4, 2, 1, None, None, None)]  # cluster b: its own positions
    rows = {row[0]: row[3] for row in queue_states.place_rows(places, models)}
    assert rows == {1: 1, 2: 2, 4: 3, 5: 4, 3: 1}  # equal positions: the lower id (submitted earlier) first


def test_a_request_reads_the_table_once_whatever_its_rows(client, django_capture_on_commit_callbacks):
    world = build_world()
    for _ in range(6):
        submission.submit_job(world["users"]["alice"], job_payload(gpus_per_node=8))
    with django_capture_on_commit_callbacks(execute=True):  # the pass commits: its process keeps the table
        run_pass()
    client.force_login(world["users"]["alice"])
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/jobs/").status_code == 200
    reads = [q["sql"] for q in queries.captured_queries if QueueTable._meta.db_table in q["sql"]]
    assert len(reads) == 1  # the token: this process decoded the table when its pass wrote it
    assert len(queue_places()) == Job.objects.waiting().count()
