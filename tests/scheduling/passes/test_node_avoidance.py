"""A retried job avoids the nodes its attempts failed on; when that leaves no node that could hold it, it ends
with that reason and its history of faults (or, where the site allows, waits saying so and an admin clears the
avoidance); a job that avoids the only nodes with room is told so, never that CPU or memory is short."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditRecord
from fleet.models import Node
from scheduling import lifecycle
from scheduling.engine import NodeSnapshot, QuotaSnapshot, RunningJob, Snapshot, WaitingJob, WaitReason, schedule
from scheduling.engine.model import Placement
from scheduling.jobs import submission
from scheduling.models import FailureCategory, Job, JobStatus
from scheduling.passes.scheduler import run_pass
from scheduling.passes.snapshots import avoided_nodes
from tests.conftest import job_payload, long_run

NOW = 1_000_000.0


def _pool(model="MI300X"):
    return (NodeSnapshot(1, "mi-01", model, tuple(range(8))), NodeSnapshot(2, "mi-02", model, tuple(range(8))))


def _schedule(waiting, running=()):
    return schedule(Snapshot(nodes=_pool(), quotas=(QuotaSnapshot("t", "MI300X", 16, 16),), waiting=waiting,
                             running=running, now=NOW))


def _job(avoid, g=8, n=1):
    return WaitingJob(1, "t", "MI300X", g, nodes=n, submitted_at=1, avoid_nodes=avoid)


# --- the engine --------------------------------------------------------------------------------------------

def test_a_job_that_avoids_every_node_of_its_pool_says_so_and_has_no_estimate():
    wait = _schedule((_job((1, 2)),)).wait_for(1)
    assert wait.reason == WaitReason.AVOIDS_ALL_NODES
    assert wait.message == ("Avoids mi-01, mi-02 after node faults; no other MI300X node could hold it (1 x 8 "
                            "GPUs).")
    assert wait.estimated_start is None


def test_a_gang_that_needs_both_nodes_and_avoids_one_can_never_run():
    assert _schedule((_job((2,), g=4, n=2),)).wait_for(1).reason == WaitReason.AVOIDS_ALL_NODES


def test_free_gpus_only_on_an_avoided_node_are_not_blamed_on_cpu_or_memory():
    busy = RunningJob(9, "t", "MI300X", (Placement(2, tuple(range(6))),), started_at=NOW - 60, max_runtime=3600)
    wait = _schedule((_job((1,), g=4),), running=(busy,)).wait_for(1)
    assert wait.reason == WaitReason.AVOIDED_NODES
    assert "mi-01, which it avoids after node faults" in wait.message
    assert "the most free on any other MI300X node is 2" in wait.message
    assert "CPU" not in wait.message and wait.estimated_start is not None  # mi-02 frees up when job 9 ends


def test_a_job_that_avoids_one_node_runs_on_the_other():
    assert _schedule((_job((1,)),)).admissions[0].placements[0].node_id == 2


# --- the pass on the database ------------------------------------------------------------------------------

def _node_faults_everywhere(users) -> Job:
    """A job whose attempts each hit a node fault, on both H100 nodes of the world, through the retry rule."""
    job = submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8,
                                                          command=long_run(999)))
    job.task_type.infrastructure_retries = 5
    job.task_type.save()
    names = list(Node.objects.filter(gpu_model="H100").order_by("name").values_list("name", flat=True))
    for name in names:
        job = Job.objects.select_related("task_type").get(pk=job.pk)
        if job.status == JobStatus.QUEUED:
            run_pass()
            job = Job.objects.select_related("task_type").get(pk=job.pk)
        assert job.status in (JobStatus.ADMITTED, JobStatus.DISPATCHING, JobStatus.RUNNING), job.status
        lifecycle.fail_or_retry(job, {"category": FailureCategory.NODE_FAULT, "node": name,
                                      "message": f"XID 79 on {name}."})
    return Job.objects.get(pk=job.pk), names


@pytest.mark.django_db(transaction=True)
def test_the_pass_ends_a_job_that_avoids_every_node_with_its_faults(users):
    job, names = _node_faults_everywhere(users)
    report = run_pass()
    job.refresh_from_db()
    assert job.pk in report.failed and job.status == JobStatus.FAILED
    assert job.failure_category == FailureCategory.NODE_FAULT
    event = job.events.get(to_status=JobStatus.FAILED)
    assert event.from_status == JobStatus.QUEUED
    assert f"avoids {', '.join(names)} after node faults" in event.reason
    assert all(f"XID 79 on {name}." in event.reason for name in names)
    assert event.data["attempts"] == len(names)


@pytest.mark.django_db(transaction=True)
def test_where_the_site_allows_it_waits_saying_why_and_an_admin_clears_the_avoidance(users, settings, api):
    settings.SCHEDULER = {**settings.SCHEDULER, "WAIT_WHEN_ALL_NODES_AVOIDED": True}
    job, names = _node_faults_everywhere(users)
    run_pass()
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.queue_state.wait_reason == "avoids_all_nodes"
    assert api("alice").post(f"/api/jobs/{job.pk}/clear-avoidance/").status_code == 403
    body = api("admin").post(f"/api/jobs/{job.pk}/clear-avoidance/").json()
    job.refresh_from_db()
    assert job.executor_state["avoid_nodes"] == [] and job.status != JobStatus.QUEUED  # the pass admitted it
    assert body["id"] == job.pk
    record = AuditRecord.objects.get(action="job.clear_avoidance")
    assert record.actor == users["admin"] and len(record.before["avoid_nodes"]) == len(names)
    assert job.events.filter(kind="retry", reason__contains="cleared the node avoidance").exists()


def test_an_old_avoidance_ends_once_the_node_is_schedulable_again(settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "AVOID_NODE_HOURS": 6}
    now = timezone.now()
    state = {"avoid_nodes": [1, 2, 3], "avoid_since": {
        "1": (now - timedelta(hours=7)).isoformat(), "2": (now - timedelta(hours=7)).isoformat(),
        "3": (now - timedelta(hours=1)).isoformat()}}
    # node 1 repaired, node 2 still cordoned or unhealthy, node 3's fault too recent
    assert avoided_nodes(state, now, {1: True, 2: False, 3: True}) == (2, 3)
    assert avoided_nodes({"avoid_nodes": [4]}, now, {4: True}) == (4,)  # no time recorded: kept
