"""A real beat brings the work back after the broker was down: jobs submitted while no message could leave are
scheduled and dispatched by the next beat ticks, run by a real worker, without anyone calling a task."""

import subprocess
import sys
import time

import pytest
from django.conf import settings

from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run
from tests.faults.faultlib import Worker, celery_env, check_invariants, found, record
from tests.faults.test_broker_down import broker_down

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def start_beat(tmp_path) -> subprocess.Popen:
    """``celery -A gpuportal beat`` on this test's database and broker, with the pass every second."""
    env = celery_env({"GPUPORTAL_PASS_INTERVAL": "1", "GPUPORTAL_SYNC_INTERVAL": "1"})
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "gpuportal", "beat", "-l", "WARNING",
                             "-s", str(tmp_path / "beat-schedule")], cwd=settings.BASE_DIR, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_the_next_beat_ticks_schedule_what_the_broker_could_not_take(api, users, tmp_path):
    submitted: dict[str, list[int]] = {}
    with broker_down():
        for i, (name, tenant, project) in enumerate((("alice", "vision", "detection"),
                                                     ("bob", "nlp", "llm-pretrain"))):
            response = api(name).post("/api/jobs/", job_payload(tenant=tenant, project=project, gpus_per_node=2,
                                                                command=long_run(999)), format="json")
            assert response.status_code == 201, response.content
            submitted[f"beat-{i}"] = [response.json()["id"]]
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.QUEUED}
    worker = Worker("beat-worker").wait_ready()
    beat = start_beat(tmp_path)
    try:
        deadline = time.monotonic() + 45
        while Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.ADMITTED)).exists():
            assert time.monotonic() < deadline, "the beat's ticks did not schedule the jobs: " + "".join(
                worker.lines[-30:])
            assert beat.poll() is None, "celery beat stopped"
            time.sleep(0.5)
    finally:
        beat.terminate()
        beat.wait(15)
        worker.stop()
    passes = worker.received("scheduling.tasks.run_scheduling_pass")
    assert passes >= 1 and worker.received("scheduling.tasks.dispatch_jobs") >= 1
    result = check_invariants(submitted=submitted)
    record(f"broker down during 2 submissions, then a real beat and worker: {passes} beat-driven passes and "
           f"{worker.received('scheduling.tasks.dispatch_jobs')} dispatch batches took them from queued to "
           f"{', '.join(sorted({j.status for j in Job.objects.all()}))}; " + found(result))
