"""Named ports on Kubernetes: the job's Service exposes them (a ClusterIP Service of its own for one node, the
notebook's Service, the headless Service of a job that spans nodes, whose first rank serves them), the main
container declares them and learns their numbers, every shape validates strictly and ``kubectl`` creates it on
the fake API server, and the portal's proxy is pointed at the Service."""

import dataclasses
import json

import kubernetes_validate
import pytest
import yaml

from fleet.models import Cluster
from kubefake.server import FakeKubernetes
from kubefake.validation import same_verdict_as_kubernetes_validate
from scheduling.executors.kubernetes import KubernetesExecutor, manifests
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload
from tests.kubefake.conftest import KUBECTL, make_kubectl
from tests.scheduling.kube import MODEL

PORTS = (("tensorboard", 6006), ("ui", 8080))


def _shapes() -> dict[str, manifests.JobSpec]:
    single = manifests.example_spec("named-ports")
    return {"single-node": single,
            "multi-node": dataclasses.replace(manifests.example_spec("multi-node"), id=1301, ports=PORTS),
            "notebook": dataclasses.replace(manifests.example_spec("notebook"), id=1302, ports=PORTS),
            "array": dataclasses.replace(manifests.example_spec("array"), id=1303, ports=PORTS)}


def _by_kind(objects: list[dict], kind: str) -> dict:
    [found] = [o for o in objects if o["kind"] == kind]
    return found


def test_every_shape_with_ports_validates_strictly_and_exposes_them():
    for shape, spec in _shapes().items():
        objects = manifests.for_job("gp-", spec, "http://portal", "t")
        for body in objects:
            assert kubernetes_validate.validate(body, "1.30", strict=True), (shape, body["kind"])
            assert same_verdict_as_kubernetes_validate(body)
        service, job = _by_kind(objects, "Service"), _by_kind(objects, "Job")
        assert service["metadata"]["name"] == job["metadata"]["name"] == manifests.object_name(spec)
        named = [p for p in service["spec"]["ports"] if p["name"] in ("tensorboard", "ui")]
        assert [(p["name"], p["port"], p["targetPort"]) for p in named] == [(n, p, p) for n, p in PORTS], shape
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert [(p["name"], p["containerPort"]) for p in container["ports"] if p["name"] != "notebook"] == list(PORTS)
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert (env["GPUPORTAL_PORT_TENSORBOARD"], env["GPUPORTAL_PORT_UI"]) == ("6006", "8080")
    assert _by_kind(manifests.for_job("gp-", _shapes()["single-node"], "http://p", "t"), "Service")["spec"][
        "type"] == "ClusterIP"
    assert _by_kind(manifests.for_job("gp-", _shapes()["multi-node"], "http://p", "t"), "Service")["spec"][
        "clusterIP"] == "None"  # the ranks' headless Service, its first rank serving the ports
    plain = manifests.for_job("gp-", manifests.example_spec("single-node"), "http://p", "t")
    assert [o["kind"] for o in plain] == ["Secret", "Job"]  # no ports: no Service, as before
    assert "ports" not in _by_kind(plain, "Job")["spec"]["template"]["spec"]["containers"][0]
    assert manifests.port_url("gp-9-a0", "gp-vision", 6006, 1) == "http://gp-9-a0.gp-vision.svc.cluster.local:6006"
    assert manifests.port_url("gp-9-a0", "gp-vision", 6006, 2) == \
        "http://gp-9-a0-0.gp-9-a0.gp-vision.svc.cluster.local:6006"


def test_kubectl_creates_each_shape_on_the_fake_api_server(tmp_path):
    fake = FakeKubernetes(nodes=[f"gpu-{i:02d}" for i in range(1, 9)])
    fake.url = fake.start()
    try:
        kubectl = make_kubectl(KUBECTL, fake, tmp_path)
        objects = [*manifests.for_tenant("gp-", "vision", 64)]
        objects += [manifests.priority_class(code, 50) for code in ("training", "notebook", "evaluation")]
        for spec in _shapes().values():
            objects += manifests.for_job("gp-", spec, "http://portal.example", f"token-{spec.id}")
        path = tmp_path / "objects.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        created = kubectl("create", "-f", path, "-o", "name").split()
        assert len(created) == len(objects)
        name = manifests.object_name(_shapes()["single-node"])
        service = json.loads(kubectl("get", "service", name, "-n", "gp-vision", "-o", "json"))
        assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == list(PORTS)
        assert service["spec"]["clusterIP"].startswith("10.96.")
    finally:
        fake.stop()


@pytest.mark.django_db(transaction=True)
def test_a_dispatched_job_is_reached_through_its_service(kube, users, api):
    payload = job_payload(gpu_model=MODEL, gpus_per_node=2, command="tensorboard --logdir runs --bind_all",
                          ports=["tensorboard:6006"])
    job = Job.objects.get(pk=submission.submit_job(users["alice"], payload).pk)
    assert job.status == JobStatus.DISPATCHING
    namespace, name = kube.objects_of(job)
    service = kube.fake.get("services", namespace, name)
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("tensorboard", 6006)]
    assert service["spec"]["selector"] == {manifests.JOB_LABEL: str(job.pk), manifests.ATTEMPT_LABEL: "0"}
    container = kube.fake.get("jobs", namespace, name)["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "GPUPORTAL_PORT_TENSORBOARD", "value": "6006"} in container["env"]
    assert api("alice").get(f"/api/jobs/{job.pk}/").json()["ports"][0]["url"] is None  # not running yet

    kube.sync()
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.RUNNING
    executor = KubernetesExecutor(Cluster.objects.get(pk=kube.cluster.pk))
    assert executor.port_upstream(job, job.ports[0]) == f"http://{name}.{namespace}.svc.cluster.local:6006"
    assert api("alice").get(f"/api/jobs/{job.pk}/").json()["ports"] == [
        {"name": "tensorboard", "port": 6006, "url": f"http://testserver/jobs/{job.pk}/ports/tensorboard/"}]
    executor.stop(job, "done")
    assert ("services", namespace, name) not in kube.fake.objects  # deleted with the attempt
