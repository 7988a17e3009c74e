"""``kubectl``, a client we did not write, against the fake API server: discovery, OpenAPI, create of every
manifest shape the portal produces, get (single, list, selectors, namespaces, all namespaces), logs, delete,
watch, and server-side printing."""

import json
import os
import urllib.error
import urllib.request

import pytest
import yaml

from tests.kubefake.conftest import KUBECTL, make_kubectl, portal_manifests

#: the portal's example jobs, as ``portal_manifests`` numbers them: single-node, multi-node (4 ranks of 8 GPUs),
#: fractional (a quarter of a GPU), resumed (attempt 2)
JOBS = ["gp-100-a0", "gp-101-a0", "gp-102-a0", "gp-103-a2"]


def create_all(kubectl, tmp_path, objects) -> list[str]:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return kubectl("create", "-f", path, "-o", "name").split()


def http(fake, method: str, path: str, body=None, accept: str = "application/json"):
    request = urllib.request.Request(f"{fake.url}{path}", method=method, headers={
        "Content-Type": "application/json", "Accept": accept}, data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request) as response:  # noqa: S310 - loopback
            return response.status, response.headers["Content-Type"], json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], json.loads(exc.read())


def test_discovery_as_kubectl_reads_it(kubectl, fake):
    version = json.loads(kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == "v1.30.0-kubefake"
    assert set(kubectl("api-versions").split()) == {"v1", "apps/v1", "batch/v1", "networking.k8s.io/v1",
                                                     "scheduling.k8s.io/v1"}
    rows = [line.split() for line in kubectl("api-resources", "--no-headers").splitlines()]
    by_name = {row[0]: row for row in rows}
    assert by_name["pods"] == ["pods", "po", "v1", "true", "Pod"]
    assert by_name["namespaces"] == ["namespaces", "ns", "v1", "false", "Namespace"]
    assert by_name["jobs"] == ["jobs", "batch/v1", "true", "Job"]
    assert by_name["networkpolicies"] == ["networkpolicies", "netpol", "networking.k8s.io/v1", "true", "NetworkPolicy"]
    assert by_name["priorityclasses"] == ["priorityclasses", "pc", "scheduling.k8s.io/v1", "false", "PriorityClass"]
    assert by_name["deployments"] == ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    assert by_name["ingresses"] == ["ingresses", "ing", "networking.k8s.io/v1", "true", "Ingress"]
    assert by_name["resourcequotas"][:2] == ["resourcequotas", "quota"]
    # the documents themselves, asked the way kubectl 1.30+ asks (aggregated discovery preferred, legacy accepted)
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
    code, content_type, core = http(fake, "GET", "/api/v1", accept=accept)
    assert (code, content_type, core["kind"]) == (200, "application/json", "APIResourceList")
    assert core["groupVersion"] == "v1"
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["singularName"] == "pod" and pods["namespaced"] and {"create", "list", "watch"} <= set(pods["verbs"])
    assert any(r["name"] == "pods/log" and r["verbs"] == ["get"] for r in core["resources"])
    assert http(fake, "GET", "/api", accept=accept)[2]["kind"] == "APIVersions"
    groups = http(fake, "GET", "/apis", accept=accept)[2]
    assert groups["kind"] == "APIGroupList" and {g["name"] for g in groups["groups"]} == {
        "apps", "batch", "networking.k8s.io", "scheduling.k8s.io"}
    assert http(fake, "GET", "/apis/batch/v1")[2]["resources"][0]["kind"] == "Job"
    assert http(fake, "GET", "/apis/apps/v1")[2]["resources"][0]["kind"] == "Deployment"
    assert http(fake, "GET", "/apis/policy/v1")[0] == 404
    assert http(fake, "GET", "/apis/batch/v1/pods")[0] == 404  # a kind under a group that does not serve it


def test_openapi_v3_lets_kubectl_leave_validation_to_the_server(kubectl, fake, tmp_path):
    code, _type, root = http(fake, "GET", "/openapi/v3")
    assert code == 200 and set(root["paths"]) == {"api/v1", "apis/apps/v1", "apis/batch/v1",
                                                   "apis/networking.k8s.io/v1", "apis/scheduling.k8s.io/v1"}
    document = http(fake, "GET", root["paths"]["apis/batch/v1"]["serverRelativeURL"])[2]
    patch = document["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert kubectl("explain", "job").split()[:4] == ["GROUP:", "batch", "KIND:", "Job"]
    assert "<integer>" in kubectl("explain", "job.spec.parallelism")
    # kubectl no longer validates on its side: the fake's strict schema validation still refuses a typo
    kubectl("create", "namespace", "typos")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "strinData": {"a": "b"},
                                   "metadata": {"name": "s", "namespace": "typos"}}))
    refused = kubectl.run("create", "-f", bad, check=False)
    assert refused.returncode != 0 and "is invalid" in refused.stderr and "strinData" in refused.stderr
    assert ("secrets", "typos", "s") not in fake.objects


