"""The broker down during submission and during a pass: the app really publishes (not eager) to a Redis port
where nothing listens. Every submission is answered 201 and stored exactly once (clients retry with the same
Idempotency-Key), a pass whose dispatch message cannot leave keeps its admissions, and recovery (the next beat
tick, the reconciler) leaves nothing stuck."""

import socket
from contextlib import contextmanager

import pytest

from gpuportal.celery import app
from gpuportal.models import OperationalCounter
from scheduling.models import Job, JobStatus
from scheduling.tasks import run_scheduling_pass
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import check_invariants, found, record

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
SUBMISSIONS = 3  # each failed publish costs GPUPORTAL_BROKER_TIMEOUT (2 s): keep them few


def closed_port() -> int:
    with socket.socket() as sock:  # bound then closed: nothing listens there afterwards
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fresh_pools():
    """Forget the app's connection pools so that the next publish connects to the configured URL (not closed:
    kombu shares a pool per broker URL process-wide, and the eager tests' pool must stay usable)."""
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def broker_down():
    # Celery reads the Django settings' CELERY_-prefixed names first: override those, in this process only.
    saved = app.conf.CELERY_BROKER_URL, app.conf.CELERY_TASK_ALWAYS_EAGER
    app.conf.CELERY_BROKER_URL, app.conf.CELERY_TASK_ALWAYS_EAGER = f"redis://127.0.0.1:{closed_port()}/0", False
    _fresh_pools()
    try:
        yield
    finally:
        app.conf.CELERY_BROKER_URL, app.conf.CELERY_TASK_ALWAYS_EAGER = saved
        _fresh_pools()


def enqueue_failures(task: str) -> float:
    row = OperationalCounter.objects.filter(name="gpuportal_enqueue_failures_total", labels=f'task="{task}"').first()
    return row.value if row else 0


def test_broker_down_during_submission_and_during_a_pass(api, users):
    submitted: dict[str, list[int]] = {}
    clients = {name: api(name) for name in ("alice", "bob")}
    with broker_down():
        for i in range(SUBMISSIONS):
            name, tenant, project = (("alice", "vision", "detection"), ("bob", "nlp", "llm-pretrain"))[i % 2]
            key = f"faults-{i}"
            for _attempt in range(2):  # the client did not trust the first answer and retried with the same key
                response = clients[name].post("/api/jobs/", job_payload(
                    tenant=tenant, project=project, gpu_model="A100", gpus_per_node=2, command=long_run(999)),
                    format="json", HTTP_IDEMPOTENCY_KEY=key)
                assert response.status_code == 201, response.content
                submitted.setdefault(key, []).append(response.json()["id"])
        assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.QUEUED}  # no pass ran
        assert enqueue_failures("run_scheduling_pass") == SUBMISSIONS  # each first answer tried; replays do not
        # the beat's tick runs the pass in a worker, which cannot queue the dispatch of what it admitted
        outcome = run_scheduling_pass.apply().get()
        assert len(outcome["admitted"]) == SUBMISSIONS
        assert enqueue_failures("dispatch_jobs") == 1
        assert Job.objects.filter(status=JobStatus.ADMITTED).count() == SUBMISSIONS  # kept, not rolled back
    # the broker is back: the reconciler dispatches what waited longer than its bound
    result = check_invariants(submitted=submitted)
    assert result["counts"]["redispatched"] == SUBMISSIONS
    assert not Job.objects.filter(status=JobStatus.ADMITTED).exists()
    record(f"broker down (closed Redis port) during {SUBMISSIONS} API submissions, each retried with its "
           f"Idempotency-Key, and during a pass: {2 * SUBMISSIONS} answers 201, {len(submitted)} jobs stored, "
           f"{int(enqueue_failures('run_scheduling_pass') + enqueue_failures('dispatch_jobs'))} publishes "
           "gave up within the broker timeout; " + found(result))
