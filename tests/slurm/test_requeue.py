"""A Slurm job the portal submitted is never put back in Slurm's queue behind the portal's back: it is submitted
with ``no_requeue`` (so Slurm refuses a requeue), and one an administrator forces anyway ends the portal job's
attempt as an infrastructure failure: cancelled in Slurm and placed again through the one retry rule."""

import time

import pytest

from scheduling.executors.slurm.client import SlurmClient
from scheduling.executors.slurm.follow import sync_cluster
from scheduling.models import FailureCategory, JobStatus
from tests.slurm.world import follow_until, scontrol_fields, submit


def test_a_job_slurm_requeues_is_cancelled_there_and_retried_by_the_portal(lab, slurm_clean):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    assert job.status == JobStatus.RUNNING
    slurm_id = job.executor_state["slurm_job_id"]
    assert scontrol_fields(slurm_clean, slurm_id)["Requeue"] == "0"
    with pytest.raises(RuntimeError, match="presently disabled"):  # Slurm will not requeue it by itself
        slurm_clean.scontrol("requeue", slurm_id)
    slurm_clean.scontrol("update", f"jobid={slurm_id}", "requeue=1")  # an administrator forces it
    slurm_clean.scontrol("requeue", slurm_id)
    client = SlurmClient(lab["cluster"])
    seen, deadline = client.job(int(slurm_id)), time.monotonic() + 10
    while seen.state not in ("PENDING", "REQUEUED", "RUNNING") and time.monotonic() < deadline:
        seen = client.job(int(slurm_id))  # COMPLETING while the requeue winds the first run down
    assert seen.state in ("PENDING", "REQUEUED", "RUNNING") and seen.restarts == 1

    sync_cluster(lab["cluster"])
    job.refresh_from_db()
    retried = job.task_type.infrastructure_retries > 0
    assert job.status == (JobStatus.QUEUED if retried else JobStatus.FAILED)
    attempt = job.executor_state["attempts"][-1]
    assert attempt["category"] == FailureCategory.NODE_FAULT
    assert f"Slurm put job {slurm_id} back in its own queue after it had started" in attempt["message"]
    assert attempt["evidence"]["slurm_job_id"] == int(slurm_id)
    assert not job.allocations.filter(released_at__isnull=True).exists()  # its GPUs are free again
    seen, deadline = client.job(int(slurm_id)), time.monotonic() + 10
    while seen.state != "CANCELLED" and time.monotonic() < deadline:
        seen = client.job(int(slurm_id))
    assert seen.state == "CANCELLED"  # Slurm will not start it again behind the portal's back
    assert sync_cluster(lab["cluster"]).changed == 0
