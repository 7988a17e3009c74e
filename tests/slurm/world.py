"""A portal world on the test Slurm cluster: the standard lab plus a Slurm cluster whose H100 nodes the portal
knows as H200 (a GRES type mapped to another catalogue name, as sites do), with vision's quota for them, and
alice mapped to the system account ``daemon``."""

from __future__ import annotations

import time
from importlib import import_module

from django.apps import apps as django_apps

from fleet.models import Cluster, ExecutorKind
from scheduling.executors.slurm import tokens
from scheduling.executors.slurm.follow import sync_cluster
from scheduling.jobs import submission
from scheduling.models import Job
from tenants.models import Quota
from tests.conftest import job_payload
from tests.factories import make_node

PORTAL_NODES = ("sx-h100-1", "sx-h100-2")


def slurm_lab(world, slurm) -> dict:
    import_module("fleet.migrations.0002_accelerator_catalogue").add_known_models(django_apps, None)
    tokens.forget()
    cluster = Cluster.objects.create(
        name="slurm-lab", executor=ExecutorKind.SLURM, slurm_url=slurm.url, slurm_jwt_key_file=str(slurm.jwt_key),
        slurm_output_dir=str(slurm.output_dir), slurm_user="root", slurm_users={"alice": "daemon"},
        slurm_models={"h100": "H200"})
    for name in PORTAL_NODES:
        make_node(cluster, name, "H200", gpus=8, cpu_milli=32_000, memory_mib=65_536)  # as Slurm says
    Quota.objects.create(tenant=world["tenants"]["vision"], gpu_model="H200", guaranteed_gpus=16, limit_gpus=16)
    return {**world, "cluster": cluster, "alice": world["users"]["alice"]}


def submit(user, command: str, **fields) -> Job:
    """A job on the Slurm nodes: the pass places it and dispatch submits it, at once (no broker in tests)."""
    job = submission.submit_job(user, job_payload(**{
        "gpu_model": "H200", "gpus_per_node": 2, "command": command, "max_runtime_minutes": 5, "cpus_per_node": 2,
        "memory_gb_per_node": 4, **fields}))
    job.refresh_from_db()
    return job


def follow_until(job: Job, statuses, seconds: float = 20.0) -> Job:
    """Follow the cluster (as the beat does) until the job reaches one of ``statuses``; the job either way."""
    deadline = time.monotonic() + seconds
    while True:
        sync_cluster(job.cluster)
        job.refresh_from_db()
        if job.status in statuses or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


def wait_for(read, until, seconds: float = 15.0):
    """Read again until ``until`` holds (Slurm's scheduler works in its own time); the last value either way."""
    deadline = time.monotonic() + seconds
    value = read()
    while not until(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


def scontrol_fields(slurm, slurm_id) -> dict:
    """A job's fields as ``scontrol show job`` prints them (what Slurm was told, read by Slurm's own client)."""
    text = slurm.scontrol("show", "job", str(slurm_id))
    return dict(part.split("=", 1) for part in text.split() if "=" in part)
