"""Jobs with known placements and readings, written the way the scheduler and the agents would."""

from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from fleet.models import GPU, GpuReading
from scheduling import lifecycle
from scheduling.models import JobAllocation, JobStatus, TaskType
from tenants.models import Project

UTC = ZoneInfo("UTC")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def gpus_of(node_name: str, count: int, first: int = 0) -> list[GPU]:
    return list(GPU.objects.filter(node__name=node_name, index__gte=first).order_by("index")[:count])


def ran_job(owner, project: str, gpus: list[GPU], start: datetime, end: datetime, *, task="research",
            gpu_milli=1000, nodes=1, status=JobStatus.SUCCEEDED, category="", wait=timedelta(minutes=10)):
    """A job submitted ``wait`` before ``start`` that held ``gpus`` from ``start`` until ``end``."""
    tenant_name, project_name = project.split("/")
    project_row = Project.objects.get(tenant__name=tenant_name, name=project_name)
    task_type = TaskType.objects.get(code=task)
    job = lifecycle.create_job(
        status=JobStatus.QUEUED, reason="test", tenant=project_row.tenant, project=project_row, owner=owner,
        task_type=task_type, gpu_model=gpus[0].model, name=f"{task}-{start:%H%M}", gpus_per_node=len(gpus) // nodes,
        node_count=nodes, image="img", max_runtime_minutes=600, priority=task_type.priority, gpu_milli=gpu_milli,
        submitted_at=start - wait)
    hold(job, gpus, start, gpu_milli)
    lifecycle.transition(job, JobStatus.DISPATCHING, "sent", at=start)
    lifecycle.transition(job, JobStatus.RUNNING, "running", at=start)
    lifecycle.transition(job, status, "ended", at=end, failure_category=category)
    return job


def hold(job, gpus, start, gpu_milli=1000):
    JobAllocation.objects.bulk_create([JobAllocation(job=job, gpu=g, allocated_at=start,
                                                     fraction=Decimal(gpu_milli) / 1000) for g in gpus])
    lifecycle.transition(job, JobStatus.ADMITTED, "admitted", at=start, cluster=gpus[0].node.cluster)


def readings(gpus, start: datetime, end: datetime, utilization: int, every=timedelta(minutes=15)):
    rows, moment = [], start
    while moment < end:
        rows += [GpuReading(gpu=g, at=moment, utilization_pct=utilization, memory_used_mb=1000) for g in gpus]
        moment += every
    GpuReading.objects.bulk_create(rows)
    return len(rows)
