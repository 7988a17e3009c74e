"""The Slurm executor against real Slurm: a job placed by the portal's engine is submitted pinned to its nodes
and GPUs as its owner's account, followed to running and to its end (exit codes decoded, the log read from the
shared output directory), cancelled from the portal or in Slurm, and ended truly when Slurm forgets it."""

import time
from dataclasses import replace

from scheduling import lifecycle
from scheduling.executors import executor_for
from scheduling.executors.slurm.client import SlurmClient
from scheduling.executors.slurm.follow import Follower
from scheduling.jobs import actions
from scheduling.models import FailureCategory, Job, JobEvent, JobStatus
from tests.slurm.world import follow_until, scontrol_fields, submit


def test_dispatch_pinned_runs_and_succeeds_with_its_log(lab, slurm_clean):
    started = time.monotonic()
    job = submit(lab["alice"], "sleep 1; echo finished-well")
    assert job.status == JobStatus.DISPATCHING, job.status
    state = job.executor_state
    assert (state["user"], state["attempt"]) == ("daemon", 1)
    fields = scontrol_fields(slurm_clean, state["slurm_job_id"])
    nodes = [a.gpu.node.name for a in job.allocations.select_related("gpu__node")]
    assert fields["ReqNodeList"] == nodes[0] and set(nodes) == {nodes[0]}
    assert fields["TresPerNode"] == "gres:gpu:h100:2"  # H200 in the portal, h100 in Slurm
    assert fields["UserId"].startswith("daemon(")
    client = SlurmClient(lab["cluster"])
    running = None
    while time.monotonic() - started < 15 and (running is None or running.state == "PENDING"):
        running = client.job(int(state["slurm_job_id"]))
    print(f"submit to RUNNING in Slurm: {time.monotonic() - started:.2f} s")  # the figure the report gives
    assert running.state in ("RUNNING", "COMPLETED")
    assert running.comment == f"gpuportal job {job.pk} attempt 1" and running.user == "daemon"
    job = follow_until(job, (JobStatus.SUCCEEDED, JobStatus.FAILED))
    assert (job.status, job.exit_code) == (JobStatus.SUCCEEDED, 0)
    assert job.events.filter(to_status=JobStatus.RUNNING, reason__contains=nodes[0]).exists()
    log = executor_for(lab["cluster"]).read_log(job, 10)
    assert "finished-well" in log.lines and not log.error


def test_exit_code_three_fails_the_job_with_it(lab):
    job = submit(lab["alice"], "echo about to fail; exit 3")
    job = follow_until(job, (JobStatus.FAILED, JobStatus.SUCCEEDED))
    assert (job.status, job.exit_code, job.failure_category) == (JobStatus.FAILED, 3, FailureCategory.EXIT_CODE)
    assert "exited with code 3" in job.failure_message
    evidence = job.executor_state["diagnosis"]["evidence"]
    assert (evidence["slurm_state"], evidence["exit"]) == ("FAILED", "exit 3")
    assert "about to fail" in evidence["log_tail"]


def test_cancel_from_the_portal_cancels_in_slurm(lab, slurm_clean):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    assert job.status == JobStatus.RUNNING
    actions.cancel_job(lab["alice"], job)
    slurm_id = int(job.executor_state["slurm_job_id"])
    seen = SlurmClient(lab["cluster"]).job(slurm_id)
    deadline = time.monotonic() + 10
    while seen.state != "CANCELLED" and time.monotonic() < deadline:
        seen = SlurmClient(lab["cluster"]).job(slurm_id)
    assert seen.state == "CANCELLED"
    assert job.events.filter(kind=JobEvent.Kind.EXECUTOR, reason__contains=f"Cancelled Slurm job {slurm_id}").exists()


def test_cancelled_in_slurm_is_said_so(lab, slurm_clean):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    slurm_clean.scontrol("update", f"jobid={job.executor_state['slurm_job_id']}", "comment=touched")  # still ours
    slurm_clean.rest(f"/slurm/v0.0.38/job/{job.executor_state['slurm_job_id']}", user="root", method="DELETE")
    job = follow_until(job, (JobStatus.CANCELLED,))
    assert job.status == JobStatus.CANCELLED
    assert "Cancelled in Slurm" in job.events.get(to_status=JobStatus.CANCELLED).reason
    assert not job.allocations.filter(released_at__isnull=True).exists()