def test_create_every_manifest_shape_the_portal_produces(kubectl, fake, tmp_path):
    objects = portal_manifests()
    names = create_all(kubectl, tmp_path, objects)
    kinds = {"Namespace": "namespace", "ResourceQuota": "resourcequota", "Secret": "secret", "Service": "service",
             "PersistentVolumeClaim": "persistentvolumeclaim", "Job": "job.batch",
             "NetworkPolicy": "networkpolicy.networking.k8s.io", "PriorityClass": "priorityclass.scheduling.k8s.io"}
    assert names == [f"{kinds[o['kind']]}/{o['metadata']['name']}" for o in objects]
    assert set(kinds) == {o["kind"] for o in objects}
    for sent in objects:
        plural = {"PriorityClass": "priorityclasses", "NetworkPolicy": "networkpolicies"}.get(
            sent["kind"], sent["kind"].lower() + "s")
        stored = fake.get(plural, sent["metadata"].get("namespace"), sent["metadata"]["name"])
        assert stored["metadata"]["labels"] == sent["metadata"]["labels"]
        if sent["kind"] == "Job":  # the API server's defaults: a selector on the job's uid, its labels on the pods
            selector = {"batch.kubernetes.io/controller-uid": stored["metadata"]["uid"]}
            assert stored["spec"].pop("selector") == {"matchLabels": selector}
            labels = stored["spec"]["template"]["metadata"]["labels"]
            assert labels.items() >= {**selector, "job-name": sent["metadata"]["name"]}.items()
            stored["spec"]["template"]["metadata"]["labels"] = sent["spec"]["template"]["metadata"]["labels"]
        assert stored.get("spec") == sent.get("spec")
    # the jobs ran: one pod per node, on the nodes the portal pinned them to
    pods = kubectl.json("get", "pods", "-n", "gp-vision")["items"]
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert len(pods) == sum(j["spec"]["parallelism"] for j in jobs)
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    multi = next(j for j in jobs if j["spec"].get("completionMode") == "Indexed")
    multi_pods = [p for p in pods if p["metadata"]["labels"]["job-name"] == multi["metadata"]["name"]]
    pinned = multi["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert sorted(p["spec"]["nodeName"] for p in multi_pods) == sorted(pinned)
    secret = kubectl.json("get", "secret", "gp-100-a0-token", "-n", "gp-vision")
    assert secret["data"] == {"token": "dG9rZW4tMTAw"} and "stringData" not in secret  # base64 of "token-100"


def test_the_same_with_kubectl_1_32_itself(fake, tmp_path):
    """/usr/bin/kubectl dispatches to the kubectl matching the server's version (1.30 here); kubectl 1.32 asks
    for aggregated discovery and OpenAPI v3 too."""
    binary = os.path.join(os.path.dirname(os.path.realpath(KUBECTL)), "kubectl.1.32")
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not installed (only the dispatcher is)")
    kubectl = make_kubectl(binary, fake, tmp_path)
    assert json.loads(kubectl("version", "-o", "json"))["clientVersion"]["minor"] == "32"
    objects = portal_manifests()
    assert len(create_all(kubectl, tmp_path, objects)) == len(objects)
    jobs = kubectl.json("get", "jobs", "-A")
    assert jobs["kind"] == "List" and {j["kind"] for j in jobs["items"]} == {"Job"}
    assert len(jobs["items"]) == sum(o["kind"] == "Job" for o in objects)


def test_get_single_list_selectors_namespaces_and_all(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, portal_manifests())
    kubectl("create", "namespace", "other")
    kubectl("create", "secret", "generic", "elsewhere", "-n", "other", "--from-literal=a=b")

    job = kubectl.json("get", "job", "gp-101-a0", "-n", "gp-vision")
    assert (job["kind"], job["apiVersion"], job["metadata"]["name"]) == ("Job", "batch/v1", "gp-101-a0")
    assert job["spec"]["completionMode"] == "Indexed" and int(job["metadata"]["resourceVersion"]) > 0

    selected = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=101")
    assert selected["kind"] == "List" and len(selected["items"]) == 4
    assert {p["kind"] for p in selected["items"]} == {"Pod"}
    assert {p["metadata"]["labels"]["gpuportal.io/job"] for p in selected["items"]} == {"101"}
    indexes = kubectl.json("get", "pods", "-n", "gp-vision", "-l",
                           "gpuportal.io/job=101,batch.kubernetes.io/job-completion-index in (0,3)")["items"]
    assert sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in indexes) == ["0", "3"]
    assert kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job!=101,!nothing")["items"]
    assert kubectl.json("get", "pods", "-n", "other")["items"] == []

    secrets = kubectl.json("get", "secrets", "-A")["items"]
    assert {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in secrets} == {
        ("gp-vision", f"{job}-token") for job in JOBS} | {("other", "elsewhere")}
    assert [s["metadata"]["name"] for s in kubectl.json("get", "secrets", "-n", "other")["items"]] == ["elsewhere"]
    by_field = kubectl.json("get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-05")["items"]
    assert [p["spec"]["nodeName"] for p in by_field] == ["gpu-05"]
    assert {n["metadata"]["name"] for n in kubectl.json("get", "namespaces")["items"]} == {"gp-vision", "other"}
    assert kubectl.json("get", "pc", "gpuportal-training")["value"] == 50_000
    assert kubectl.json("get", "netpol", "-n", "gp-vision")["items"][0]["spec"]["policyTypes"] == ["Ingress"]
    assert kubectl.json("get", "pvc", "gpuportal-data", "-n", "gp-vision")["spec"]["storageClassName"] == "cephfs"
    quota = kubectl.json("get", "quota", "gpuportal-gpus", "-n", "gp-vision")
    assert quota["status"] == {"hard": {"requests.nvidia.com/gpu": "64"}, "used": {"requests.nvidia.com/gpu": "39"}}

    missing = kubectl.run("get", "job", "nope", "-n", "gp-vision", check=False)
    assert missing.returncode != 0 and 'jobs.batch "nope" not found' in missing.stderr


