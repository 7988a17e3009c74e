"""Replicas on the simulated cluster obey the level-triggered rule Kubernetes' controllers obey: a sync working from
a copy of a job read before its service was stopped starts nothing, and syncs racing on one replica start one
server between them. The stand-ins are real processes: each test checks that none of its own outlives it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from django.db import OperationalError, connection
from django.db.models import QuerySet
from django.utils import timezone

from scheduling.executors import SimulatedExecutor
from scheduling.executors.simulated import serving as simulated_serving
from scheduling.jobs.actions import cancel_job
from scheduling.models import Job, JobGroup, JobStatus
from scheduling.tasks import record_update, sync_job_status
from scheduling.workloads.services import stop_service
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def _standins(directory: Path) -> list[int]:
    """Live stand-in processes of this test: their command line names its directory (an exited one that is not
    reaped yet has an empty command line, so it does not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # it exited while we looked
            continue
        if b"standin.py" in cmdline and str(directory).encode() in cmdline:
            found.append(int(entry.name))
    return found


def _launches(directory: Path) -> int:
    """How many stand-ins were launched, from their logs: each says where it serves once it listens, or why it
    died before (two launched for one replica share their files, and the later may crash on the earlier's)."""
    logs = "".join(log.read_text(errors="replace") for log in directory.glob("*.log"))
    return logs.count("] Serving ") + logs.count("Traceback (most recent call last)")


@pytest.fixture
def standins(settings, tmp_path):
    """Stand-ins live under this test's directory and start at once; afterwards they are stopped, and one that
    outlives the stop (a process nobody recorded) is killed and fails the test."""
    directory = tmp_path / "standins"
    settings.SIMULATION_STANDIN_DIR = directory
    settings.SIMULATION_TIME_SCALE = 1e-6
    yield directory
    simulated_serving.stop_all()
    deadline = time.monotonic() + 10  # a stand-in exits within a fraction of a second once its lease is gone
    while (left := _standins(directory)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "stand-in processes outlived the test"


def _left(directory: Path, expected: list[int]) -> list[int]:
    """The live stand-ins once those that were sent their stop have had a moment to exit."""
    deadline = time.monotonic() + 5
    while (found := _standins(directory)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _service(api) -> tuple[JobGroup, Job]:
    payload = job_payload(kind="service", task_type="inference", gpus_per_node=1, replicas=1, port=8000,
                          image="registry.local/vllm:0.5", command="vllm serve")
    del payload["max_runtime_minutes"]  # a service runs until stopped
    created = api("alice").post("/api/jobs/", payload, format="json")
    assert created.status_code == 201, created.content
    group = JobGroup.objects.get(pk=created.json()["group"])
    return group, group.members.get()


def _as_the_sync_reads(job_id: int) -> Job:
    """The job as ``sync_job_status`` reads it, before it asks the executor."""
    return (Job.objects.select_related("cluster", "task_type").prefetch_related("allocations__gpu__node")
            .get(pk=job_id))


def _sync_step(job: Job) -> None:
    """What ``sync_job_status`` does with one job it read: ask the executor, store what it observed."""
    now = timezone.now()
    update = SimulatedExecutor(job.cluster).observe(job, now)
    if update is not None:
        record_update(job, update, now)


def _running_service(api) -> tuple[JobGroup, Job]:
    """A service of one replica whose server runs, after as many syncs as that takes."""
    group, replica = _service(api)
    for _round in range(80):
        sync_job_status()
        replica.refresh_from_db()
        if replica.status == JobStatus.RUNNING:
            break
        time.sleep(0.05)
    assert replica.status == JobStatus.RUNNING
    return group, replica


def _running_with_dead_server(api) -> tuple[JobGroup, Job]:
    """A service of one replica, running, whose server process was killed (a crash the sync has not seen yet)."""
    group, replica = _running_service(api)
    serving = replica.executor_state["serving"]
    os.kill(serving["pid"], signal.SIGKILL)
    for _round in range(200):
        if not simulated_serving.alive(serving):
            break
        time.sleep(0.05)
    assert not simulated_serving.alive(serving)
    return group, replica


def _concurrently(job_id: int, step, count: int = 2) -> None:
    """``count`` syncs of one job in threads, each on its own database connection, each with its own copy of the
    job read before any of them acts (as two workers' syncs read it at the same moment)."""
    barrier, errors = threading.Barrier(count), []

    def run():
        try:
            job = _as_the_sync_reads(job_id)
            barrier.wait(timeout=30)
            step(job)
        except BaseException as exc:  # noqa: BLE001 - any failure of a thread fails the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []


def test_a_stopped_service_gets_no_new_server_from_a_copy_read_before_the_stop(api, users, standins):
    group, replica = _running_with_dead_server(api)
    dead = replica.executor_state["serving"]
    stale = _as_the_sync_reads(replica.pk)  # the sync read the replica while the service was up
    stop_service(users["alice"], group)

    assert SimulatedExecutor(stale.cluster).observe(stale, timezone.now()) is None
    assert _standins(standins) == [] and _launches(standins) == 1  # no new server for a stopped service
    replica.refresh_from_db()
    assert replica.status == JobStatus.CANCELLED
    assert replica.executor_state["serving"]["pid"] == dead["pid"]  # the record still names the last server


def test_a_replica_of_a_stopped_service_is_not_started_from_a_copy_read_while_dispatching(api, users, standins):
    group, replica = _service(api)
    assert replica.status == JobStatus.DISPATCHING  # submitting ran the pass and the dispatch (eager Celery)
    stale = _as_the_sync_reads(replica.pk)
    stop_service(users["alice"], group)

    _sync_step(stale)
    assert _standins(standins) == [] and _launches(standins) == 0  # one started here would be an orphan
    replica.refresh_from_db()
    assert replica.status == JobStatus.CANCELLED and "serving" not in replica.executor_state


def test_two_syncs_restart_a_dead_replica_once(api, users, standins):
    _group, replica = _running_with_dead_server(api)
    dead = replica.executor_state["serving"]

    _concurrently(replica.pk, _sync_step)
    running = _standins(standins)
    assert len(running) == 1 and _launches(standins) == 2  # the first server, and one restart
    replica.refresh_from_db()
    serving = replica.executor_state["serving"]
    assert replica.status == JobStatus.RUNNING and serving["pid"] == running[0] != dead["pid"]
    assert serving["restarts"] == 1 and simulated_serving.alive(serving)


def test_two_syncs_start_a_dispatched_replica_once(api, users, standins):
    _group, replica = _service(api)
    assert replica.status == JobStatus.DISPATCHING

    _concurrently(replica.pk, _sync_step)
    running = _standins(standins)
    assert len(running) == 1 and _launches(standins) == 1
    replica.refresh_from_db()
    serving = replica.executor_state["serving"]
    assert replica.status == JobStatus.RUNNING and serving["pid"] == running[0]
    assert serving["restarts"] == 0 and simulated_serving.alive(serving)


def test_a_server_whose_record_is_not_committed_is_stopped(api, users, standins, monkeypatch):
    """The database ends the sync's session between the start and the commit (the chaos soak terminates every
    session): the record rolls back, and the server it would have named is stopped with it, on the first start and
    on a restart alike."""
    _group, replica = _service(api)
    assert replica.status == JobStatus.DISPATCHING
    update = QuerySet.update

    def lost(queryset, **fields):  # the record of a server: the session ends under it
        if "executor_state" in fields and "serving" in fields["executor_state"]:
            assert simulated_serving.alive(fields["executor_state"]["serving"])  # started, about to be recorded
            raise OperationalError("terminating connection due to administrator command")
        return update(queryset, **fields)

    monkeypatch.setattr(QuerySet, "update", lost)
    with pytest.raises(OperationalError):
        _sync_step(_as_the_sync_reads(replica.pk))
    assert _left(standins, []) == [] and _launches(standins) == 1
    replica.refresh_from_db()
    assert replica.status == JobStatus.DISPATCHING and "serving" not in replica.executor_state
    monkeypatch.setattr(QuerySet, "update", update)  # the next sync starts and records one

    _group, second = _running_with_dead_server(api)  # its syncs started and recorded the first replica's too
    replica.refresh_from_db()
    monkeypatch.setattr(QuerySet, "update", lost)
    with pytest.raises(OperationalError):
        _sync_step(_as_the_sync_reads(second.pk))
    kept = [replica.executor_state["serving"]["pid"]]
    assert _left(standins, kept) == kept  # the restart's server went with its record


def test_a_server_started_by_a_sync_whose_transition_loses_to_a_cancel_is_stopped(api, users, standins):
    _group, replica = _service(api)
    assert replica.status == JobStatus.DISPATCHING
    cancels = Job.objects.select_related("cluster").get(pk=replica.pk)  # read before the sync starts the server
    syncs = _as_the_sync_reads(replica.pk)
    now = timezone.now()

    update = SimulatedExecutor(syncs.cluster).observe(syncs, now)
    assert update is not None and update.status == JobStatus.RUNNING and len(_standins(standins)) == 1
    cancel_job(users["alice"], cancels)  # lands between the start and the sync's transition
    assert not record_update(syncs, update, now)  # the transition loses to the cancel...
    assert _standins(standins) == []  # ...and its server does not outlive the job
    replica.refresh_from_db()
    assert replica.status == JobStatus.CANCELLED


def test_a_stop_that_died_halfway_is_finished_by_the_status_sync(api, users, standins, monkeypatch):
    """``stop_service`` marks the service stopped, then cancels its replicas one by one: a worker or a database
    connection that dies in between left the replica running for ever (found by the chaos soak)."""
    group, replica = _running_service(api)
    serving = replica.executor_state["serving"]

    def dies(*args, **kwargs):
        raise ConnectionError("the worker died here")

    monkeypatch.setattr("scheduling.jobs.actions.cancel_job", dies)
    with pytest.raises(ConnectionError):
        stop_service(users["alice"], group)
    monkeypatch.undo()
    replica.refresh_from_db()
    assert replica.status == JobStatus.RUNNING and JobGroup.objects.get(pk=group.pk).stopped_at is not None
    sync_job_status()
    replica.refresh_from_db()
    assert replica.status == JobStatus.CANCELLED
    event = replica.events.get(to_status=JobStatus.CANCELLED)
    assert event.reason.startswith(f"Stopped with its service {group.name}") and event.actor is None
    assert not simulated_serving.alive(serving)
