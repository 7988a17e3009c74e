"""Work submitted to Slurm directly, end to end on a real cluster: imported by the inventory, it holds its GPUs in
the portal's engine (a portal job that needs them waits, told why, and is never sent to Slurm meanwhile), and once
it ends and the inventory sees it gone, the waiting job is placed, dispatched and runs on those GPUs."""

import time

from fleet.models import OutsideWork
from scheduling.executors.slurm.inventory import import_inventory
from scheduling.models import Job, JobStatus, WaitReason
from scheduling.passes.scheduler import run_pass
from tests.slurm.world import PORTAL_NODES, follow_until, submit, wait_for


def running(slurm, job_id: str) -> bool:
    return "JobState=RUNNING" in wait_for(lambda: slurm.scontrol("show", "job", job_id),
                                          lambda text: "JobState=RUNNING" in text, seconds=10)


def test_outside_work_holds_its_gpus_until_it_ends_then_the_portal_job_runs(lab, slurm_clean, client):
    outside = [slurm_clean.sbatch("--gres=gpu:h100:6", "-w", node, "-o", "/dev/null", "--chdir=/tmp", "-t", "2",
                                  "-J", "direct", "--wrap", "sleep 60", user="nobody") for node in PORTAL_NODES]
    assert all(running(slurm_clean, job_id) for job_id in outside)
    assert import_inventory(lab["cluster"]).change.outside_work == 2

    job = submit(lab["alice"], "echo trained", gpus_per_node=6)
    assert job.status == JobStatus.QUEUED and job.cluster_id is None  # nothing went to Slurm
    assert job.wait_reason == WaitReason.INSUFFICIENT_GPUS
    assert job.wait_reason_message == (
        "Needs 6 H200 GPUs on one node; the most free on any healthy H200 node is 2 (4 free in total). 6 of the 8 "
        "H200 GPUs of sx-h100-1 are held by work submitted to Slurm directly, outside the portal (12 GPUs on 2 "
        "nodes in all).")
    assert "nobody" not in job.wait_reason_message and "nlp" not in job.wait_reason_message

    for job_id in outside:  # the outside work ends; the next inventory sees its GPUs free
        slurm_clean.scontrol("update", f"jobid={job_id}", "timelimit=0:01")
        slurm_clean._run(["scancel", job_id])
    deadline = time.monotonic() + 10
    while import_inventory(lab["cluster"]).change.outside_work and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not OutsideWork.objects.filter(cluster=lab["cluster"]).exists()
    run_pass()
    job = follow_until(Job.objects.get(pk=job.pk), (JobStatus.SUCCEEDED, JobStatus.FAILED))
    assert job.status == JobStatus.SUCCEEDED, job.events.values_list("reason", flat=True)
    assert job.cluster == lab["cluster"] and job.executor_state["slurm_job_id"] not in outside
    client.login(username="alice", password="demo")  # the cluster runs commands without a container: said so
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "not used: cluster slurm-lab runs the command on its nodes without a container" in page
