"""The demo's TensorBoard: alice's live training run declares ``tensorboard:6006``, and once the simulated cluster
runs it, its job page offers Open and the stand-in's TensorBoard answers through the workload origin."""

from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

import pytest
from django.test import Client

from demo.world import DEMO_PASSWORD, seed_live_jobs, seed_structure
from scheduling.executors.simulated import serving as simulated_serving
from scheduling.models import Job, JobStatus
from scheduling.tasks import sync_job_status

pytestmark = pytest.mark.django_db(transaction=True)

WORKLOAD_HOST = "127.0.0.1:8001"


@pytest.fixture
def demo(settings, tmp_path):
    settings.SIMULATION_STANDIN_DIR = tmp_path / "standins"
    settings.SIMULATION_TIME_SCALE = 1e-4  # the seed's long runs (5000 simulated minutes) last 30 s
    settings.WORKLOADS = {**settings.WORKLOADS, "ORIGIN": f"http://{WORKLOAD_HOST}"}
    world = seed_structure()
    seed_live_jobs(world["users"])
    yield world
    simulated_serving.stop_all()


def test_the_demo_training_run_opens_its_tensorboard(demo):
    job = Job.objects.get(owner__username="alice", task_type__code="training")
    assert job.ports == [{"name": "tensorboard", "port": 6006}]
    for _round in range(200):
        sync_job_status()
        job.refresh_from_db()
        if job.status == JobStatus.RUNNING and simulated_serving.alive(job.executor_state.get("ports_serving", {})):
            break
        time.sleep(0.05)
    assert job.status == JobStatus.RUNNING

    alice = Client()
    assert alice.login(username="alice", password=DEMO_PASSWORD)
    assert 'id="open-port-tensorboard"' in alice.get(f"/jobs/{job.pk}/").content.decode()
    entry = urlsplit(alice.get(f"/jobs/{job.pk}/ports/tensorboard/")["Location"])
    assert entry.netloc == WORKLOAD_HOST
    signin = alice.get(f"{entry.path}?{entry.query}", HTTP_HOST=WORKLOAD_HOST)
    clean = re.search(r'id="continue" href="([^"]+)"', signin.content.decode())[1]
    board = alice.get(clean, HTTP_HOST=WORKLOAD_HOST)
    assert board.status_code == 200 and b"TensorBoard of job" in board.content
