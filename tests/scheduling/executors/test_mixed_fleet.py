"""A mixed fleet: NVIDIA, AMD and Ascend nodes in one pool with one set of quotas. Each vendor's jobs
land only on their own nodes; a job that accepts several models lands only on one of them, held to the quota
of the model it lands on — in the engine (random snapshots) and through the portal."""

from __future__ import annotations

import random
from importlib import import_module

import pytest
from django.apps import apps as django_apps

from fleet.catalogue import gpu_model_catalogue
from fleet.models import Cluster, Node
from scheduling import engine
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from scheduling.tasks import sync_job_status
from tests.conftest import job_payload
from tests.factories import make_node, make_task_type, make_tenant, make_user

MODELS = ("L40S", "A100", "MI300X")


def _snapshot(rng: random.Random) -> engine.Snapshot:
    """A random cluster: nodes of three models, tenants with random limits, running jobs within them and
    waiting jobs of one model or several."""
    nodes = tuple(engine.NodeSnapshot(i, f"n{i}", rng.choice(MODELS), tuple(range(8))) for i in range(6))
    tenants = ("a", "b", "c")
    quotas = tuple(engine.QuotaSnapshot(t, m, g, g + rng.choice((0, 4)))
                   for t in tenants for m in MODELS for g in (rng.choice((0, 4, 8)),))
    limit = {(q.tenant, q.gpu_model): q.limit for q in quotas}
    used: dict[tuple[str, str], int] = {}
    running, free = [], {n.id: list(n.gpu_indices) for n in nodes}
    for job_id in range(1, 8):
        node = rng.choice(nodes)
        tenant, take = rng.choice(tenants), rng.choice((1, 2, 4))
        if len(free[node.id]) < take or used.get((tenant, node.gpu_model), 0) + take > limit[(tenant, node.gpu_model)]:
            continue
        indices = tuple(free[node.id][:take])
        free[node.id] = free[node.id][take:]
        used[(tenant, node.gpu_model)] = used.get((tenant, node.gpu_model), 0) + take
        running.append(engine.RunningJob(job_id, tenant, node.gpu_model, (engine.Placement(node.id, indices),),
                                         preemptible=False))
    waiting = []
    for job_id in range(100, 130):
        accepted = tuple(rng.sample(MODELS, rng.choice((1, 2, 3))))
        any_model = rng.random() < 0.2
        waiting.append(engine.WaitingJob(
            job_id, rng.choice(tenants), engine.ANY_MODEL if any_model else accepted[0], rng.choice((1, 2, 4, 8)),
            submitted_at=job_id, accept_models=() if any_model or len(accepted) == 1 else accepted,
            preemptible=False))
    return engine.Snapshot(nodes=nodes, running=tuple(running), waiting=tuple(waiting), quotas=quotas, now=1000.0)


@pytest.mark.parametrize("seed", range(150))
def test_no_job_of_several_models_passes_the_quota_of_the_model_it_lands_on(seed):
    snapshot = _snapshot(random.Random(seed))
    result = engine.schedule(snapshot)
    model_of = {n.id: n.gpu_model for n in snapshot.nodes}
    waiting = {w.id: w for w in snapshot.waiting}
    held: dict[tuple[str, str], int] = {}
    for job in snapshot.running:
        held[(job.tenant, job.gpu_model)] = held.get((job.tenant, job.gpu_model), 0) + job.quota_gpus
    for admission in result.admissions:
        job = waiting[admission.job_id]
        landed = {model_of[p.node_id] for p in admission.placements}
        assert len(landed) == 1
        model = landed.pop()
        assert model in (job.accept_models or ((job.gpu_model,) if job.gpu_model != engine.ANY_MODEL else MODELS))
        held[(job.tenant, model)] = held.get((job.tenant, model), 0) + job.quota_gpus
    limits = {(q.tenant, q.gpu_model): q.limit for q in snapshot.quotas}
    assert all(gpus <= limits[key] for key, gpus in held.items()), (held, limits)


def test_a_job_of_several_models_waits_for_the_quota_of_each():
    nodes = (engine.NodeSnapshot(1, "n1", "L40S", tuple(range(8))),)
    quotas = (engine.QuotaSnapshot("t", "L40S", 0, 0), engine.QuotaSnapshot("t", "A100", 8, 8))
    job = engine.WaitingJob(2, "t", engine.ANY_MODEL, 1, submitted_at=1)
    result = engine.schedule(engine.Snapshot(nodes=nodes, waiting=(job,), quotas=quotas, now=10.0))
    assert not result.admissions  # free L40S GPUs, but no L40S quota: it does not land there
    assert result.waiting[0].reason == engine.WaitReason.NO_QUOTA


