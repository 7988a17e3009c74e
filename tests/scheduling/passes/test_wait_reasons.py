"""Each wait reason, from a real submission through the real pass, with its code and its numbers."""

import pytest
from django.test import Client

from scheduling import engine
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus, WaitReason
from scheduling.passes.scheduler import run_pass
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def submit(users, username="alice", **overrides):
    return submission.submit_job(users[username], job_payload(**overrides))


def refreshed(job):
    return Job.objects.get(pk=job.pk)


def test_quota_exhausted(users):
    submit(users, gpus_per_node=8, command=long_run(999))
    submit(users, username="carol", project="segmentation", gpus_per_node=8, command=long_run(999))
    blocked = refreshed(submit(users, gpus_per_node=8))
    assert blocked.status == JobStatus.QUEUED
    assert blocked.wait_reason == WaitReason.QUOTA_EXHAUSTED
    assert blocked.wait_reason_message.startswith(
        "Tenant vision uses 16 of its 16 A100 GPUs; this job needs 8 more, 8 beyond the limit")
    assert blocked.queue_position == 1 and blocked.tenant_queue_position == 1


def test_not_enough_free_gpus_of_the_model(users):
    # nlp fills three H100 nodes, vision the fourth but two GPUs
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="H100",
                                                  gpus_per_node=8, nodes=3))
    submit(users, gpu_model="H100", gpus_per_node=6)
    waiting = refreshed(submit(users, gpu_model="H100", gpus_per_node=4))
    assert waiting.wait_reason == WaitReason.INSUFFICIENT_GPUS
    assert waiting.wait_reason_message == (
        "Needs 4 H100 GPUs on one node; the most free on any healthy H100 node is 2 (2 free in total).")


def test_multi_node_job_that_cannot_be_placed_whole(users):
    submit(users, gpu_model="L40S", gpus_per_node=4)  # takes half of the first L40S node
    submit(users, gpu_model="L40S", gpus_per_node=6)  # most of the second
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="chat-eval", gpu_model="L40S",
                                                  gpus_per_node=8))  # all of the third
    gang = refreshed(submit(users, gpu_model="L40S", gpus_per_node=8, nodes=2))
    assert gang.wait_reason == WaitReason.GANG_UNPLACEABLE
    assert gang.wait_reason_params["fitting_nodes"] == 1
    assert ("Needs 2 L40S nodes with 8 free GPUs each, all at once; nodes with that many free GPUs now: 1"
            in gang.wait_reason_message)
    assert "(14 L40S GPUs free in total)" in gang.wait_reason_message


def test_higher_priority_job_ahead_and_backfill(users):
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="H100",
                                                  gpus_per_node=8, nodes=3, task_type="training",
                                                  max_runtime_minutes=10080))
    submit(users, gpu_model="H100", gpus_per_node=6, task_type="training", max_runtime_minutes=1440)
    big = refreshed(submit(users, gpu_model="H100", gpus_per_node=8, task_type="training"))
    small = refreshed(submit(users, gpu_model="H100", gpus_per_node=2, task_type="test", max_runtime_minutes=4320))
    short = refreshed(submit(users, gpu_model="H100", gpus_per_node=2, task_type="test", max_runtime_minutes=60))
    assert big.wait_reason == WaitReason.INSUFFICIENT_GPUS  # training jobs are not preemptible: no victims
    assert small.status == JobStatus.QUEUED
    assert small.wait_reason == WaitReason.PRIORITY
    assert small.wait_reason_message == (
        f"Job #{big.pk} (priority 80, tenant vision) is ahead in the H100 queue and waits for 8 GPUs (2 free); "
        "this job would fit but would delay it.")
    assert (big.queue_position, small.queue_position) == (1, 2)
    # the short one ends before the big one can start: backfilled, and it says so
    assert short.status != JobStatus.QUEUED
    assert "backfilled" in short.events.get(to_status="admitted").reason
    # the big one knows when: when the 6-GPU job reaches its max runtime
    started = short.events.get(to_status="admitted").at
    assert big.estimated_start is not None
    assert abs((big.estimated_start - started).total_seconds() - 1440 * 60) < 120
    # ... shown as a likely range around it (the engine's calibrated ratios), stored with the queue state
    assert big.earliest_start < big.estimated_start < big.latest_start
    assert big.likely_start.startswith("between ")
    browser = Client()
    browser.force_login(users["alice"])
    assert big.likely_start in browser.get(f"/jobs/{big.pk}/").content.decode()


def test_reason_change_is_recorded_on_the_timeline_once(users):
    submit(users, gpus_per_node=8, command=long_run(999))
    submit(users, username="carol", project="segmentation", gpus_per_node=8, command=long_run(999))
    blocked = submit(users, gpus_per_node=8)
    run_pass()
    run_pass()
    events = blocked.events.filter(kind="wait_reason")
    assert events.count() == 1
    assert events.get().data["code"] == WaitReason.QUOTA_EXHAUSTED


def test_wait_reason_sentence_is_translated_for_the_reader(users):
    from django.utils import translation

    submit(users, gpus_per_node=8, command=long_run(999))
    submit(users, username="carol", project="segmentation", gpus_per_node=8, command=long_run(999))
    blocked = refreshed(submit(users, gpus_per_node=8))
    with translation.override("zh-hans"):  # the reader's language, numbers filled in
        assert blocked.wait_reason_message.startswith(
            "租户 vision 已使用其 16 个 A100 GPU 中的 16 个；该作业还需要 8 个")


def test_a_job_blocked_by_fragmentation_says_so_with_the_numbers():
    """Enough free GPUs in total, none of the nodes holds the job: the reason is the fragmentation."""
    nodes = tuple(engine.NodeSnapshot(i, f"n{i}", "A100", tuple(range(8))) for i in (1, 2, 3))
    running = tuple(engine.RunningJob(10 + i, "t", "A100", (engine.Placement(i, tuple(range(5))),), preemptible=False)
                    for i in (1, 2, 3))  # 3 free on each node: 9 in total
    waiting = (engine.WaitingJob(1, "t", "A100", 4, preemptible=False),)
    result = engine.schedule(engine.Snapshot(nodes=nodes, running=running, waiting=waiting, now=1.0,
                                             quotas=(engine.QuotaSnapshot("t", "A100", 32, 32),)))
    wait = result.wait_for(1)
    assert wait.reason == engine.WaitReason.FRAGMENTED
    assert wait.message == ("9 A100 GPUs are free in total, enough for the 4 this job needs on one node, but they "
                            "are scattered over 3 nodes: the most free on any one node is 3.")
