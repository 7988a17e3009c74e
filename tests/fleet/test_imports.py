"""A cluster's inventory applied to the fleet (``fleet.imports``), without a cluster: nodes and GPUs created and
kept in step, the scheduler's drain followed but never a portal admin's state overwritten, down nodes unhealthy
and back, a node gone never deleted, outside work replaced wholesale."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditAction, AuditRecord
from fleet import services
from fleet.imports import ImportedHold, ImportedNode, apply_inventory, gpu_uuid
from fleet.models import GPU, AdminState, Cluster, ExecutorKind, Health, Node, NodeEvent, OutsideWork
from tests.factories import make_node, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="hpc", executor=ExecutorKind.SLURM)


def node(name="n1", **fields) -> ImportedNode:
    return ImportedNode(**{"name": name, "gpu_model": "H100", "gpu_count": 8, "cpus": 32, "memory_mib": 65536,
                           "external_state": "idle", "partitions": ("gpu",), **fields})


def test_nodes_and_gpus_are_created_with_the_catalogues_memory(cluster):
    change = apply_inventory(cluster, [node("n1"), node("n2", gpu_model="A100", gpu_count=4)], [], timezone.now())
    assert change.created == ["n1", "n2"] and change.gpus == 12 and change.models == {"H100": 8, "A100": 4}
    n1 = Node.objects.get(name="n1")
    assert (n1.cluster, n1.rack, n1.network_domain, n1.cpu_milli, n1.memory_mib) == (cluster, "gpu", "hpc", 32000,
                                                                                     65536)
    gpus = list(n1.gpus.order_by("index"))
    assert [g.uuid for g in gpus] == [gpu_uuid(cluster, "n1", i) for i in range(8)] == [
        f"slurm-hpc-n1-{i}" for i in range(8)]
    assert {g.memory_mb for g in gpus} == {80 * 1024} and {g.model for g in gpus} == {"H100"}
    again = apply_inventory(cluster, [node("n1", gpu_count=6), node("n2", gpu_model="A100", gpu_count=4)], [],
                            timezone.now())
    assert again.created == [] and GPU.objects.filter(node=n1).count() == 6
    assert GPU.objects.get(node=n1, index=0).uuid == "slurm-hpc-n1-0"  # stable across imports


def test_the_schedulers_drain_is_followed_both_ways_and_audited(cluster):
    apply_inventory(cluster, [node()], [], timezone.now())
    drained = apply_inventory(cluster, [node(admin_state=AdminState.DRAINING, external_state="idle+DRAIN",
                                             external_reason="bad fan")], [], timezone.now())
    n1 = Node.objects.get(name="n1")
    assert drained.admin_changes == ["n1: active -> draining"]
    assert (n1.admin_state, n1.external_state, n1.external_reason) == ("draining", "idle+DRAIN", "bad fan")
    event = n1.events.filter(kind=NodeEvent.Kind.ADMIN).first()
    assert event.reason == "Slurm drains the node: bad fan" and event.actor is None
    record = AuditRecord.objects.filter(action=AuditAction.NODE_ADMIN, object_id=str(n1.pk)).latest("seq")
    assert record.after == {"admin_state": "draining", "source": "cluster"} and record.actor is None
    resumed = apply_inventory(cluster, [node()], [], timezone.now())
    n1.refresh_from_db()
    assert resumed.admin_changes == ["n1: draining -> active"] and n1.admin_state == AdminState.ACTIVE
    assert n1.external_reason == ""


def test_a_portal_admins_state_is_never_overwritten(cluster):
    apply_inventory(cluster, [node()], [], timezone.now())
    admin = make_user("root-admin", roles=())
    admin.is_superuser = True
    admin.save()
    services.set_node_admin_state(admin, Node.objects.get(name="n1"), AdminState.CORDONED, "rack work")
    change = apply_inventory(cluster, [node(admin_state=AdminState.DRAINING, external_reason="x")], [],
                             timezone.now())
    assert change.admin_kept == ["n1"] and change.admin_changes == []
    n1 = Node.objects.get(name="n1")
    assert n1.admin_state == AdminState.CORDONED and n1.external_reason == "x"
    apply_inventory(cluster, [node()], [], timezone.now())  # Slurm resumes: the admin's cordon still stands
    assert Node.objects.get(name="n1").admin_state == AdminState.CORDONED


def test_down_is_unhealthy_and_comes_back_but_an_agents_verdict_stays(cluster):
    apply_inventory(cluster, [node("n1"), node("n2")], [], timezone.now())
    change = apply_inventory(cluster, [node("n1", health=Health.UNHEALTHY, external_state="down",
                                            external_reason="Not responding"), node("n2")], [], timezone.now())
    assert change.health_changes == ["n1: healthy -> unhealthy"]
    n1 = Node.objects.get(name="n1")
    assert n1.health == Health.UNHEALTHY and not n1.schedulable
    assert n1.events.filter(kind=NodeEvent.Kind.HEALTH).first().reason == (
        "Slurm says the node is down: Not responding")
    Node.objects.filter(name="n2").update(health=Health.UNHEALTHY)  # as the agent poller would
    back = apply_inventory(cluster, [node("n1"), node("n2")], [], timezone.now())
    assert back.health_changes == ["n1: unhealthy -> healthy"]
    assert Node.objects.get(name="n2").health == Health.UNHEALTHY


def test_a_node_gone_from_the_scheduler_is_kept_unhealthy(cluster):
    apply_inventory(cluster, [node("n1"), node("n2")], [], timezone.now())
    change = apply_inventory(cluster, [node("n1")], [], timezone.now())
    assert change.gone == ["n2"] and change.nodes == 1
    n2 = Node.objects.get(name="n2")
    assert n2.health == Health.UNHEALTHY and n2.gpus.count() == 8
    assert n2.events.first().reason == "Slurm no longer lists this node."


def test_a_name_another_cluster_has_is_skipped(cluster):
    make_node(Cluster.objects.create(name="sim"), "n1", "H100")
    change = apply_inventory(cluster, [node("n1"), node("n2")], [], timezone.now())
    assert change.skipped == ["n1"] and Node.objects.get(name="n1").cluster.name == "sim"


def test_outside_work_is_replaced_wholesale(cluster):
    now = timezone.now()
    apply_inventory(cluster, [node("n1")], [], now)
    hold = ImportedHold(node="n1", external_id="41", user_name="daemon", account="vision", name="train",
                        gpu_indices=(2, 0), started_at=now - timedelta(minutes=5), time_limit_seconds=3600)
    elsewhere = ImportedHold(node="unknown", external_id="42", user_name="x", account="", name="", gpu_indices=(0,))
    change = apply_inventory(cluster, [node("n1")], [hold, elsewhere], now)
    assert change.outside_work == 1
    row = OutsideWork.objects.get()
    assert (row.node.name, row.external_id, row.gpu_indices, row.user_name, row.time_limit_seconds) == (
        "n1", "41", [0, 2], "daemon", 3600)
    apply_inventory(cluster, [node("n1")], [], now)
    assert not OutsideWork.objects.exists()
