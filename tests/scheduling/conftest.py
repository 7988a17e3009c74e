from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from fleet.models import GPU, GpuReading
from scheduling.models import JobAllocation, JobStatus
from tests.factories import build_world, make_job
from tests.scheduling.kube import served_cluster


@pytest.fixture
def kube(users, tmp_path, settings):
    """A Kubernetes cluster served by the fake API server, with fast retries."""
    with served_cluster(tmp_path, settings, "kube-a", retries=3) as made:
        yield made


@pytest.fixture
def shaped_world():
    """alice's jobs in every shape the columns tell apart (bob's one she may not see), with GPUs held, released
    and read."""
    cache.clear()
    world = build_world()
    alice, vision = world["users"]["alice"], world["tenants"]["vision"]
    now = timezone.now()
    gpus = list(GPU.objects.select_related("node").order_by("node__name", "index"))
    jobs = {
        "alpha": make_job(alice, vision, JobStatus.SUCCEEDED, "alpha", submitted_at=now - timedelta(hours=4),
                          started_at=now - timedelta(hours=3), finished_at=now - timedelta(hours=1), exit_code=0),
        "bravo": make_job(alice, vision, JobStatus.FAILED, "bravo", "H100", gpus_per_node=2, exit_code=137,
                          submitted_at=now - timedelta(hours=2, minutes=30), started_at=now - timedelta(hours=2),
                          finished_at=now - timedelta(minutes=30), failure_category="out_of_memory"),
        "charlie": make_job(alice, vision, JobStatus.RUNNING, "charlie", "L40S", submitted_at=now - timedelta(hours=1),
                            started_at=now - timedelta(minutes=20)),
        "delta": make_job(alice, vision, JobStatus.QUEUED, "delta", submitted_at=now - timedelta(minutes=10)),
        "formula": make_job(alice, vision, JobStatus.QUEUED, "=HYPERLINK(\"x\")",
                            submitted_at=now - timedelta(minutes=5)),
        "hidden": make_job(world["users"]["bob"], world["tenants"]["nlp"], JobStatus.RUNNING, "bobs",
                           started_at=now - timedelta(hours=9)),
    }
    held = [(jobs["alpha"], gpus[0], now - timedelta(hours=3), now - timedelta(hours=1)),
            (jobs["bravo"], gpus[20], now - timedelta(hours=2), now - timedelta(minutes=30)),
            (jobs["charlie"], gpus[40], now - timedelta(minutes=20), None)]
    for job, gpu, start, end in held:
        JobAllocation.objects.create(job=job, gpu=gpu, allocated_at=start, released_at=end)
    GpuReading.objects.bulk_create([
        GpuReading(gpu=gpus[0], at=now - timedelta(hours=2), utilization_pct=80),
        GpuReading(gpu=gpus[0], at=now - timedelta(minutes=90), utilization_pct=40),
        GpuReading(gpu=gpus[0], at=now - timedelta(minutes=10), utilization_pct=100),  # after alpha released it
        GpuReading(gpu=gpus[20], at=now - timedelta(hours=1), utilization_pct=10)])
    return {**world, "jobs": jobs, "gpus": gpus}
