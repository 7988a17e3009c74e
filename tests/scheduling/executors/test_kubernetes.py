"""Kubernetes dispatch through the real client over real HTTP, against the fake API server on loopback."""

import json
import urllib.error
import urllib.request
from datetime import timedelta

import kubernetes_validate
import pytest
from django.utils import timezone

from fleet.models import Cluster
from kubefake.validation import same_verdict_as_kubernetes_validate
from scheduling.executors.kubernetes import manifests
from scheduling.executors.kubernetes.sync import ClusterSync
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.models import Job, JobEvent, JobStatus
from scheduling.tasks import dispatch_job
from tenants.models import Quota
from tests.conftest import job_payload, long_run
from tests.scheduling.kube import MODEL, make_cluster

pytestmark = pytest.mark.django_db(transaction=True)


def submit(users, user="alice", **overrides):
    payload = job_payload(gpu_model=MODEL, gpus_per_node=8, command="torchrun train.py")
    if user in ("bob", "frank"):
        payload.update(tenant="nlp", project="llm-pretrain")
    payload.update(overrides)
    return Job.objects.get(pk=submission.submit_job(users[user], payload).pk)


def test_every_manifest_shape_validates_strictly():
    prefix = "gp-"
    objects = [manifests.namespace(prefix, "vision"), manifests.resource_quota(prefix, "vision", 32),
               manifests.network_policy(prefix, "vision"), manifests.storage_claim(prefix, "vision", 500, "cephfs"),
               manifests.priority_class("inference", 100)]
    for shape in manifests.EXAMPLES:
        objects += manifests.for_job(prefix, manifests.example_spec(shape), "http://portal", "t", data_claim=True)
    for body in objects:
        assert kubernetes_validate.validate(body, "1.30", strict=True)
        assert same_verdict_as_kubernetes_validate(body)
    broken = {**objects[-1], "spec": {**objects[-1]["spec"], "backoffLimitt": 0}}
    assert same_verdict_as_kubernetes_validate(broken)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30", strict=True)


