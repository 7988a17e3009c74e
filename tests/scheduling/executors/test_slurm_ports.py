"""A named port of a Slurm job is the node's, not the job's: the proxy may reach it only while the job is alone on
its node, and never on the port the node's agent is polled at."""

import pytest

from fleet.models import GPU, Node
from scheduling.executors import executor_for
from scheduling.models import JobAllocation, JobStatus
from tests.factories import build_world, make_job

pytestmark = pytest.mark.django_db


def test_a_port_opens_only_while_its_job_is_alone_on_its_node():
    world = build_world()
    cluster = world["cluster"]
    cluster.executor = "slurm"
    cluster.save()
    node = Node.objects.filter(cluster=cluster).order_by("name").first()
    Node.objects.filter(pk=node.pk).update(agent_url="http://10.0.0.5:9400")
    alice, bob = world["users"]["alice"], world["users"]["bob"]
    mine = make_job(alice, world["tenants"]["vision"], JobStatus.RUNNING, cluster=cluster,
                    executor_state={"nodes": [node.name]}, ports=[{"name": "ui", "port": 8080}])
    gpus = list(GPU.objects.filter(node=node).order_by("index"))
    JobAllocation.objects.create(job=mine, gpu=gpus[0], allocated_at=mine.submitted_at)
    executor = executor_for(cluster)

    assert executor.port_refusal(mine, {"name": "ui", "port": 8080}) == ""
    assert "node agent" in executor.port_refusal(mine, {"name": "agent", "port": 9400})

    theirs = make_job(bob, world["tenants"]["nlp"], JobStatus.RUNNING, cluster=cluster,
                      executor_state={"nodes": [node.name]})
    JobAllocation.objects.create(job=theirs, gpu=gpus[1], allocated_at=theirs.submitted_at)
    refusal = executor.port_refusal(mine, {"name": "ui", "port": 8080})
    assert node.name in refusal and "alone" in refusal  # bob's notebook could be what answers on 8080

    JobAllocation.objects.filter(job=theirs).update(released_at=mine.submitted_at)
    assert executor.port_refusal(mine, {"name": "ui", "port": 8080}) == ""
