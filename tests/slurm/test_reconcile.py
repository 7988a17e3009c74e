"""The reconciler on a real Slurm cluster: a portal job Slurm keeps pending past the bound is withdrawn and placed
again (in the portal first, so that a follower in between leaves it queued), a Slurm job the portal submitted for
an attempt that is over is cancelled in Slurm (one whose comment merely names a portal job is left alone), and an
allocation that names other GPUs than Slurm gave is moved to them; each an event with its reason and a repair in
the report."""

import time
from datetime import timedelta

from django.utils import timezone

from fleet.models import GPU, OutsideWork
from scheduling import lifecycle
from scheduling.executors.slurm.client import SlurmClient
from scheduling.executors.slurm.follow import Follower, followed_jobs
from scheduling.executors.slurm.inventory import import_inventory
from scheduling.models import JobAllocation, JobEvent, JobStatus
from scheduling.passes.reconcile import reconcile
from tests.slurm.world import PORTAL_NODES, follow_until, submit

LATER = timedelta(minutes=30)  # past every bound of the reconciler


def settled(client: SlurmClient, slurm_id: int) -> str:
    """The job's state once Slurm has wound it down (a cancelled running job is COMPLETING for a moment)."""
    deadline = time.monotonic() + 10
    while (state := client.job(slurm_id).state) == "COMPLETING" and time.monotonic() < deadline:
        time.sleep(0.1)
    return state


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


def test_a_slurm_job_of_an_ended_portal_job_is_cancelled_and_a_forged_comment_proves_nothing(lab, slurm_clean):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    stray = int(job.executor_state["slurm_job_id"])
    lifecycle.transition(job, JobStatus.CANCELLED, "ended while its stop never reached Slurm")
    forged = slurm_clean.sbatch("--wrap=sleep 3", f"--comment=gpuportal job {job.pk} attempt 1", "-w", "sx-h100-2",
                                "--gres=gpu:h100:1", "--output=/dev/null", user="nobody")
    client = SlurmClient(lab["cluster"])
    deadline = time.monotonic() + 10
    while client.job(int(forged)).state != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.1)
    report = reconcile(now=timezone.now() + LATER)
    assert [(r.kind, r.job) for r in report.repairs if r.kind == "cancelled"] == [("cancelled", job.pk)]
    assert settled(client, stray) == "CANCELLED"
    assert client.job(int(forged)).state == "RUNNING"  # its comment names the job, its id is not one the portal kept
    assert job.events.filter(kind=JobEvent.Kind.RECONCILE, reason__contains=f"Cancelled Slurm job {stray}").exists()
    import_inventory(lab["cluster"])  # the forged job is work submitted to Slurm directly: it holds its GPU
    assert list(OutsideWork.objects.filter(cluster=lab["cluster"]).values_list("external_id", "node__name")) == [
        (forged, "sx-h100-2")]


def test_a_follower_between_withdrawal_and_cancel_leaves_the_job_queued(lab, slurm_clean, settings):
    settings.SLURM = {**settings.SLURM, "PENDING_SECONDS": 60}
    for node in PORTAL_NODES:
        slurm_clean.sbatch(f"--nodelist={node}", "--gres=gpu:h100:8", "--wrap=sleep 3", "--output=/dev/null",
                           user="nobody")
    job = submit(lab["alice"], "true", gpus_per_node=8)
    slurm_id = int(job.executor_state["slurm_job_id"])
    follower = Follower(lab["cluster"])
    (stale,) = followed_jobs(lab["cluster"])  # a follower read the job as dispatching just before the withdrawal
    reconcile(now=timezone.now() + LATER)
    seen = follower.client.job(slurm_id)
    assert seen.state == "CANCELLED"
    assert follower.apply(stale, seen) is False  # the cancel is the reconciler's, of an attempt that is over
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and "slurm_job_id" not in job.executor_state
    assert not job.events.filter(to_status=JobStatus.CANCELLED).exists()
    assert job.events.filter(data__repair="withdrawn", data__slurm_job_id=slurm_id).exists()


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
