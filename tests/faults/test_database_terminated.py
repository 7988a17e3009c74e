"""The database connection of a scheduling pass terminated under it (``pg_terminate_backend`` from another
connection, as a failover or an administrator would): the pass fails as a whole, nothing half-applied stays,
and the next pass on a fresh connection does the work."""

import threading
from unittest import mock

import psycopg
import pytest
from django.db import DatabaseError, connection, connections
from django.db.utils import InterfaceError

from scheduling import engine
from scheduling.jobs import submission
from scheduling.models import ACTIVE_STATUSES, Job, JobAllocation, JobStatus
from scheduling.passes.scheduler import run_pass
from scheduling.tasks import run_scheduling_pass
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import check_invariants, found, record

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
KILLS = 3  # passes whose backend is terminated while they decide


def terminate(pid: int) -> bool:
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"],
                         autocommit=True) as other:
        return other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]


def test_a_pass_whose_connection_is_terminated_leaves_nothing_half_done(users):
    submitted = {}
    with mock.patch.object(run_scheduling_pass, "apply_async"):  # passes run only in the thread below
        for i in range(24):
            user, tenant, project = (("alice", "vision", "detection"), ("bob", "nlp", "llm-pretrain"))[i % 2]
            job = submission.submit_job(users[user], job_payload(tenant=tenant, project=project, gpu_model="A100",
                                                                 gpus_per_node=2, command=long_run(999)))
            submitted[f"job-{i}"] = [job.pk]
    deciding, terminated = threading.Event(), threading.Event()
    backend = {}
    schedule = engine.schedule

    def decide_then_wait(snapshot):
        result = schedule(snapshot)
        backend["pid"] = connection.connection.info.backend_pid  # this pass's own backend
        terminated.clear()
        deciding.set()
        terminated.wait(10)  # the test terminates it now: the pass goes on to apply on a dead connection
        return result

    outcomes = []

    def passes():
        try:
            for _ in range(KILLS):
                try:
                    outcomes.append(("ok", run_pass()))
                except (DatabaseError, InterfaceError) as exc:
                    outcomes.append(("raised", exc))
                    connection.close()  # what Django does at the end of a request or task: a fresh one next
        finally:
            connections.close_all()

    with mock.patch("scheduling.engine.schedule", side_effect=decide_then_wait):
        thread = threading.Thread(target=passes)
        thread.start()
        for _ in range(KILLS):
            assert deciding.wait(30), "the pass never reached its decision"
            deciding.clear()
            assert terminate(backend["pid"])
            terminated.set()
        thread.join(30)
    assert not thread.is_alive()
    assert [kind for kind, _ in outcomes] == ["raised"] * KILLS
    # nothing half-applied: no job left admitted or holding GPUs by a pass that died
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.QUEUED}
    assert not JobAllocation.objects.exists()
    admitted = run_scheduling_pass.apply().get()["admitted"]  # the next beat tick, on a fresh connection
    assert len(admitted) == Job.objects.filter(status__in=ACTIVE_STATUSES).count() > 0
    result = check_invariants(submitted=submitted)
    record(f"database connection terminated mid-pass (pg_terminate_backend) {KILLS} times with 24 jobs queued: "
           f"{KILLS} passes raised, 0 half-applied; the next pass admitted {len(admitted)}; "
           + found(result))
