"""A scheduling pass that raises is counted, so that the alerting rule GpuPortalSchedulingPassesFailing sees it,
also when what failed is its database connection; and a pass that committed is followed up (what it admitted is
dispatched) whatever fails after its commit."""

from unittest import mock

import psycopg
import pytest
from django.db import DatabaseError, connection
from django.db.utils import InterfaceError

from gpuportal.models import OperationalCounter
from gpuportal.observability import telemetry
from metering.metrics import samples
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from scheduling.signals import job_status_changed
from scheduling.tasks import run_scheduling_pass
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failing_pass_is_counted_and_exported(world):
    exported = {name: value for name, _labels, value in samples()}
    assert exported["gpuportal_scheduling_pass_failures_total"] == 0  # a series before the first failure
    with mock.patch("scheduling.tasks.run_pass", side_effect=RuntimeError("boom")), \
            pytest.raises(RuntimeError, match="boom"):
        run_scheduling_pass()
    assert OperationalCounter.objects.get(name="gpuportal_scheduling_pass_failures_total").value == 1
    exported = {name: value for name, _labels, value in samples()}
    assert exported["gpuportal_scheduling_pass_failures_total"] == 1
    run_scheduling_pass()  # a pass that works is not counted as failed
    assert OperationalCounter.objects.get(name="gpuportal_scheduling_pass_failures_total").value == 1


# --- the pass's own connection terminated (pg_terminate_backend from a second connection) ---------------------

def terminate(pid: int) -> bool:
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"],
                         autocommit=True) as other:
        return other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]


@pytest.fixture
def terminated(users):
    """The demo world; afterwards the connection is dropped, so that a pass that left its terminated connection
    behind (a test that fails) does not take the flush of the database down with it."""
    yield users
    connection.close()


def _queue(users, count: int) -> list[int]:
    with mock.patch.object(run_scheduling_pass, "apply_async"):  # the test runs the pass itself
        return [submission.submit_job(users["alice"], job_payload(gpu_model="A100", gpus_per_node=2,
                                                                  command=long_run(999))).pk
                for _ in range(count)]


def test_a_pass_whose_connection_dies_after_its_commit_is_followed_up_and_counted(terminated):
    """The pass has committed its admissions; its backend is terminated as it writes its duration. The pass still
    returns them, they are dispatched (the follow-up ran on a fresh connection) and the lost sample is counted."""
    queued = _queue(terminated, 3)
    observe = telemetry.observe

    def terminated_then_observe(name, seconds, **labels):
        assert terminate(connection.connection.info.backend_pid)
        observe(name, seconds, **labels)

    with mock.patch.object(telemetry, "observe", side_effect=terminated_then_observe):
        result = run_scheduling_pass.apply().get()
    assert sorted(result["admitted"]) == sorted(queued)
    statuses = set(Job.objects.filter(pk__in=queued).values_list("status", flat=True))
    assert statuses and JobStatus.ADMITTED not in statuses and statuses <= {JobStatus.DISPATCHING,
                                                                            JobStatus.RUNNING}, statuses
    exported = {(name, labels if isinstance(labels, str) else telemetry.label_text(labels)): value
                for name, labels, value in samples()}
    metric = telemetry.label_text({"metric": "gpuportal_scheduling_pass_duration_seconds"})
    assert exported[("gpuportal_metrics_write_failures_total", metric)] == 1
    assert exported[("gpuportal_scheduling_pass_failures_total", "")] == 0  # it committed: not a failed pass


def test_a_pass_on_a_dead_connection_is_counted(terminated):
    """The worker's connection was terminated between two tasks (a failover): the next pass raises on it, and the
    failure is still counted — on a fresh connection, the dead one replaced."""
    _queue(terminated, 2)
    assert terminate(connection.connection.info.backend_pid)
    with pytest.raises((DatabaseError, InterfaceError)):
        run_scheduling_pass.apply().get()
    assert OperationalCounter.objects.get(name="gpuportal_scheduling_pass_failures_total").value == 1
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.QUEUED}  # nothing applied


def test_a_pass_whose_commit_listener_fails_is_still_followed_up(terminated):
    """A listener of the admissions' commit raises (a notification that cannot be stored, say): the pass has
    committed, so it is not a failed pass and what it admitted is dispatched."""
    queued = _queue(terminated, 2)

    def failing_listener(sender, to_status, **kwargs):
        if to_status == JobStatus.ADMITTED:
            raise RuntimeError("listener down")

    job_status_changed.connect(failing_listener, dispatch_uid="test-failing-listener")
    try:
        result = run_scheduling_pass.apply().get()
    finally:
        job_status_changed.disconnect(dispatch_uid="test-failing-listener")
    assert sorted(result["admitted"]) == sorted(queued)
    assert JobStatus.ADMITTED not in set(Job.objects.filter(pk__in=queued).values_list("status", flat=True))
    assert not OperationalCounter.objects.filter(name="gpuportal_scheduling_pass_failures_total").exists()