@pytest.fixture
def mixed(world):
    """The standard lab plus an AMD pool and an Ascend pool with their own quotas."""
    # the catalogue's known models come with a migration, which a transactional test before this one emptied
    import_module("fleet.migrations.0002_accelerator_catalogue").add_known_models(django_apps, None)
    cluster = Cluster.objects.get(name="sim")
    for number in (1, 2):
        make_node(cluster, f"dc3-amd-mi300x-{number:02d}", "MI300X", datacenter="dc3", rack="dc3-r1")
        make_node(cluster, f"dc3-npu-910b-{number:02d}", "Ascend910B", datacenter="dc3", rack="dc3-r2")
    tenant = make_tenant("domestic", projects=("port",), quotas={"Ascend910B": (8, 16), "MI300X": (8, 8),
                                                                 "A100": (0, 0)})
    make_task_type("porting", 45)
    return {**world, "tenant": tenant, "user": make_user("dora", tenant)}


def _submit(user, **fields):
    payload = job_payload(project="domestic/port", task_type="porting", tenant="domestic")
    payload.update(fields)
    return submission.submit_job(user, payload)


def test_each_vendors_jobs_land_only_on_its_own_nodes(mixed):
    catalogue = gpu_model_catalogue()
    assert (catalogue["MI300X"].vendor, catalogue["MI300X"].memory_gb) == ("amd", 192)
    assert (catalogue["Ascend910B"].vendor, catalogue["Ascend910B"].interconnect) == ("huawei", "HCCS")
    dora = mixed["user"]
    npu = _submit(dora, gpu_model="Ascend910B", gpus_per_node=8)
    amd = _submit(dora, gpu_model="MI300X", gpus_per_node=4)
    for job in (npu, amd):
        job.refresh_from_db()
        assert job.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING), job.status
        assert {n.gpu_model for n in Node.objects.filter(gpus__allocations__job=job)} == {job.gpu_model}

    # vendor:amd accepts every AMD model; it lands on one and is held to that model's quota (4 of 8 left)
    family = _submit(dora, gpu_model="", accept_models="vendor:amd", gpus_per_node=4, name="amd-family")
    family.refresh_from_db()
    assert family.accept_models == [] and family.gpu_model == "MI300X"  # one AMD model in the fleet: just it
    assert family.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING)
    over = _submit(dora, gpu_model="MI300X", accept_models="MI300X,Ascend910B", gpus_per_node=4, name="either")
    over.refresh_from_db()
    assert over.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING)  # MI300X is at its limit: the NPUs
    assert over.gpu_model == "Ascend910B" and over.accept_models == ["MI300X", "Ascend910B"]
    assert {n.gpu_model for n in Node.objects.filter(gpus__allocations__job=over)} == {"Ascend910B"}


def test_a_set_the_fleet_does_not_have_is_refused_naming_the_part(mixed, api):
    with pytest.raises(Exception) as refused:
        _submit(mixed["user"], gpu_model="MI300X", accept_models="MI300X,vendor:cambricon")
    assert "vendor:cambricon" in str(refused.value)
    big = _submit(mixed["user"], gpu_model="", accept_models="memory>=100", gpus_per_node=1, name="big-memory")
    assert big.gpu_model == "MI300X" and not Job.objects.filter(pk=big.pk, gpu_model="Ascend910B").exists()


def test_the_cluster_page_shows_each_models_vendor_memory_and_interconnect(mixed, client):
    client.force_login(mixed["user"])
    page = client.get("/cluster/").content.decode()
    assert "AMD · 192 GB · Infinity Fabric (XGMI)" in page and "Huawei Ascend · 64 GB · HCCS" in page
    assert "NVIDIA · 80 GB · NVLink" in page  # the NVIDIA models beside them, in the same pool


@pytest.mark.parametrize(("model", "outcome", "nodes", "expected"), [
    ("Ascend910B", "communication", 2, "HCCL"), ("MI300X", "out_of_memory", 1, "HIP out of memory"),
    ("Ascend910B", "gpu_fault", 1, "npu-smi")])
def test_a_simulated_failure_reads_as_its_vendors(mixed, settings, model, outcome, nodes, expected):
    """The simulated cluster's logs are those of the vendor's stack, and its rules diagnose them."""
    settings.SIMULATION_TIME_SCALE = 1e-6
    job = _submit(mixed["user"], gpu_model=model, gpus_per_node=8 if nodes > 1 else 1, nodes=nodes,
                  command=f"sim:outcome={outcome} sim:minutes=30")
    for _round in range(40):
        sync_job_status()
        job.refresh_from_db()
        if job.executor_state.get("attempts"):
            break
    attempt = job.executor_state["attempts"][0]
    text = f"{attempt['message']} {attempt.get('advice', '')} {attempt.get('evidence', {})}"
    assert expected in text, attempt
    assert "CUDA" not in attempt["message"] and "NCCL" not in attempt["message"]
