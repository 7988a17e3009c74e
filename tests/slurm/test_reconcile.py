"""The reconciler on a real Slurm cluster: a portal job Slurm keeps pending past the bound is withdrawn and placed
again, a Slurm job the portal submitted for an attempt that is over is cancelled in Slurm, and an allocation that
names other GPUs than Slurm gave is moved to them; each an event with its reason and a repair in the report."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import GPU
from scheduling.executors.slurm.client import SlurmClient
from scheduling.jobs import actions
from scheduling.models import JobAllocation, JobEvent, JobStatus
from scheduling.passes.reconcile import reconcile
from tests.slurm.world import PORTAL_NODES, follow_until, slurm_lab, submit

LATER = timedelta(minutes=30)  # past every bound of the reconciler


@pytest.fixture
def lab(world, slurm_clean):
    return slurm_lab(world, slurm_clean)


def test_a_job_slurm_keeps_pending_is_withdrawn_and_placed_again(lab, slurm_clean, settings):
    settings.SLURM = {**settings.SLURM, "PENDING_SECONDS": 60}
    for node in PORTAL_NODES:  # work submitted to Slurm directly takes every GPU the portal thinks free
        slurm_clean.sbatch(f"--nodelist={node}", "--gres=gpu:h100:8", "--wrap=sleep 3", "--output=/dev/null",
                           user="nobody")
    job = submit(lab["alice"], "true", gpus_per_node=8)
    slurm_id = int(job.executor_state["slurm_job_id"])
    client = SlurmClient(lab["cluster"])
    assert client.job(slurm_id).state == "PENDING"
    report = reconcile(now=timezone.now() + LATER)
    assert [r.job for r in report.repairs if r.kind == "withdrawn"] == [job.pk]
    assert client.job(slurm_id).state == "CANCELLED"
    event = job.events.get(data__repair="withdrawn")
    assert "withdrawn from Slurm and placed again" in event.reason and "Pending in Slurm" in event.reason
    assert event.to_status == JobStatus.QUEUED


def test_a_slurm_job_of_an_ended_portal_job_is_cancelled(lab, slurm_clean):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    actions.cancel_job(lab["alice"], job)
    stray = int(slurm_clean.sbatch("--wrap=sleep 3", f"--comment=gpuportal job {job.pk} attempt 1",
                                   "--output=/dev/null", user="daemon"))
    outside = int(slurm_clean.sbatch("--wrap=sleep 3", "--output=/dev/null", user="nobody"))
    report = reconcile(now=timezone.now() + LATER)
    assert [(r.kind, r.job) for r in report.repairs if r.kind == "cancelled"] == [("cancelled", job.pk)]
    client = SlurmClient(lab["cluster"])
    assert client.job(stray).state == "CANCELLED"
    assert client.job(outside).state in ("RUNNING", "PENDING")  # not the portal's: left alone
    assert job.events.filter(kind=JobEvent.Kind.RECONCILE, reason__contains=f"Cancelled Slurm job {stray}").exists()


def test_an_allocation_that_disagrees_with_slurm_is_repaired(lab):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    given = {(node, index) for node, indices in job.executor_state["gpus"].items() for index in indices}
    (node,) = {node for node, _index in given}
    wrong = GPU.objects.filter(node__name=node).exclude(index__in=[i for _n, i in given]).order_by("index")[:2]
    allocations = list(JobAllocation.objects.filter(job=job, released_at__isnull=True))
    for allocation, gpu in zip(allocations, wrong, strict=True):
        allocation.gpu = gpu
        allocation.save(update_fields=["gpu"])
    report = reconcile(now=timezone.now() + LATER)
    assert [r.job for r in report.repairs if r.kind == "reallocated"] == [job.pk]
    held = {(a.gpu.node.name, a.gpu.index) for a in job.allocations.filter(released_at__isnull=True)
            .select_related("gpu__node")}
    assert held == given
    assert job.events.filter(data__repair="reallocated").exists()