def test_lists_and_objects_are_typed_like_a_real_api_server(kubectl, fake):
    kubectl("create", "namespace", "raw")
    code, _type, created = http(fake, "POST", "/api/v1/namespaces/raw/secrets",
                                {"metadata": {"name": "untyped"}, "stringData": {"k": "v"}})
    assert code == 201 and (created["kind"], created["apiVersion"]) == ("Secret", "v1")  # from the URL
    assert kubectl.json("get", "secret", "untyped", "-n", "raw")["data"] == {"k": "dg=="}
    code, _type, job = http(fake, "POST", "/apis/batch/v1/namespaces/raw/jobs", {"metadata": {"name": "j"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    assert code == 201 and (job["kind"], job["apiVersion"]) == ("Job", "batch/v1")
    code, _type, status = http(fake, "POST", "/api/v1/namespaces/raw/secrets",
                               {"apiVersion": "batch/v1", "kind": "Secret", "metadata": {"name": "x"}})
    assert code == 400 and status["kind"] == "Status" and status["reason"] == "BadRequest"
    code, _type, listed = http(fake, "GET", "/apis/batch/v1/namespaces/raw/jobs")
    assert (listed["kind"], listed["apiVersion"]) == ("JobList", "batch/v1")
    assert int(listed["metadata"]["resourceVersion"]) >= int(job["metadata"]["resourceVersion"])
    assert http(fake, "GET", "/api/v1/pods")[2]["kind"] == "PodList"


def test_logs(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, portal_manifests())
    [pod] = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=100")["items"]
    name = pod["metadata"]["name"]
    fake.set_log("gp-vision", name, "step 1\nstep 2\nCUDA out of memory")
    assert kubectl("logs", name, "-n", "gp-vision") == "step 1\nstep 2\nCUDA out of memory\n"
    assert kubectl("logs", name, "-n", "gp-vision", "-c", "main", "--tail", "1") == "CUDA out of memory\n"
    assert kubectl("logs", "job/gp-100-a0", "-n", "gp-vision").endswith("CUDA out of memory\n")
    missing = kubectl.run("logs", "nope", "-n", "gp-vision", check=False)
    assert missing.returncode != 0 and 'pods "nope" not found' in missing.stderr


def test_delete(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, portal_manifests())
    pods = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=101")["items"]
    assert len(pods) == 4
    assert kubectl("delete", "job", "gp-101-a0", "-n", "gp-vision").strip() == 'job.batch "gp-101-a0" deleted'
    assert kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=101")["items"] == []
    assert ("jobs", "gp-vision", "gp-101-a0") not in fake.objects
    assert kubectl("delete", "secret/gp-101-a0-token", "service/gp-101-a0", "-n", "gp-vision").splitlines() == [
        'secret "gp-101-a0-token" deleted', 'service "gp-101-a0" deleted']
    [pod] = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=100")["items"]
    kubectl("delete", "pod", pod["metadata"]["name"], "-n", "gp-vision")
    assert kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=100")["items"] == []
    kubectl("delete", "priorityclass", "gpuportal-notebook")
    missing = kubectl.run("delete", "pod", "nope", "-n", "gp-vision", check=False)
    assert missing.returncode != 0 and 'pods "nope" not found' in missing.stderr
    kubectl("delete", "namespace", "gp-vision")  # and what is in it, as the namespace controller does
    assert kubectl.json("get", "pods", "-A")["items"] == [] and kubectl.json("get", "jobs", "-A")["items"] == []
    assert [p["metadata"]["name"] for p in kubectl.json("get", "priorityclasses")["items"]] == ["gpuportal-training"]


def test_watch_prints_what_changes(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, portal_manifests())
    watch = kubectl.stream("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=100", "--watch", "-o", "json")
    try:
        [first] = watch.wait_for(lambda docs: len(docs) >= 1)
        assert first["kind"] == "Pod" and first["status"]["phase"] == "Running"
        fake.succeed("gp-vision", "gp-100-a0")
        documents = watch.wait_for(lambda docs: any(d["status"]["phase"] == "Succeeded" for d in docs))
        assert {d["metadata"]["name"] for d in documents} == {first["metadata"]["name"]}
        kubectl("delete", "pod", first["metadata"]["name"], "-n", "gp-vision")
        watch.wait_for(lambda docs: len(docs) >= 3)  # the deletion, printed as the last state of the pod
    finally:
        watch.stop()
    table = kubectl.stream("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=103", "-w")  # no -o: Tables
    try:
        table.wait_for_text("Running")
        fake.exit("gp-vision", "gp-103-a2", code=3)
        lines = table.wait_for_text("Error").splitlines()
    finally:
        table.stop()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "Running" in lines[1] and "Error" in lines[-1] and "0/1" in lines[-1]


def test_human_output_is_the_servers_tables(kubectl, fake, tmp_path):
    create_all(kubectl, tmp_path, portal_manifests(gpu_limit=16))
    pods = kubectl("get", "pods", "-n", "gp-vision").splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert all(line.split()[1:4] == ["1/1", "Running", "0"] for line in pods[1:])
    wide = kubectl("get", "pods", "-n", "gp-vision", "-o", "wide").splitlines()
    assert wide[0].split()[-1] == "NODE"
    assert {line.split()[-1] for line in wide[1:]} == {"gpu-01", "gpu-05", "gpu-06"}
    every = kubectl("get", "pods", "-A").splitlines()
    assert every[0].split()[0] == "NAMESPACE" and all(line.startswith("gp-vision ") for line in every[1:])
    quota = kubectl("get", "quota", "-n", "gp-vision").splitlines()
    assert quota[1].split()[0] == "gpuportal-gpus" and "requests.nvidia.com/gpu: 15/16" in quota[1]
    assert "requests.nvidia.com/gpu  15    16" in kubectl("describe", "quota", "gpuportal-gpus", "-n", "gp-vision")
    events = kubectl("get", "events", "-n", "gp-vision")
    assert "FailedCreate" in events and "job/gp-101-a0" in events and "exceeded quota: gpuportal-gpus" in events
    assert kubectl("get", "pods", "-n", "gp-vision", "--show-labels").count("gpuportal.io/tenant=vision") == len(
        pods) - 1
    names = kubectl("get", "jobs", "-n", "gp-vision", "-o", "name").split()
    assert names == [f"job.batch/{job}" for job in JOBS]


def test_a_portal_job_refused_by_its_tenants_quota_starts_once_kubectl_raises_it(kubectl, fake, tmp_path):
    """The portal's shapes end to end: quota 16 GPUs, jobs asking 2 + 4x8 + 1 + 4."""
    create_all(kubectl, tmp_path, portal_manifests(gpu_limit=16))
    multi = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=101")["items"]
    assert len(multi) == 1  # 2 + 8 GPUs taken; the second rank's 8 would make 18 of 16
    events = kubectl.json("get", "events", "-n", "gp-vision", "--field-selector", "involvedObject.name=gp-101-a0")
    [event] = events["items"]
    assert (event["type"], event["reason"], event["involvedObject"]["kind"]) == ("Warning", "FailedCreate", "Job")
    assert event["message"].startswith('Error creating: pods "gp-101-a0-1-')
    assert event["message"].endswith('" is forbidden: exceeded quota: gpuportal-gpus, requested: '
                                     'requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=10, '
                                     'limited: requests.nvidia.com/gpu=16')
    assert kubectl.json("get", "job", "gp-101-a0", "-n", "gp-vision")["status"]["active"] == 1
    assert fake.quota_used("gp-vision") == {"requests.nvidia.com/gpu": "15"}  # 2 + 8 + 1 + 4

    kubectl("patch", "quota", "gpuportal-gpus", "-n", "gp-vision", "-p",
            json.dumps({"spec": {"hard": {"requests.nvidia.com/gpu": "40"}}}))
    multi = kubectl.json("get", "pods", "-n", "gp-vision", "-l", "gpuportal.io/job=101")["items"]
    assert sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in multi) == [
        "0", "1", "2", "3"]
    assert kubectl.json("get", "job", "gp-101-a0", "-n", "gp-vision")["status"]["active"] == 4
    quota = kubectl.json("get", "quota", "gpuportal-gpus", "-n", "gp-vision")
    assert quota["status"]["used"] == {"requests.nvidia.com/gpu": "39"}