def test_single_node_job_runs_pinned_and_succeeds(kube, users):
    job = submit(users, gpus_per_node=4)
    assert job.status == JobStatus.DISPATCHING and job.cluster == kube.cluster
    namespace, name = kube.objects_of(job)
    assert namespace == "gp-vision"
    k8s_job = kube.fake.get("jobs", namespace, name)
    assert k8s_job["spec"]["backoffLimit"] == 0 and k8s_job["spec"]["activeDeadlineSeconds"] == 120 * 60
    pod_spec = k8s_job["spec"]["template"]["spec"]
    [term] = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    placed = sorted({a.gpu.node.name for a in job.allocations.select_related("gpu__node")})
    assert term["matchExpressions"][0]["values"] == placed
    assert pod_spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    labels = k8s_job["metadata"]["labels"]
    assert labels["gpuportal.io/job"] == str(job.pk) and labels["gpuportal.io/tenant"] == "vision"
    ns = kube.fake.get("namespaces", None, "gp-vision")
    assert ns["metadata"]["labels"]["gpuportal.io/tenant"] == "vision"
    limits = sum(Quota.objects.filter(tenant__name="vision").values_list("limit_gpus", flat=True))
    assert kube.fake.get("resourcequotas", "gp-vision", "gpuportal-gpus")["spec"]["hard"] == {
        "requests.nvidia.com/gpu": str(limits)}  # the tenant's limits, enforced again by Kubernetes
    policy = kube.fake.get("networkpolicies", "gp-vision", "gpuportal-tenant-isolation")
    allowed = policy["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
    assert allowed == {"gpuportal.io/tenant": "vision"}
    assert kube.fake.get("priorityclasses", None, "gpuportal-research")["preemptionPolicy"] == "Never"

    kube.sync()
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    kube.fake.succeed(namespace, name)
    kube.sync()
    done = Job.objects.get(pk=job.pk)
    assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0


def test_multi_node_job_is_an_indexed_job_with_a_headless_service(kube, users):
    job = submit(users, nodes=2)
    namespace, name = kube.objects_of(job)
    k8s_job = kube.fake.get("jobs", namespace, name)
    spec = k8s_job["spec"]
    assert (spec["completionMode"], spec["parallelism"], spec["completions"]) == ("Indexed", 2, 2)
    service = kube.fake.get("services", namespace, name)
    assert service["spec"]["clusterIP"] == "None"
    env = {e["name"]: e for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"]["value"] == f"{name}-0.{name}" and env["WORLD_SIZE"]["value"] == "16"
    assert env["NPROC_PER_NODE"]["value"] == "8"
    assert "job-completion-index" in env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    pods = kube.fake.pods(namespace, name)
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(Job.objects.get(pk=job.pk).executor_state["nodes"])
    kube.fake.pods(namespace, name)  # both running: the gang is running
    kube.sync()
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING


def test_gang_is_running_only_when_every_pod_runs(kube, users):
    kube.fake.start_pods = False
    job = submit(users, nodes=2)
    namespace, name = kube.objects_of(job)
    first = kube.fake.pods(namespace, name)[0]
    with kube.fake.lock:
        kube.fake._set_container(kube.fake.objects[("pods", namespace, first["metadata"]["name"])], running=True)
    kube.sync()
    assert Job.objects.get(pk=job.pk).status == JobStatus.DISPATCHING
    kube.fake.run(namespace, name)
    kube.sync()
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING


def test_duplicate_dispatch_creates_nothing_new(kube, users):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    before = len(kube.fake.objects)
    state = Job.objects.get(pk=job.pk)
    from scheduling.executors.kubernetes import KubernetesExecutor

    again = KubernetesExecutor(kube.cluster).dispatch(state)  # a re-run of the task after a lost reply
    assert again["already_existed"] is True and again["object"] == name
    assert len(kube.fake.objects) == before
    assert dispatch_job.apply(args=[job.pk]).get() == "skipped"  # no longer admitted: nothing to do


def test_api_500s_are_retried_then_succeed(kube, users):
    kube.fake.fail_next(2, code=500, method="POST", path="/jobs")
    job = submit(users)
    assert job.status == JobStatus.DISPATCHING
    posts = [p for m, p in kube.fake.requests if m == "POST" and p.endswith("/jobs")]
    assert len(posts) == 3


def test_dispatch_fails_after_the_last_retry_with_the_api_message(kube, users):
    kube.fake.fail_next(10, code=503, method="POST", path="/jobs")
    job = submit(users)
    assert job.status == JobStatus.FAILED and job.failure_category == "dispatch"
    assert "etcdserver: request timed out" in job.failure_message and "503" in job.failure_message


def test_cancel_and_preemption_delete_the_job_with_foreground_propagation(kube, users, api):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    job_actions.cancel_job(users["alice"], job)
    assert ("jobs", namespace, name, "Foreground") in kube.fake.deletions
    assert ("jobs", namespace, name) not in kube.fake.objects
    assert Job.objects.get(pk=job.pk).events.filter(kind=JobEvent.Kind.EXECUTOR, reason__contains="foreground").exists()

    Quota.objects.filter(tenant__name="vision", gpu_model=MODEL).update(guaranteed_gpus=0, limit_gpus=32)
    borrowers = [submit(users, task_type="research") for _ in range(4)]  # vision borrows all 32 H200
    assert all(b.status == JobStatus.DISPATCHING for b in borrowers)
    submit(users, user="bob")  # nlp reclaims its guarantee
    victims = [b for b in borrowers if Job.objects.get(pk=b.pk).retry_count == 1]
    assert victims
    ns, victim_name = "gp-vision", f"gp-{victims[0].pk}-a0"
    assert ("jobs", ns, victim_name, "Foreground") in kube.fake.deletions


def test_two_clusters_each_get_their_own_jobs(kube, users, tmp_path):
    other = make_cluster(tmp_path, "kube-b", node_count=2, model="B200")
    try:
        on_a = submit(users)
        on_b = submit(users, user="bob", gpu_model="B200")  # only kube-b has B200
        assert (on_a.cluster.name, on_b.cluster.name) == ("kube-a", "kube-b")
        namespace, name = on_b.executor_state["namespace"], on_b.executor_state["object"]
        assert namespace == "gp-nlp"
        assert ("jobs", namespace, name) in other.fake.objects
        assert ("jobs", namespace, name) not in kube.fake.objects
        ClusterSync(other.cluster).resync()
        assert Job.objects.get(pk=on_b.pk).status == JobStatus.RUNNING
    finally:
        other.fake.stop()


def test_fake_server_refuses_invalid_bodies_with_422_like_a_real_api_server(kube):
    url = kube.fake.start()
    request = urllib.request.Request(f"{url}/api/v1/namespaces", method="POST", data=json.dumps({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {"finalizerz": []}}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)  # noqa: S310 - loopback
    body = json.loads(refused.value.read())
    assert refused.value.code == 422 and body["kind"] == "Status" and body["reason"] == "Invalid"
    kube.fake.stop()


def test_cluster_connection_details_are_not_in_the_api(kube, api, users):
    job = submit(users)
    text = json.dumps(api("admin").get(f"/api/jobs/{job.pk}/").json())
    assert "kubeconfig" not in text and str(kube.cluster.kubeconfig_path) not in text
    assert Cluster.objects.get(pk=kube.cluster.pk).kubeconfig_path


def test_k8s_manifests_command_prints_valid_yaml(kube, users, capsys):
    import yaml
    from django.core.management import call_command

    call_command("k8s_manifests", "--example", "multi-node")
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in documents][-3:] == ["Secret", "Service", "Job"]
    for document in documents:
        kubernetes_validate.validate(document, "1.30", strict=True)
    job = submit(users, nodes=2)
    call_command("k8s_manifests", "--job", str(job.pk))
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    k8s_job = printed[-1]
    assert k8s_job["metadata"]["name"] == f"gp-{job.pk}-a0" and k8s_job["spec"]["parallelism"] == 2
    waiting = submit(users, user="bob", nodes=4)  # 4 nodes are not free: it waits, no placement yet
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no placement yet"):
        call_command("k8s_manifests", "--job", str(waiting.pk))


def test_fake_server_selectors_patch_and_status_bodies(kube):
    from kubernetes import client

    from scheduling.executors.kubernetes.connection import api_client

    core = client.CoreV1Api(api_client(kube.cluster))
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t1", "labels": {"a": "1"}}})
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t2", "labels": {"a": "2"}}})
    assert [n.metadata.name for n in core.list_namespace(label_selector="a=2").items] == ["t2"]
    assert [n.metadata.name for n in core.list_namespace(label_selector="a in (1,3)").items] == ["t1"]
    assert [n.metadata.name for n in core.list_namespace(field_selector="metadata.name=t1").items] == ["t1"]
    patched = core.patch_namespace("t1", {"metadata": {"labels": {"b": "x"}}})
    assert patched.metadata.labels == {"a": "1", "b": "x"}
    assert int(patched.metadata.resource_version) > 0 and patched.metadata.uid and patched.metadata.creation_timestamp
    with pytest.raises(client.ApiException) as missing:
        core.read_namespace("nope")
    body = json.loads(missing.value.body)
    assert missing.value.status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    with pytest.raises(client.ApiException) as no_namespace:
        core.create_namespaced_secret("nope", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    assert no_namespace.value.status == 404
    assert client.VersionApi(api_client(kube.cluster)).get_code().minor == "30"


def test_a_changed_limit_reaches_the_resource_quota_at_the_next_dispatch(kube, users):
    submit(users, gpus_per_node=1)
    Quota.objects.filter(tenant__name="vision", gpu_model=MODEL).update(limit_gpus=24)
    submit(users, gpus_per_node=1)
    limits = sum(Quota.objects.filter(tenant__name="vision").values_list("limit_gpus", flat=True))
    assert kube.fake.get("resourcequotas", "gp-vision", "gpuportal-gpus")["spec"]["hard"] == {
        "requests.nvidia.com/gpu": str(limits)}


def test_a_job_admitted_under_an_approved_burst_is_created_by_the_cluster(kube, users, api):
    """The namespace's ResourceQuota carries the burst too: the fake refuses pods beyond it, as Kubernetes does."""
    Quota.objects.filter(tenant__name="vision").exclude(gpu_model=MODEL).delete()
    Quota.objects.filter(tenant__name="vision", gpu_model=MODEL).update(guaranteed_gpus=8, limit_gpus=8)
    first = submit(users, command=long_run(999))
    assert first.status == JobStatus.DISPATCHING
    waiting = submit(users)
    assert waiting.status == JobStatus.QUEUED  # 8 of 8 held
    now = timezone.now()
    created = api("alice").post("/api/priority-requests/", {
        "kind": "burst", "tenant": "vision", "gpu_model": MODEL, "gpus": 8,
        "start": (now - timedelta(minutes=1)).isoformat(), "end": (now + timedelta(hours=4)).isoformat(),
        "justification": "Eight more GPUs for the deadline run, four hours."}, format="json").json()
    assert api("admin").post(f"/api/priority-requests/{created['id']}/approve/", {}, format="json").status_code == 200
    waiting.refresh_from_db()
    assert waiting.status == JobStatus.DISPATCHING  # admitted under the burst and sent
    hard = kube.fake.get("resourcequotas", "gp-vision", "gpuportal-gpus")["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "16"}  # limit 8 + burst 8
    namespace, name = kube.objects_of(waiting)
    assert len(kube.fake.pods(namespace, name)) == 1  # the pod exists: the quota let it in
    kube.sync()
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.RUNNING
