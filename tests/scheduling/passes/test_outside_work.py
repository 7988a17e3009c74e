"""Work submitted to a cluster's scheduler directly (``fleet.OutsideWork`` rows) in the snapshot the pass loads,
and what a portal job waiting behind it is told."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import Cluster, ExecutorKind, OutsideWork
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus, WaitReason
from scheduling.passes.snapshots import load_snapshots, outside_holds
from tenants.models import Quota
from tests.conftest import job_payload
from tests.factories import make_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slurm_world(world):
    """A Slurm cluster of two 8-GPU H800 nodes beside the simulated one: on the first, work submitted with sbatch
    holds GPUs 0-3 for another hour of its two-hour limit; on the second, work without a known limit holds all 8."""
    now = timezone.now()
    cluster = Cluster.objects.create(name="sx", executor=ExecutorKind.SLURM)
    first, second = make_node(cluster, "sx-h800-1", "H800"), make_node(cluster, "sx-h800-2", "H800")
    OutsideWork.objects.create(cluster=cluster, node=first, external_id="101", user_name="daemon", account="vision",
                               gpu_indices=[0, 1, 2, 3], started_at=now - timedelta(hours=1),
                               time_limit_seconds=7200, seen_at=now)
    OutsideWork.objects.create(cluster=cluster, node=second, external_id="102", user_name="nobody", account="nlp",
                               gpu_indices=list(range(8)), started_at=now - timedelta(minutes=5), seen_at=now)
    Quota.objects.create(tenant=world["tenants"]["vision"], gpu_model="H800", guaranteed_gpus=16, limit_gpus=16)
    return {"cluster": cluster, "nodes": (first, second), "now": now}


def test_outside_work_is_read_into_its_clusters_snapshot_only(slurm_world, django_assert_max_num_queries):
    now = slurm_world["now"]
    first, second = slurm_world["nodes"]
    snapshots, _nodes, _gpus = load_snapshots(now)
    assert snapshots["sim"].outside == ()
    holds = {h.external_id: h for h in snapshots["sx"].outside}
    assert holds.keys() == {"101", "102"}
    assert (holds["101"].node_id, holds["101"].gpu_indices, holds["101"].scheduler) == (first.id, (0, 1, 2, 3),
                                                                                         "Slurm")
    assert holds["101"].end() == pytest.approx((now + timedelta(hours=1)).timestamp())
    assert holds["102"].node_id == second.id and holds["102"].time_limit == math.inf  # no limit: no known end
    # nobody's quota or fair share: no tenant, no user, no account reaches the engine
    assert not {"vision", "nlp", "daemon", "nobody"} & {str(v) for h in holds.values() for v in vars(h).values()}
    with django_assert_max_num_queries(1):
        assert outside_holds(now).keys() == {slurm_world["cluster"].pk}


def test_a_job_waiting_behind_outside_work_is_told_where_and_when(slurm_world, users):
    job = submission.submit_job(users["alice"], job_payload(gpu_model="H800", gpus_per_node=8))
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.QUEUED
    assert job.wait_reason == WaitReason.INSUFFICIENT_GPUS
    assert job.wait_reason_message == (
        "Needs 8 H800 GPUs on one node; the most free on any healthy H800 node is 4 (4 free in total). "
        "8 of the 8 H800 GPUs of sx-h800-2 are held by work submitted to Slurm directly, outside the portal "
        "(12 GPUs on 2 nodes in all).")
    # its GPUs on sx-h800-1 free at the outside job's time limit, an hour from now
    expected = slurm_world["now"] + timedelta(hours=1)
    assert abs((job.estimated_start - expected).total_seconds()) < 120
    # the sentence names neither the outside work's users nor its accounts nor its ids
    assert not any(word in job.wait_reason_message for word in ("daemon", "nobody", "101", "102"))
