"""Job states: one function changes them, each change is an event, simulated jobs end by themselves."""

import ast
import pathlib
import time
from datetime import datetime, timedelta

import pytest

from scheduling import lifecycle
from scheduling.jobs import submission
from scheduling.models import FailureCategory, Job, JobStatus
from scheduling.tasks import sync_job_status
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)
WRITERS = {"update", "create", "update_or_create", "get_or_create", "bulk_create"}


def _status_writes(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "status":
                    yield node.lineno
                if isinstance(target, ast.Subscript) and getattr(target.slice, "value", None) == "status":
                    yield node.lineno
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in WRITERS and any(k.arg == "status" for k in node.keywords):
                yield node.lineno
            if name == "setattr" and len(node.args) > 1 and getattr(node.args[1], "value", None) == "status":
                yield node.lineno
            if name == "bulk_update" and "status" in ast.unparse(node):
                yield node.lineno


#: Modules whose ``status`` is not a job's: the scan cannot tell the models apart, so each is named with why.
OTHER_STATUSES = {
    "metering/improvements/services.py": "an improvement action's state (ImprovementStatus), written by its service",
    "metering/improvements/views.py": "the actions list's status filter, checked against ImprovementStatus",
    "metering/whatif/services.py": "a what-if run's state (WhatIfRun.Status), written by its service",
}


def test_nothing_but_lifecycle_writes_job_status():
    offenders = []
    for app in ("scheduling", "tenants", "metering", "gpuportal"):
        for path in pathlib.Path(app).rglob("*.py"):
            if "migrations" in path.parts or path.name == "lifecycle.py" or path.as_posix() in OTHER_STATUSES:
                continue
            offenders += [f"{path}:{line}" for line in _status_writes(path)]
    assert offenders == []
    # and the scan does find the writes that lifecycle.py itself makes
    assert list(_status_writes(pathlib.Path("scheduling/lifecycle.py")))


def test_every_transition_is_an_event_with_a_reason(users):
    job = submission.submit_job(users["alice"], job_payload())
    events = list(job.events.filter(kind="status"))
    assert [(e.from_status, e.to_status) for e in events] == [
        ("", "queued"), ("queued", "admitted"), ("admitted", "dispatching")]
    assert all(e.reason for e in events)
    assert events[0].actor == users["alice"]
    assert "Admitted: 4 x A100 on " in events[1].reason
    assert events[1].data["placements"][0]["gpus"] == [0, 1, 2, 3]


def test_forbidden_and_stale_transitions_are_refused(users):
    job = submission.submit_job(users["alice"], job_payload())
    with pytest.raises(lifecycle.InvalidTransition):
        lifecycle.transition(job, JobStatus.PENDING, "back to approval?")
    stale = Job.objects.get(pk=job.pk)
    lifecycle.transition(job, JobStatus.CANCELLED, "first")
    with pytest.raises(lifecycle.InvalidTransition):  # a racing writer still holding the old status
        lifecycle.transition(stale, JobStatus.CANCELLED, "second")
    assert job.events.filter(to_status="cancelled").count() == 1


def _run_until_done(job, settings, rounds=50):
    settings.SIMULATION_TIME_SCALE = 1e-6  # one real millisecond is a thousand simulated seconds
    for _ in range(rounds):
        time.sleep(0.01)
        sync_job_status()
        job.refresh_from_db()
        if job.is_terminal:
            return job
    raise AssertionError(f"job {job.pk} still {job.status}")


def _run_past_max_runtime(job, settings):
    """Start ``job``, let its max runtime pass and run it to its end. The max runtime is a limit in real time,
    which the simulation does not speed up: the run is moved that far back instead of waiting for it."""
    settings.SIMULATION_TIME_SCALE = 1e-6
    for _ in range(300):  # the image pull takes simulated seconds: a few real milliseconds
        time.sleep(0.01)
        sync_job_status()
        job.refresh_from_db()
        if job.status == JobStatus.RUNNING:
            break
    assert job.status == JobStatus.RUNNING and job.started_at, job.status
    back = timedelta(minutes=job.max_runtime_minutes, seconds=1)
    dispatched = datetime.fromisoformat(job.executor_state["dispatched_at"]) - back
    Job.objects.filter(pk=job.pk).update(started_at=job.started_at - back, executor_state={
        **job.executor_state, "dispatched_at": dispatched.isoformat()})
    return _run_until_done(job, settings)


def test_simulated_job_runs_and_succeeds_by_itself(users, settings):
    job = submission.submit_job(users["alice"], job_payload(command=long_run(30)))
    job = _run_until_done(job, settings)
    assert job.status == JobStatus.SUCCEEDED and job.exit_code == 0
    assert [e.to_status for e in job.events.filter(kind="status")][-2:] == ["running", "succeeded"]
    assert job.started_at and job.finished_at and job.finished_at >= job.started_at
    assert not job.allocations.filter(released_at__isnull=True).exists()


@pytest.mark.parametrize(("outcome", "category", "evidence"), [
    ("out_of_memory", FailureCategory.OUT_OF_MEMORY, "CUDA out of memory"),
    ("node_fault", FailureCategory.NODE_FAULT, "XID 79"),
    ("image", FailureCategory.IMAGE, "ErrImagePull"),
    ("exit_code", FailureCategory.EXIT_CODE, "The program"),  # the cause its log names (signatures)
])
def test_simulated_failures_carry_category_and_evidence(users, settings, outcome, category, evidence):
    job = submission.submit_job(users["alice"], job_payload(command=f"sim:outcome={outcome} sim:minutes=20"))
    job = _run_until_done(job, settings)
    assert job.status == JobStatus.FAILED
    assert job.failure_category == category
    assert evidence in job.failure_message


def test_job_running_past_its_max_runtime_times_out(users, settings):
    job = submission.submit_job(users["alice"], job_payload(command=long_run(1e9), max_runtime_minutes=60))
    job = _run_past_max_runtime(job, settings)
    assert job.failure_category == FailureCategory.TIMEOUT
    assert "max runtime of 60 minutes" in job.failure_message


def test_finished_job_frees_gpus_for_the_queue(users, settings):
    first = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command="sim:outcome=succeeded"))
    submission.submit_job(users["carol"], job_payload(project="segmentation", gpus_per_node=8,
                                                    command=long_run(99999)))
    waiting = submission.submit_job(users["alice"], job_payload(gpus_per_node=8))
    waiting.refresh_from_db()
    assert waiting.status == JobStatus.QUEUED and waiting.wait_reason == "quota_exhausted"
    _run_until_done(first, settings)
    waiting.refresh_from_db()
    assert waiting.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING, JobStatus.RUNNING)
    assert waiting.wait_reason == "" and waiting.queue_position is None
