"""``gpuportal efficiency JOB`` gives the figures of the API (and of the job page) as text or JSON, and
``gpuportal submit --mail-type`` sets the job's mail types."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import GpuReading
from scheduling.jobs.efficiency import efficiency_of
from scheduling.models import Job
from tests.metering.helpers import gpus_of, ran_job

pytestmark = pytest.mark.django_db(transaction=True)

SUBMIT = ("--project", "vision/detection", "--task-type", "research", "--gpu-model", "A100",
          "--image", "registry.local/pytorch:2.4")


def test_efficiency_shows_the_summary_the_hint_and_each_gpu(cli, users):
    gpus = gpus_of("dc1-r3-a100-01", 4)
    end = timezone.now()
    start = end - timedelta(hours=1)
    job = ran_job(users["alice"], "vision/detection", gpus, start, end)
    GpuReading.objects.bulk_create(
        GpuReading(gpu=gpu, at=start + timedelta(minutes=5 * step), utilization_pct=70 if i == 0 else 0,
                   memory_used_mb=20_480 if i == 0 else 100) for step in range(12) for i, gpu in enumerate(gpus))
    cli.login("alice")
    text = cli("efficiency", job.pk)
    assert text.code == 0, text.err
    expected = efficiency_of(job)
    assert f"Job {job.pk} held {expected.gpu_hours_held:.2f} GPU-hours" in text.out
    assert f"Mean GPU utilisation: {expected.mean_gpu_utilization:.0f} %" in text.out
    assert "Peak GPU memory: 20.0 of 80.0 GB" in text.out
    assert "This job asked for 4 GPUs and used 1 at most: ask for 1." in text.out
    rows = [line.split() for line in text.out.splitlines() if line.startswith("dc1-r3-a100-01/gpu")]
    assert [row[2] for row in rows] == ["70", "0", "0", "0"]
    answer = cli("efficiency", job.pk, "--json").json
    assert answer["gpu_hours_held"] == expected.gpu_hours_held and len(answer["series"]) == 4
    cli.login("bob")
    assert cli("efficiency", job.pk, user="bob").code == 4  # another tenant's job: not found


def test_submit_takes_the_mail_types(cli):
    cli.login("alice")
    submitted = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--mail-type", "end,fail", "--json")
    assert submitted.code == 0, submitted.err
    assert Job.objects.get(pk=submitted.json["id"]).mail_type == "END,FAIL"
    refused = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--mail-type", "TIME_LIMIT")
    assert refused.code != 0 and "mail_type" in refused.err and "TIME_LIMIT" in refused.err
