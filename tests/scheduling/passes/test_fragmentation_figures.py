"""The fragmentation figure: FGD's measure over the live allocations, per cluster and model, in
/metrics and on the operations dashboard — checked by hand on a small world."""

from __future__ import annotations

from django.utils import timezone

from fleet.models import GPU
from scheduling import lifecycle
from scheduling.models import Job, JobAllocation, JobStatus, TaskType
from scheduling.passes.fragmentation import fragmentation_now
from tenants.models import Project
from tests.metering.usage.test_metrics_and_prices import parse


def _hold(job: Job, node: str, indices, fraction=1.0) -> None:
    """Give ``job`` GPUs by hand (as a pass would), so the free capacity is exactly what the test says."""
    lifecycle.transition(job, JobStatus.ADMITTED, "test")
    JobAllocation.objects.bulk_create(JobAllocation(job=job, gpu=GPU.objects.get(node__name=node, index=i),
                                                    fraction=fraction, allocated_at=timezone.now())
                                      for i in indices)


def _job(users, name: str) -> Job:
    """A queued job of 4 A100 GPUs, stored without a pass (the test places it by hand)."""
    project = Project.objects.get(tenant__name="vision", name="detection")
    task = TaskType.objects.get(code="research")
    return lifecycle.create_job(status=JobStatus.QUEUED, reason="test", tenant=project.tenant, project=project,
                                owner=users["alice"], task_type=task, gpu_model="A100", name=name,
                                gpus_per_node=4, image="img", max_runtime_minutes=60, priority=task.priority,
                                submitted_at=timezone.now())


def test_scattered_free_gpus_are_fragmented_for_a_workload_of_4_gpu_jobs(users, client):
    # the workload: the jobs of the last week ask for 4 A100 GPUs each; the lab has 4 A100 nodes of 8
    holders = [_job(users, f"w{i}") for i in range(4)]
    # two nodes keep 3 free GPUs each (5 held), one keeps 8, one keeps 0 (8 held)
    nodes = ["dc1-r3-a100-01", "dc1-r3-a100-02", "dc2-r1-a100-03", "dc2-r1-a100-04"]
    _hold(holders[0], nodes[0], range(5))
    _hold(holders[1], nodes[1], range(5))
    _hold(holders[2], nodes[3], range(8))
    figures = {(f.cluster, f.gpu_model): f for f in fragmentation_now()}
    a100 = figures[("sim", "A100")]
    assert a100.free_gpus == 3 + 3 + 8 + 0
    assert a100.fragmented_gpus == 6  # 3 + 3 free on nodes where no 4-GPU job fits; the idle node's 8 are usable
    values = parse(client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    assert values['gpuportal_fragmented_gpus{cluster="sim",gpu_model="A100"}'] == 6
    assert values['gpuportal_free_gpus{cluster="sim",gpu_model="A100"}'] == 14
    client.force_login(users["dave"])
    page = client.get("/reports/operations/").content.decode()
    assert "Fragmentation now" in page and "42.9" in page  # 6 of 14 free A100 GPUs
