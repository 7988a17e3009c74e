"""ResourceQuota on pod creation, as the real API server's quota admission and quota and job controllers do it,
driven through the official ``kubernetes`` client."""

import json

import pytest
from kubernetes import client

from kubefake.quota import Quantity

NS = "gp-vision"


def gpu_pod(name: str, gpus: int, **resources) -> dict:
    """The portal's container shape: ``nvidia.com/gpu`` in limits only."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.local/pytorch:2.4",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus), **resources.pop("limits", {})}, **resources}}]}}


def gpu_job(name: str, gpus: int, parallelism: int = 1) -> dict:
    spec = gpu_pod("", gpus)["spec"]
    job_spec = {"backoffLimit": 0, "parallelism": parallelism, "completions": parallelism,
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    if parallelism > 1:
        job_spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": job_spec}


def quota(hard: dict, name: str = "gpuportal-gpus", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": {"hard": hard, **spec}}


@pytest.fixture
def tenant(core):
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    core.create_namespaced_resource_quota(NS, quota({"requests.nvidia.com/gpu": "8"}))
    return NS


def refused(call) -> tuple[dict, client.ApiException]:
    with pytest.raises(client.ApiException) as caught:
        call()
    return json.loads(caught.value.body), caught.value


def pods(core, **selector) -> list:
    return core.list_namespaced_pod(NS, **selector).items


def failed_creates(core, job: str) -> list:
    return [e for e in core.list_namespaced_event(NS, field_selector=f"involvedObject.name={job}").items
            if e.reason == "FailedCreate"]


def test_a_pod_over_the_quota_is_refused_with_the_real_message(core, tenant, fake):
    first = core.create_namespaced_pod(NS, gpu_pod("first", 8))
    assert first.spec.containers[0].resources.requests == {"nvidia.com/gpu": "8"}  # requests default to limits
    body, error = refused(lambda: core.create_namespaced_pod(NS, gpu_pod("second", 4)))
    assert error.status == 403
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "Forbidden", 403)
    assert body["message"] == ('pods "second" is forbidden: exceeded quota: gpuportal-gpus, requested: '
                               'requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, '
                               'limited: requests.nvidia.com/gpu=8')
    assert body["details"] == {"name": "second", "kind": "pods"}
    assert [p.metadata.name for p in pods(core)] == ["first"]
    used = core.read_namespaced_resource_quota("gpuportal-gpus", NS).status
    assert (used.hard, used.used) == ({"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "8"})
    assert fake.quota_used(NS) == {"requests.nvidia.com/gpu": "8"}
    core.create_namespaced_pod(NS, gpu_pod("cpu-only", 0))  # asks no more: admitted at a full quota
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "no-quota"}})
    core.create_namespaced_pod("no-quota", gpu_pod("big", 64))  # quotas are per namespace


def test_requests_limits_and_counts_of_every_kind_of_key(core, fake):
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    core.create_namespaced_resource_quota(NS, quota(
        {"requests.cpu": "2", "limits.memory": "4Gi", "memory": "3Gi", "pods": "3", "count/pods": "10",
         "requests.nvidia.com/gpu": "16"}, name="compute"))
    resources = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1536Mi", "cpu": "1"}}
    core.create_namespaced_pod(NS, gpu_pod("a", 2, **resources))
    core.create_namespaced_pod(NS, gpu_pod("b", 2, **resources))
    status = core.read_namespaced_resource_quota("compute", NS).status
    assert status.used == {"requests.cpu": "1", "limits.memory": "3Gi", "memory": "2Gi", "pods": "2",
                           "count/pods": "2", "requests.nvidia.com/gpu": "4"}
    body, error = refused(lambda: core.create_namespaced_pod(NS, gpu_pod("c", 1, requests={"cpu": "1100m"},
                                                                          limits={"cpu": "2", "memory": "2Gi"})))
    assert error.status == 403 and body["message"] == (
        'pods "c" is forbidden: exceeded quota: compute, requested: limits.memory=2Gi,memory=2Gi,requests.cpu=1100m, '
        'used: limits.memory=3Gi,memory=2Gi,requests.cpu=1, limited: limits.memory=4Gi,memory=3Gi,requests.cpu=2')
    body, _error = refused(lambda: core.create_namespaced_pod(NS, gpu_pod("d", 1)))  # no cpu, no memory
    assert body["message"] == ('pods "d" is forbidden: failed quota: compute: must specify limits.memory for: main; '
                               'memory for: main; requests.cpu for: main')
    core.create_namespaced_pod(NS, gpu_pod("e", 1, limits={"cpu": "100m", "memory": "100Mi"}))  # requests = limits
    body, _error = refused(lambda: core.create_namespaced_pod(NS, gpu_pod("f", 1, limits={"cpu": "1m",
                                                                                           "memory": "1Mi"})))
    assert 'requested: pods=1, used: pods=3, limited: pods=3' in body["message"]
    with fake.lock:  # a pod that ended no longer counts, except for count/pods
        fake._set_container(fake.objects[("pods", NS, "a")], terminated={"exitCode": 0, "reason": "Completed"})
    used = fake.quota_used(NS)
    assert (used["pods"], used["count/pods"], used["requests.cpu"], used["memory"]) == ("2", "3", "600m", "1124Mi")


def test_a_job_refused_by_the_quota_gets_a_failed_create_event_and_starts_when_the_quota_is_raised(
        core, batch, tenant, fake):
    batch.create_namespaced_job(NS, gpu_job("big", 16))
    assert pods(core) == []
    [event] = failed_creates(core, "big")
    assert (event.type, event.involved_object.kind, event.involved_object.api_version) == ("Warning", "Job", "batch/v1")
    assert event.involved_object.uid == batch.read_namespaced_job("big", NS).metadata.uid
    assert event.source.component == "job-controller" and event.count == 1
    assert event.message.startswith('Error creating: pods "big-')
    assert event.message.endswith('" is forbidden: exceeded quota: gpuportal-gpus, requested: '
                                  'requests.nvidia.com/gpu=16, used: requests.nvidia.com/gpu=0, '
                                  'limited: requests.nvidia.com/gpu=8')
    assert batch.read_namespaced_job("big", NS).status.active == 0

    core.patch_namespaced_resource_quota("gpuportal-gpus", NS, {"spec": {"hard": {"requests.nvidia.com/gpu": "12"}}})
    assert pods(core) == []  # tried again: still too small, refused for a pod of another (generated) name
    assert [e.message.split('" is forbidden')[1] for e in failed_creates(core, "big")] == [
        ": exceeded quota: gpuportal-gpus, requested: requests.nvidia.com/gpu=16, used: requests.nvidia.com/gpu=0, "
        f"limited: requests.nvidia.com/gpu={limit}" for limit in (8, 12)]

    core.patch_namespaced_resource_quota("gpuportal-gpus", NS, {"spec": {"hard": {"requests.nvidia.com/gpu": "16"}}})
    [pod] = pods(core)
    assert pod.metadata.labels["job-name"] == "big" and pod.status.phase == "Running"
    assert batch.read_namespaced_job("big", NS).status.active == 1
    assert fake.quota_used(NS) == {"requests.nvidia.com/gpu": "16"}
    assert len(failed_creates(core, "big")) == 2  # no more refusals


@pytest.mark.parametrize("how", ["replace", "delete"])
def test_a_replaced_or_deleted_quota_lets_a_waiting_job_try_again(core, batch, tenant, how):
    batch.create_namespaced_job(NS, gpu_job("ranks", 8, parallelism=2))
    assert len(pods(core)) == 1 and len(failed_creates(core, "ranks")) == 1  # rank 0 fits, rank 1 does not
    if how == "replace":
        current = core.read_namespaced_resource_quota("gpuportal-gpus", NS)
        current.spec.hard = {"requests.nvidia.com/gpu": "16"}
        core.replace_namespaced_resource_quota("gpuportal-gpus", NS, current)
    else:
        core.delete_namespaced_resource_quota("gpuportal-gpus", NS)
    ranks = sorted(p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in pods(core))
    assert ranks == ["0", "1"] and batch.read_namespaced_job("ranks", NS).status.active == 2


def test_every_quota_of_the_namespace_must_have_room(core, batch, tenant):
    batch.create_namespaced_job(NS, gpu_job("ranks", 8, parallelism=2))
    core.create_namespaced_resource_quota(NS, quota({"requests.nvidia.com/gpu": "4"}, name="a-smaller-one"))
    core.patch_namespaced_resource_quota("gpuportal-gpus", NS, {"spec": {"hard": {"requests.nvidia.com/gpu": "16"}}})
    assert len(pods(core)) == 1  # the new quota is over already (a quota never evicts), and it is the one named
    assert failed_creates(core, "ranks")[-1].message.endswith(
        '" is forbidden: exceeded quota: a-smaller-one, requested: requests.nvidia.com/gpu=8, '
        'used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=4')


def test_pods_of_finished_jobs_do_not_count(core, batch, tenant, fake):
    batch.create_namespaced_job(NS, gpu_job("first", 8))
    batch.create_namespaced_job(NS, gpu_job("second", 8))
    assert [p.metadata.labels["job-name"] for p in pods(core)] == ["first"]
    assert len(failed_creates(core, "second")) == 1
    fake.succeed(NS, "first")  # its pod is Succeeded: the room is back, the waiting job gets its pod
    running = [p.metadata.labels["job-name"] for p in pods(core) if p.status.phase == "Running"]
    assert running == ["second"] and fake.quota_used(NS) == {"requests.nvidia.com/gpu": "8"}
    batch.create_namespaced_job(NS, gpu_job("third", 8))
    fake.exit(NS, "second", code=1)  # Failed does not count either
    assert [p.metadata.labels["job-name"] for p in pods(core) if p.status.phase == "Running"] == ["third"]
    batch.create_namespaced_job(NS, gpu_job("fourth", 8))
    core.delete_namespaced_pod(pods(core, label_selector="job-name=third")[0].metadata.name, NS)  # deleted: gone
    assert [p.metadata.labels["job-name"] for p in pods(core) if p.status.phase == "Running"] == ["fourth"]
    batch.create_namespaced_job(NS, gpu_job("fifth", 8))
    batch.delete_namespaced_job("fourth", NS, propagation_policy="Foreground")  # with its pods
    assert [p.metadata.labels["job-name"] for p in pods(core) if p.status.phase == "Running"] == ["fifth"]


def test_a_deleted_or_finished_job_stops_trying(core, batch, tenant, fake):
    batch.create_namespaced_job(NS, gpu_job("gone", 16))
    batch.create_namespaced_job(NS, gpu_job("timed-out", 16))
    batch.delete_namespaced_job("gone", NS)
    fake.deadline_exceeded(NS, "timed-out")
    core.patch_namespaced_resource_quota("gpuportal-gpus", NS, {"spec": {"hard": {"requests.nvidia.com/gpu": "64"}}})
    assert pods(core) == [] and fake._pending == {}


def test_scoped_quotas_count_only_the_pods_they_match(core, tenant):
    core.create_namespaced_resource_quota(NS, quota({"pods": "1"}, name="notebooks", scopeSelector={
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["gpuportal-notebook"]}]}))
    notebook = gpu_pod("nb-1", 0)
    notebook["spec"]["priorityClassName"] = "gpuportal-notebook"
    core.create_namespaced_pod(NS, notebook)
    core.create_namespaced_pod(NS, gpu_pod("training", 1))  # not a notebook: not counted by that quota
    body, _error = refused(lambda: core.create_namespaced_pod(NS, {**notebook, "metadata": {"name": "nb-2"}}))
    assert "exceeded quota: notebooks, requested: pods=1, used: pods=1, limited: pods=1" in body["message"]
    assert core.read_namespaced_resource_quota("notebooks", NS).status.used == {"pods": "1"}


def test_quota_validation_and_status_like_the_real_api_server(core, tenant):
    body, error = refused(lambda: core.create_namespaced_resource_quota(NS, quota({"gpus": "4"}, name="bad")))
    assert error.status == 422 and body["reason"] == "Invalid"
    assert body["message"] == ('ResourceQuota "bad" is invalid: spec.hard[gpus]: Invalid value: "gpus": must be a '
                               'standard resource for quota')
    _body, error = refused(lambda: core.create_namespaced_resource_quota(NS, quota({"requests.cpu": "lots"})))
    assert error.status == 422
    created = core.create_namespaced_resource_quota(NS, {**quota({"requests.memory": "1024Mi", "cpu": "1000m"},
                                                                 name="canonical"), "status": {"used": {"cpu": "99"}}})
    assert created.status is None  # the client's status is dropped; the quota controller fills it
    status = core.read_namespaced_resource_quota("canonical", NS).status
    assert (status.hard, status.used) == ({"requests.memory": "1Gi", "cpu": "1"}, {"requests.memory": "0", "cpu": "0"})


@pytest.mark.parametrize(("text", "canonical"), [
    ("4", "4"), ("500m", "500m"), ("1000m", "1"), ("1500m", "1500m"), ("0.5", "500m"), ("64Gi", "64Gi"),
    ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("512", "512"), ("2048", "2048"), ("16000", "16k"), ("1e3", "1e3"),
    ("1.5e3", "1500"), ("100M", "100M"), ("0", "0"), ("1Ki", "1Ki"), ("0.1m", "100u"), ("1n", "1n"), ("2E", "2E")])
def test_quantities_print_in_their_canonical_form(text, canonical):
    assert str(Quantity.parse(text)) == canonical


def test_quantity_sums_keep_the_first_format():
    assert str(Quantity.parse("512Mi") + Quantity.parse("512Mi")) == "1Gi"
    assert str(Quantity.parse("0") + Quantity.parse("1Gi")) == "1Gi"  # a zero takes the other's format
    assert str(Quantity.parse("1G") + Quantity.parse("1Gi")) == "2073741824"
    assert str(Quantity.parse("250m") + Quantity.parse("750m")) == "1"
    with pytest.raises(ValueError, match="quantities must match"):
        Quantity.parse("12 GB")
