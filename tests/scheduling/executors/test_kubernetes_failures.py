"""Every failure category end to end on Kubernetes: inject in the fake API server -> classified -> shown;
infrastructure failures retried away from the node; progress, checkpoints and the job token; the watch."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import Cluster, Node
from scheduling.executors.kubernetes.sync import ClusterSync
from scheduling.jobs import tokens as job_tokens
from scheduling.models import Job, JobStatus
from tests.scheduling.executors.test_kubernetes import submit

pytestmark = pytest.mark.django_db(transaction=True)


def failed(kube, job, client=None):
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    page = ""
    if client is not None:
        client.login(username="alice", password="demo")
        page = client.get(f"/jobs/{job.pk}/").content.decode()
    return job, page


def test_out_of_memory(kube, users, client):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    kube.fake.oom(namespace, name)
    job, page = failed(kube, job, client)
    assert (job.status, job.failure_category, job.exit_code) == (JobStatus.FAILED, "out_of_memory", 137)
    assert "OOMKilled" in job.failure_message and "Out of memory" in page and "Ask for more memory" in page


def test_gpu_out_of_memory_in_the_log(kube, users):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    kube.fake.exit(namespace, name, code=1, log="step 10\ntorch.OutOfMemoryError: CUDA out of memory. Tried to "
                                                "allocate 2.00 GiB")
    job, _page = failed(kube, job)
    assert job.failure_category == "out_of_memory" and "CUDA out of memory" in job.failure_message


def test_image_pull_error(kube, users, client):
    job = submit(users, image="registry.local/does-not-exist:1")
    namespace, name = kube.objects_of(job)
    kube.fake.image_pull_error(namespace, name)
    job, page = failed(kube, job, client)
    assert job.failure_category == "image" and "ErrImagePull" in job.failure_message
    assert "Image / environment" in page and "registry" in page


def test_missing_cuda_library(kube, users):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    kube.fake.exit(namespace, name, code=1, log="ImportError: libcudart.so.12: cannot open shared object file")
    job, _page = failed(kube, job)
    assert job.failure_category == "image" and "libcudart" in job.failure_message


def test_node_fault_is_retried_away_from_the_node_and_resumes_from_the_checkpoint(kube, users, client):
    job = submit(users)
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.RUNNING
    from scheduling.jobs.progress import record_report

    record_report(job, {"step": 12000, "total": 50000, "checkpoint": {"path": "/data/ckpt/12000.pt", "step": 12000}})
    node = job.executor_state["nodes"][0]
    kube.fake.node_not_ready(node)
    kube.sync()
    retried = Job.objects.get(pk=job.pk)
    assert retried.retry_count == 1
    assert retried.status in (JobStatus.QUEUED, JobStatus.ADMITTED, JobStatus.DISPATCHING)
    event = retried.events.get(to_status=JobStatus.QUEUED, from_status=JobStatus.RUNNING)
    assert f"away from {node}" in event.reason and "/data/ckpt/12000.pt" in event.reason
    assert Node.objects.get(name=node).pk in retried.executor_state["avoid_nodes"]
    if retried.status == JobStatus.DISPATCHING:  # placed again at once on another node, from the checkpoint
        assert node not in retried.executor_state["nodes"]
        namespace, name = retried.executor_state["namespace"], retried.executor_state["object"]
        assert name.endswith("-a1")
        env = {e["name"]: e.get("value") for e in kube.fake.get("jobs", namespace, name)["spec"]["template"]["spec"][
            "containers"][0]["env"]}
        assert env["GPUPORTAL_RESUME_FROM"] == "/data/ckpt/12000.pt"
    client.login(username="alice", password="demo")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    first = page.split('id="attempt-1"', 1)[1].split("</li>", 1)[0]
    assert 'title="node_fault">Node fault<' in first and "retried automatically up to 2 times" in page


def test_eviction_is_a_node_fault_and_user_errors_are_not_retried(kube, users):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    kube.fake.evict(namespace, name)
    kube.sync()
    assert Job.objects.get(pk=job.pk).retry_count == 1
    other = submit(users, user="bob")
    namespace, name = kube.objects_of(other)
    kube.fake.exit(namespace, name, code=3, log="Traceback (most recent call last):\nValueError: bad config")
    other, _page = failed(kube, other)
    assert other.status == JobStatus.FAILED and other.failure_category == "exit_code" and other.retry_count == 0
    assert other.exit_code == 3 and "ValueError: bad config" in other.executor_state["diagnosis"]["evidence"][
        "log_tail"][-1]


def test_gpu_fault_reported_by_the_node_agent(kube, users):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    node = Job.objects.get(pk=job.pk).executor_state["nodes"][0]
    Job.objects.filter(pk=job.pk).update(executor_state={
        **Job.objects.get(pk=job.pk).executor_state, "fault": {
            "category": "gpu_fault", "node": node, "message": "XID 79: GPU has fallen off the bus", "gpu_id": 1}})
    kube.fake.exit(namespace, name, code=134, log="CUDA error: unspecified launch failure")
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    assert job.retry_count == 1 and job.events.filter(reason__contains="XID 79").exists()


def test_cross_node_communication(kube, users):
    job = submit(users, nodes=2, task_type="evaluation")
    Job.objects.filter(pk=job.pk).update(retry_count=2)  # retries used up: the failure is final
    namespace, name = kube.objects_of(job)
    kube.fake.exit(namespace, name, code=1, index=1, log="NCCL WARN NET/IB : Got completion with error 12\n"
                                                         "Watchdog caught collective operation timeout")
    job, _page = failed(kube, job)
    assert job.failure_category == "communication" and "NCCL WARN NET/IB" in job.failure_message
    assert "Watchdog" in "\n".join(job.executor_state["diagnosis"]["evidence"]["log_tail"])


def test_one_rank_failing_while_peers_hang_is_communication(kube, users):
    job = submit(users, nodes=2)
    Job.objects.filter(pk=job.pk).update(retry_count=2)
    namespace, name = kube.objects_of(job)
    kube.fake.exit(namespace, name, code=1, index=0)  # rank 1 keeps running, waiting for rank 0
    job, _page = failed(kube, job)
    assert job.failure_category == "communication" and "kept waiting" in job.failure_message


def test_deadline_exceeded_is_a_timeout(kube, users):
    job = submit(users)
    kube.sync()
    namespace, name = kube.objects_of(job)
    kube.fake.deadline_exceeded(namespace, name)
    job, _page = failed(kube, job)
    assert job.failure_category == "timeout" and "max runtime" in job.failure_message


def test_preempted_by_our_scheduler_names_the_preemptor(kube, users):
    from tenants.models import Quota

    Quota.objects.filter(tenant__name="vision", gpu_model="H200").update(guaranteed_gpus=0, limit_gpus=32)
    borrowers = [submit(users) for _ in range(4)]
    reclaimer = submit(users, user="bob")
    victim = next(Job.objects.get(pk=b.pk) for b in borrowers if Job.objects.get(pk=b.pk).retry_count)
    event = victim.events.filter(to_status=JobStatus.PREEMPTED).order_by("at", "id").first()
    assert "tenant nlp" in event.reason and event.data["preemptor"] == reclaimer.pk


def test_progress_reports_with_the_job_token(kube, users, client, api):
    job = submit(users)
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    secret = kube.fake.get("secrets", "gp-vision", f"gp-{job.pk}-a0-token")
    import base64

    token = base64.b64decode(secret["data"]["token"]).decode()
    assert token == job_tokens.token_for(job)
    anonymous = client.__class__()
    url = f"/api/jobs/{job.pk}/report/"
    ok = anonymous.post(url, {"step": 300, "total": 1000, "message": "epoch 3",
                              "checkpoint": {"path": "s3://ckpt/300.pt", "size_bytes": 10 ** 9, "step": 300},
                              "artifacts": [{"name": "metrics", "uri": "s3://runs/metrics.json"}]},
                        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ok.status_code == 200, ok.content
    bad = anonymous.post(url, {"step": 5, "total": 2}, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")
    assert bad.status_code == 400 and "step" in bad.json()
    other = submit(users, user="bob")
    assert anonymous.post(f"/api/jobs/{other.pk}/report/", {"step": 1}, content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403  # one job only
    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(hours=1))
    client.login(username="alice", password="demo")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Step 300 of 1000" in page and "estimated finish" in page and "s3://ckpt/300.pt" in page
    assert "s3://runs/metrics.json" in page
    from scheduling.jobs import actions as job_actions

    job_actions.cancel_job(users["alice"], Job.objects.get(pk=job.pk))
    assert anonymous.post(url, {"step": 400}, content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403  # expired with the job


def test_watch_resumes_after_a_restart_and_relists_on_410(kube, users):
    job = submit(users)
    cluster = Cluster.objects.get(pk=kube.cluster.pk)
    first = ClusterSync(cluster).watch(0.3)  # lists, reconciles, stores the resourceVersion
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    stored = Cluster.objects.get(pk=cluster.pk).watch_resource_version
    assert stored and first.relists == 0
    namespace, name = kube.objects_of(job)
    kube.fake.succeed(namespace, name)  # happens while no worker watches
    restarted = ClusterSync(Cluster.objects.get(pk=cluster.pk)).watch(0.3)
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    assert restarted.relists == 0
    second = submit(users)
    kube.fake.compact()  # the stored resourceVersion is now too old
    namespace, name = kube.objects_of(second)
    kube.fake.oom(namespace, name)
    report = ClusterSync(Cluster.objects.get(pk=cluster.pk)).watch(0.3)
    assert report.relists == 1 and Job.objects.get(pk=second.pk).failure_category == "out_of_memory"
    sync = ClusterSync(Cluster.objects.get(pk=cluster.pk))
    sync.listed = True  # a watch that trusts its stored version: the server answers 410, it relists
    third = submit(users)
    kube.fake.compact()
    namespace, name = kube.objects_of(third)
    kube.fake.succeed(namespace, name)
    assert sync.watch(0.3).relists == 1
    assert Job.objects.get(pk=third.pk).status == JobStatus.SUCCEEDED
