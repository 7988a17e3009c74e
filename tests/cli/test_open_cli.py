"""``gpuportal submit --ports`` and ``gpuportal open JOB PORT`` against the live test server: the ports are
submitted as a list, shown by ``show``, and ``open`` gives (and opens) the portal's address of a running job's
port, refusing a port the job did not declare or a job that does not run."""

from __future__ import annotations

import time
import webbrowser

import pytest

from scheduling.executors.simulated import serving as simulated_serving
from scheduling.models import Job, JobStatus
from scheduling.tasks import sync_job_status

pytestmark = pytest.mark.django_db(transaction=True)

SUBMIT = ("--project", "vision/detection", "--task-type", "research", "--gpu-model", "A100", "--gpus-per-node", "1",
          "--image", "registry.local/pytorch:2.4", "--max-runtime-minutes", "60")


@pytest.fixture
def standins(settings, tmp_path):
    settings.SIMULATION_STANDIN_DIR = tmp_path / "standins"
    settings.SIMULATION_TIME_SCALE = 1e-6
    yield
    simulated_serving.stop_all()


def test_submit_with_ports_and_open_one(cli, standins, monkeypatch):
    cli.login("alice")
    made = cli("submit", *SUBMIT, "--command", "sim:outcome=succeeded sim:minutes=1000000 python train.py", "--ports",
               "tensorboard:6006,ui:8080", "--json")
    assert made.code == 0, made.err
    assert [p["name"] for p in made.json["ports"]] == ["tensorboard", "ui"]
    job_id = made.json["id"]

    assert Job.objects.get(pk=job_id).status == JobStatus.DISPATCHING  # placed; it runs at the next sync
    early = cli("open", job_id, "tensorboard", "--print")
    assert early.code == 1 and f"Job {job_id} is dispatching: its ports open only while it runs." in early.err
    for _round in range(100):
        sync_job_status()
        if Job.objects.get(pk=job_id).status == JobStatus.RUNNING:
            break
        time.sleep(0.05)

    printed = cli("open", job_id, "tensorboard", "--print")
    assert printed.code == 0, printed.err
    assert printed.out.strip() == f"{cli.url}/jobs/{job_id}/ports/tensorboard/"
    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    assert cli("open", job_id, "ui").code == 0
    assert opened == [f"{cli.url}/jobs/{job_id}/ports/ui/"]
    as_json = cli("open", job_id, "ui", "--json")
    assert as_json.json == {"name": "ui", "port": 8080, "url": f"{cli.url}/jobs/{job_id}/ports/ui/"}
    assert len(opened) == 1  # --json prints, it opens nothing

    unknown = cli("open", job_id, "jupyter")
    assert unknown.code == 4 and "no port named jupyter; its ports: tensorboard, ui" in unknown.err
    assert "Ports" in cli("show", job_id).out and "tensorboard:6006, ui:8080" in cli("show", job_id).out

    bad = cli("submit", *SUBMIT, "--ports", "TensorBoard:6006")
    assert bad.code == 1 and "ports" in bad.err and "lowercase" in bad.err
