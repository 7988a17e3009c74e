"""Moving the fleet's models out of scheduling moved no data: a database holding rows of the previous schema
migrates forward and every row is still there, reachable through the new models."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from fleet.models import GPU, Cluster, GpuReading, Node, NodeEvent
from gpuportal.models import OperationalCounter
from scheduling.models import JobAllocation

BEFORE = [("scheduling", "0004_kubernetes_dispatch"), ("metering", "0001_initial"), ("governance", "0001_initial"),
          ("fleet", None), ("gpuportal", None)]


def _migrate_back():
    """Unapply the move; return the models as they were then."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    return executor.loader.project_state([t for t in BEFORE if t[1]], at_end=True).apps


@pytest.mark.django_db(transaction=True)
def test_rows_of_the_previous_schema_survive_the_move():
    old = _migrate_back()
    now = timezone.now()
    cluster = old.get_model("scheduling", "Cluster").objects.create(name="old-sim")
    node = old.get_model("scheduling", "Node").objects.create(cluster=cluster, name="old-node", gpu_model="A100",
                                                              datacenter="dc", rack="r", network_domain="n")
    gpu = old.get_model("scheduling", "GPU").objects.create(node=node, index=3, uuid="GPU-old-3", model="A100",
                                                            memory_mb=81920)
    old.get_model("scheduling", "GpuReading").objects.create(gpu=gpu, at=now, utilization_pct=77)
    old.get_model("scheduling", "NodeEvent").objects.create(node=node, at=now, kind="admin", reason="cordoned")
    old.get_model("metering", "OperationalCounter").objects.create(name="gpuportal_old_total", value=5)
    user = old.get_model("auth", "User").objects.create(username="olduser")
    tenant = old.get_model("tenants", "Tenant").objects.create(name="oldt", display_name="Old")
    project = old.get_model("tenants", "Project").objects.create(tenant=tenant, name="p")
    task_type = old.get_model("scheduling", "TaskType").objects.create(code="oldtype", name="Old", priority=1)
    job = old.get_model("scheduling", "Job").objects.create(
        tenant=tenant, project=project, owner=user, name="old-job", task_type=task_type, gpu_model="A100",
        gpus_per_node=1, image="img", max_runtime_minutes=60, priority=1, submitted_at=now, cluster=cluster,
        status="running")
    old.get_model("scheduling", "JobAllocation").objects.create(job=job, gpu=gpu, allocated_at=now)

    forward = MigrationExecutor(connection)
    forward.migrate(forward.loader.graph.leaf_nodes())

    moved = GPU.objects.select_related("node__cluster").get(uuid="GPU-old-3")
    assert (moved.pk, moved.index, moved.node.name, moved.node.cluster.name) == (gpu.pk, 3, "old-node", "old-sim")
    assert GpuReading.objects.get(gpu=moved).utilization_pct == 77
    assert NodeEvent.objects.get(node__name="old-node").reason == "cordoned"
    assert Cluster.objects.get(name="old-sim").pk == cluster.pk and Node.objects.get(name="old-node").pk == node.pk
    allocation = JobAllocation.objects.select_related("job__cluster", "gpu").get(job__name="old-job")
    assert allocation.gpu == moved and allocation.job.cluster.name == "old-sim"
    assert OperationalCounter.objects.get(name="gpuportal_old_total").value == 5
