"""The fake's Deployments, Ingresses and ClusterIP Services, through ``kubectl`` and the official client: the
portal's notebook, service-replica and array shapes created with ``kubectl create``, listed and printed as a real
server prints them, the Deployment controller (pods, status, replacement, scaling, a new template, deletion,
quota refusals) and the readiness and crash-loop injectors."""

from __future__ import annotations

import dataclasses
import json

import yaml
from kubernetes import client

from tests.kubefake.conftest import portal_manifests

#: notebook, service replica (service 77, revision 2, port 8000), array task, as ``workload_manifests`` numbers them
NOTEBOOK, REPLICA, ARRAY_TASK, SERVICE = "gp-200-a0", "gp-201-a0", "gp-202-a0", "gp-svc-77"


def workload_manifests(gpu_limit: int = 64) -> list[dict]:
    """The tenant's objects, then every workload shape's (an ingress host configured), ids 200, 201, 202."""
    from scheduling.executors.kubernetes import manifests  # here, as in conftest: only these tests need the portal

    tenant = [o for o in portal_manifests(gpu_limit) if o["kind"] in ("Namespace", "ResourceQuota", "NetworkPolicy",
                                                                      "PersistentVolumeClaim")]
    specs = [dataclasses.replace(manifests.example_spec(shape), id=200 + number)
             for number, shape in enumerate(manifests.WORKLOAD_EXAMPLES)]
    objects = tenant + [manifests.priority_class(code, 50) for code in sorted({s.task_type for s in specs})]
    for spec in specs:
        objects += manifests.for_job("gp-", spec, "http://portal.example", f"token-{spec.id}", notebook_token="nb",
                                     ingress=manifests.EXAMPLE_INGRESS)
    return objects


def create_all(kubectl, tmp_path, objects) -> list[str]:
    path = tmp_path / "workloads.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return kubectl("create", "-f", path, "-o", "name").split()


def test_kubectl_creates_and_lists_the_new_kinds(kubectl, fake, tmp_path):
    objects = workload_manifests()
    names = create_all(kubectl, tmp_path, objects)
    assert f"deployment.apps/{REPLICA}" in names and f"ingress.networking.k8s.io/{NOTEBOOK}" in names
    assert f"ingress.networking.k8s.io/{SERVICE}" in names and f"service/{SERVICE}" in names

    listed = kubectl("get", "deployments,services,ingresses", "-n", "gp-vision").splitlines()
    text = "\n".join(listed)
    deployment_row = next(line.split() for line in listed if line.startswith(f"deployment.apps/{REPLICA} "))
    assert deployment_row[1:4] == ["0/1", "1", "0"]  # READY, UP-TO-DATE, AVAILABLE: its probe has not passed
    assert "NAME" in listed[0] and "READY" in listed[0] and "UP-TO-DATE" in listed[0]
    service_row = next(line.split() for line in listed if line.startswith(f"service/{SERVICE} "))
    assert service_row[1] == "ClusterIP" and service_row[2].startswith("10.96.") and service_row[4] == "8000/TCP"
    ingress_row = next(line.split() for line in listed if line.startswith(f"ingress.networking.k8s.io/{NOTEBOOK} "))
    assert ingress_row[1:3] == ["nginx", "gpus.example.org"]
    assert "HOSTS" in text and "CLASS" in text

    deployment = kubectl.json("get", "deployment", REPLICA, "-n", "gp-vision")
    assert (deployment["kind"], deployment["apiVersion"]) == ("Deployment", "apps/v1")
    assert deployment["status"]["replicas"] == 1 and "readyReplicas" not in deployment["status"]
    available = next(c for c in deployment["status"]["conditions"] if c["type"] == "Available")
    assert available["status"] == "False" and available["reason"] == "MinimumReplicasUnavailable"
    [pod] = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/service=77")["items"]
    assert pod["metadata"]["name"].startswith(f"{REPLICA}-") and pod["spec"]["nodeName"] == "gpu-03"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["ready"] is False

    fake.ready("gp-vision", REPLICA)
    deployment = kubectl.json("get", "deployment", REPLICA, "-n", "gp-vision")
    assert (deployment["status"]["readyReplicas"], deployment["status"]["availableReplicas"]) == (1, 1)
    assert next(c for c in deployment["status"]["conditions"] if c["type"] == "Available")["status"] == "True"
    assert kubectl("get", "deploy", REPLICA, "-n", "gp-vision", "--no-headers").split()[1] == "1/1"

    ingress = kubectl.json("get", "ingress", SERVICE, "-n", "gp-vision")
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/rewrite-target"] == "/$2"
    array_job = kubectl.json("get", "job", ARRAY_TASK, "-n", "gp-vision")
    assert array_job["metadata"]["labels"]["gpuportal.io/array"] == "55"
    assert len(kubectl.json("get", "all", "-n", "gp-vision")["items"]) >= 6  # deployments are in "all"