def test_a_job_slurm_forgot_ends_as_unknown_never_as_success(lab):
    job = follow_until(submit(lab["alice"], "sleep 3"), (JobStatus.RUNNING,))
    actual = job.executor_state["slurm_job_id"]
    job.executor_state = {**job.executor_state, "slurm_job_id": "987654"}  # a job slurmctld and slurmdb never saw
    job.save(update_fields=["executor_state"])
    job = follow_until(job, (JobStatus.FAILED, JobStatus.SUCCEEDED), seconds=5)
    assert job.status == JobStatus.FAILED
    assert "outcome is unknown" in job.failure_message and "987654" in job.failure_message
    assert job.exit_code is None
    SlurmClient(lab["cluster"]).cancel(int(actual), "root")


def test_a_refused_submit_fails_the_job_with_slurms_words(lab):
    lab["cluster"].slurm_models = {"h999": "H200"}  # a GRES type no node has: Slurm can never run it
    lab["cluster"].save(update_fields=["slurm_models"])
    job = submit(lab["alice"], "true")
    assert (job.status, job.failure_category) == (JobStatus.FAILED, FailureCategory.DISPATCH)
    assert "Requested node configuration is not available" in job.failure_message
    assert "slurm_job_id" not in job.executor_state


def test_a_two_node_job_runs_its_command_on_both_nodes_with_srun(lab):
    job = submit(lab["alice"], 'echo "rank $SLURM_NODEID on $SLURMD_NODENAME"', nodes=2, topology="any")
    assert job.status == JobStatus.DISPATCHING, job.status
    assert sorted(job.executor_state["nodes"]) == ["sx-h100-1", "sx-h100-2"]
    job = follow_until(job, (JobStatus.SUCCEEDED, JobStatus.FAILED))
    assert job.status == JobStatus.SUCCEEDED, job.failure_message
    lines = executor_for(lab["cluster"]).read_log(job, 10).lines
    assert {"rank 0 on sx-h100-1", "rank 1 on sx-h100-2"} <= {line.strip() for line in lines}, lines


def test_a_privileged_account_is_refused_and_fails_the_dispatch_saying_why(lab):
    lab["cluster"].slurm_users = {"alice": "root"}
    lab["cluster"].save(update_fields=["slurm_users"])
    job = submit(lab["alice"], "true")
    assert (job.status, job.failure_category) == (JobStatus.FAILED, FailureCategory.DISPATCH)
    assert "Slurm cluster slurm-lab did not take the job" in job.failure_message
    assert "does not run jobs of alice as root" in job.failure_message and "slurm_job_id" not in job.executor_state


def test_a_token_slurm_refuses_is_said_in_true_words(lab, tmp_path):
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"not the cluster's key at all, 32b")
    lab["cluster"].slurm_jwt_key_file = str(wrong)
    lab["cluster"].save(update_fields=["slurm_jwt_key_file"])
    job = submit(lab["alice"], "true")
    assert (job.status, job.failure_category) == (JobStatus.FAILED, FailureCategory.DISPATCH)
    assert "refused the portal's token for account daemon" in job.failure_message
    assert "Unspecified error" not in job.failure_message and "after every retry" not in job.failure_message


def test_pending_merges_its_reason_into_the_state_as_it_is_now_and_only_for_its_attempt(lab):
    job = submit(lab["alice"], "sleep 3")
    follower = Follower(lab["cluster"])
    seen = replace(follower.client.job(int(job.executor_state["slurm_job_id"])), state="PENDING", reason="Resources")
    stale = Job.objects.get(pk=job.pk)  # read before the request; evidence is written meanwhile
    Job.objects.filter(pk=job.pk).update(executor_state={**job.executor_state, "fault": "xid 79 on gpu 3"})
    follower.pending(stale, seen)
    job.refresh_from_db()
    assert (job.executor_state["fault"], job.executor_state["slurm_reason"]) == ("xid 79 on gpu 3", "Resources")
    stale = Job.objects.get(pk=job.pk)
    lifecycle.transition(job, JobStatus.QUEUED, "withdrawn meanwhile", cluster=None, executor_state={})
    follower.pending(stale, replace(seen, reason="Priority"))
    job.refresh_from_db()
    assert (job.status, job.executor_state) == (JobStatus.QUEUED, {})  # no Slurm job id put back
    SlurmClient(lab["cluster"]).cancel(seen.job_id, "root")