def test_the_deployment_controller(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, workload_manifests())
    [first] = fake.deployment_pods("gp-vision", REPLICA)
    kubectl("delete", "pod", first["metadata"]["name"], "-n", "gp-vision")
    [replacement] = fake.deployment_pods("gp-vision", REPLICA)  # the ReplicaSet makes another
    assert replacement["metadata"]["name"] != first["metadata"]["name"]

    kubectl("patch", "deployment", REPLICA, "-n", "gp-vision", "-p", json.dumps({"spec": {"replicas": 2}}))
    assert len(fake.deployment_pods("gp-vision", REPLICA)) == 2
    before = {p["metadata"]["labels"]["pod-template-hash"] for p in fake.deployment_pods("gp-vision", REPLICA)}
    kubectl("patch", "deployment", REPLICA, "-n", "gp-vision", "-p", json.dumps({"spec": {"template": {
        "metadata": {"annotations": {"restarted": "now"}}}}}))
    after = fake.deployment_pods("gp-vision", REPLICA)
    assert len(after) == 2 and {p["metadata"]["labels"]["pod-template-hash"] for p in after}.isdisjoint(before)
    deployment = kubectl.json("get", "deployment", REPLICA, "-n", "gp-vision")
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert deployment["metadata"]["generation"] == 3 and deployment["status"]["updatedReplicas"] == 2

    kubectl("delete", "deployment", REPLICA, "-n", "gp-vision")
    assert fake.deployment_pods("gp-vision", REPLICA) == []
    assert kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/service=77")["items"] == []

    bad = tmp_path / "bad.yaml"
    body = next(o for o in workload_manifests() if o["kind"] == "Deployment")
    body["spec"]["selector"]["matchLabels"]["gpuportal.io/job"] = "999"
    bad.write_text(yaml.safe_dump(body))
    refused = kubectl.run("create", "-f", bad, check=False)
    assert refused.returncode != 0 and "selector` does not match template `labels`" in refused.stderr


def test_crash_loop_and_failing_readiness_as_kubectl_shows_them(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, workload_manifests())
    fake.crash_loop("gp-vision", REPLICA, code=2, restarts=4, log="Traceback: bad config")
    row = kubectl("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/service=77", "--no-headers").split()
    assert row[1:4] == ["0/1", "CrashLoopBackOff", "4"]
    [pod] = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/service=77")["items"]
    status = pod["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 2 and status["restartCount"] == 4
    assert pod["status"]["phase"] == "Running"
    assert kubectl("logs", pod["metadata"]["name"], "-n", "gp-vision") == "Traceback: bad config\n"

    fake.failing_readiness("gp-vision", NOTEBOOK, message="HTTP probe failed with statuscode: 502")
    events = kubectl("get", "events", "-n", "gp-vision")
    assert "Unhealthy" in events and "Readiness probe failed: HTTP probe failed with statuscode: 502" in events
    assert "BackOff" in events
    [notebook_pod] = fake.pods("gp-vision", NOTEBOOK)
    ready = next(c for c in notebook_pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ContainersNotReady"


def test_a_quota_refuses_a_replica_pod_until_it_is_raised(fake, core):
    from scheduling.executors.kubernetes import manifests  # here, as in conftest: only these tests need the portal

    apps = client.AppsV1Api(core.api_client)
    for body in manifests.for_tenant("gp-", "vision", 0):
        fake.create({"Namespace": "namespaces", "ResourceQuota": "resourcequotas",
                     "NetworkPolicy": "networkpolicies"}[body["kind"]], body["metadata"].get("namespace"), body)
    *_shared, _secret, deployment = manifests.for_job("gp-", manifests.example_spec("inference-service"), "http://p",
                                                      "t")
    apps.create_namespaced_deployment("gp-vision", deployment)
    assert fake.deployment_pods("gp-vision", "gp-1234-a0") == []
    [event] = core.list_namespaced_event("gp-vision").items
    assert event.reason == "FailedCreate" and "exceeded quota: gpuportal-gpus" in event.message
    assert event.involved_object.kind == "Deployment"
    core.patch_namespaced_resource_quota("gpuportal-gpus", "gp-vision",
                                         {"spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    assert len(fake.deployment_pods("gp-vision", "gp-1234-a0")) == 1
    listed = apps.list_namespaced_deployment("gp-vision", label_selector="gpuportal.io/service=77")
    assert [d.metadata.name for d in listed.items] == ["gp-1234-a0"] and listed.items[0].status.replicas == 1
    apps.delete_namespaced_deployment("gp-1234-a0", "gp-vision", propagation_policy="Foreground")
    assert fake.deployment_pods("gp-vision", "gp-1234-a0") == []
