"""Dispatch per vendor: each vendor's extended resource, runtime settings and sharing mode, strictly valid, created
on the fake API server for a mixed cluster whose tenant quota counts each vendor's resource; the cluster's own
resource names override the defaults."""

import dataclasses
import io

import kubernetes_validate
import pytest
import yaml
from django.core.management import call_command

from fleet.models import AcceleratorModel, Cluster
from kubefake.validation import same_verdict_as_kubernetes_validate
from scheduling.executors.kubernetes import manifests
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tenants.models import Quota, Tenant
from tests.conftest import job_payload
from tests.factories import make_node
from tests.scheduling.kube import make_cluster, reset_client_caches

pytestmark = pytest.mark.django_db(transaction=True)

#: (model, vendor, the resource its container asks for, a variable its container gets)
VENDOR_MODELS = [("MI300X", "amd", "amd.com/gpu", "NCCL_DEBUG"),
                 ("Ascend910B", "huawei", "huawei.com/Ascend910", "ASCEND_RT_VISIBLE_DEVICES"),
                 ("MLU370-X8", "cambricon", "cambricon.com/mlu", "MLU_VISIBLE_DEVICES"),
                 ("K100", "hygon", "hygon.com/dcu", "HIP_VISIBLE_DEVICES")]


def strictly_valid(body: dict) -> bool:
    return bool(kubernetes_validate.validate(body, "1.30", strict=True)) and same_verdict_as_kubernetes_validate(body)


def container_of(body: dict) -> dict:
    return body["spec"]["template"]["spec"]["containers"][0]


def env_of(body: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container_of(body)["env"]}


def test_every_vendor_shape_validates_strictly():
    prefix, objects = "gp-", []
    limits = {"nvidia.com/gpu": 32, "amd.com/gpu": 16, "huawei.com/Ascend910": 8, "huawei.com/Ascend910-4c": 4,
              "cambricon.com/mlu": 8, "hygon.com/dcu": 8}
    objects.append(manifests.resource_quota(prefix, "vision", limits))
    for vendor_example in manifests.VENDOR_EXAMPLES:
        spec = manifests.example_spec(vendor_example)
        multi = dataclasses.replace(spec, node_count=2, nodes=(spec.nodes[0], "other-01"))
        share = dataclasses.replace(spec, gpus_per_node=1, gpu_milli=250)
        notebook = dataclasses.replace(share, kind="notebook", command="", max_runtime_minutes=None)
        service = dataclasses.replace(spec, kind="service", group_id=9, group_index=0, group_size=1, revision=1,
                                      port=8000, max_runtime_minutes=None)
        for shape in (spec, multi, share, notebook, service):
            objects += manifests.for_job(prefix, shape, "http://portal", "t", data_claim=True,
                                         ingress=manifests.EXAMPLE_INGRESS)
    for body in objects:
        assert strictly_valid(body), body
    assert objects[0]["spec"]["hard"]["requests.amd.com/gpu"] == "16"


@pytest.mark.parametrize(("example", "resource"), [("amd", "amd.com/gpu"), ("ascend", "huawei.com/Ascend910"),
                                                   ("cambricon", "cambricon.com/mlu"), ("hygon", "hygon.com/dcu")])
def test_k8s_manifests_prints_a_single_node_job_per_vendor(example, resource):
    out = io.StringIO()
    call_command("k8s_manifests", example=example, stdout=out)
    objects = [o for o in yaml.safe_load_all(out.getvalue()) if o]
    [job] = [o for o in objects if o["kind"] == "Job"]
    assert job["spec"]["parallelism"] == 1 and container_of(job)["resources"]["limits"] == {resource: "8"}
    [quota] = [o for o in objects if o["kind"] == "ResourceQuota"]
    assert quota["spec"]["hard"][f"requests.{resource}"] == "16"
    assert all(strictly_valid(o) for o in objects)


def test_shares_of_a_device_follow_the_vendors_sharing_mode():
    ascend = dataclasses.replace(manifests.example_spec("ascend"), gpus_per_node=1)
    # the documented static vNPU templates: the smallest that holds the share; none holds 3/4 of a card
    assert manifests.gpu_limits(dataclasses.replace(ascend, gpu_milli=100)) == {"huawei.com/Ascend910-4c": "1"}
    assert manifests.gpu_limits(dataclasses.replace(ascend, gpu_milli=250)) == {"huawei.com/Ascend910-8c": "1"}
    assert manifests.gpu_limits(dataclasses.replace(ascend, gpu_milli=750)) == {"huawei.com/Ascend910": "1"}
    assert manifests.gpu_limits(dataclasses.replace(ascend, gpu_milli=250, gpu_model="Ascend310P3")) == {
        "huawei.com/Ascend310P-2c": "1"}
    # a cluster with its own templates (910B's vir05_1c_16g) and HAMi on its Hygon DCUs; NVIDIA's flat map
    shares = {"huawei": [[250, {"huawei.com/Ascend910-5c.1cpu.16g": 1}], [500, {"huawei.com/Ascend910-10c": 1}]],
              "hygon": {"hygon.com/dcunum": 1, "hygon.com/dcucores": "{percent}"}}
    assert manifests.gpu_limits(dataclasses.replace(ascend, gpu_milli=200), shares) == {
        "huawei.com/Ascend910-5c.1cpu.16g": "1"}
    hygon = dataclasses.replace(manifests.example_spec("hygon"), gpus_per_node=1, gpu_milli=300)
    assert manifests.gpu_limits(hygon, shares) == {"hygon.com/dcunum": "1", "hygon.com/dcucores": "30"}
    # no sharing mode offered for AMD: a share holds a whole device; NVIDIA keeps its flat HAMi map
    amd = dataclasses.replace(manifests.example_spec("amd"), gpus_per_node=1, gpu_milli=300)
    assert manifests.gpu_limits(amd, shares) == {"amd.com/gpu": "1"}
    nvidia = dataclasses.replace(manifests.example_spec("fractional"))
    assert manifests.gpu_limits(nvidia, {"nvidia.com/gpu": 1, "nvidia.com/gpucores": "{percent}"}) == {
        "nvidia.com/gpu": "1", "nvidia.com/gpucores": "25"}
    assert manifests.gpu_limits(nvidia, shares)["nvidia.com/gpumem-percentage"] == "25"  # HAMi by default


def test_multi_node_ascend_job_gets_hccl_settings_and_plugin_visibility_is_left_alone():
    spec = dataclasses.replace(manifests.example_spec("ascend"), node_count=2, nodes=("a-01", "a-02"),
                               env={"HCCL_CONNECT_TIMEOUT": "600"})
    env = env_of(manifests.job("gp-", spec, "http://portal"))
    assert env["HCCL_CONNECT_TIMEOUT"] == "600"  # the job's own setting wins, once
    assert [e["name"] for e in container_of(manifests.job("gp-", spec, "http://p"))["env"]].count(
        "HCCL_CONNECT_TIMEOUT") == 1
    assert env["HCCL_IF_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7" and "ASCEND_VISIBLE_DEVICES" not in env
    amd = env_of(manifests.job("gp-", manifests.example_spec("amd"), "http://portal"))
    assert "HIP_VISIBLE_DEVICES" not in amd and amd["NCCL_DEBUG"] == "WARN"  # the AMD device plugin's to set
    nvidia = env_of(manifests.job("gp-", manifests.example_spec("multi-node"), "http://portal"))
    assert not {"NCCL_DEBUG", "HCCL_IF_IP", "HIP_VISIBLE_DEVICES"} & set(nvidia)


@pytest.fixture
def mixed(users, tmp_path, settings):
    """One Kubernetes cluster with an H200 node and a node of each other vendor's model, the tenant vision
    holding a quota on each."""
    settings.KUBERNETES = {**settings.KUBERNETES, "RETRIES": 3, "BACKOFF_SECONDS": 0.01}
    reset_client_caches()
    made = make_cluster(tmp_path, "kube-mix", node_count=1)
    vision = Tenant.objects.get(name="vision")
    for model, vendor, *_rest in VENDOR_MODELS:
        # the catalogue's rows (a transactional test's flush removes what the migration added)
        AcceleratorModel.objects.update_or_create(name=model, defaults={"vendor": vendor})
        name = f"mix-{model.lower()}-01"
        make_node(made.cluster, name, model)
        made.fake.add_node(name)
        made.nodes.append(name)
        Quota.objects.create(tenant=vision, gpu_model=model, guaranteed_gpus=4, limit_gpus=8)
    try:
        yield made
    finally:
        made.fake.stop()
        reset_client_caches()


def submit(users, model: str, **overrides) -> Job:
    payload = job_payload(gpu_model=model, gpus_per_node=4, command="python train.py", **overrides)
    return Job.objects.get(pk=submission.submit_job(users["alice"], payload).pk)


def test_each_vendors_job_lands_on_its_node_and_asks_for_its_resource(mixed, users):
    for model, vendor, resource, variable in VENDOR_MODELS:
        job = submit(users, model)
        assert job.status == JobStatus.DISPATCHING, (model, job.status)
        state = job.executor_state
        assert state["nodes"] == [f"mix-{model.lower()}-01"] and state["vendor"] == vendor
        body = mixed.fake.get("jobs", state["namespace"], state["object"])
        assert container_of(body)["resources"]["limits"] == {resource: "4"}
        env = env_of(body)
        assert env["GPUPORTAL_ACCELERATOR_VENDOR"] == vendor and variable in env
        [pod] = mixed.fake.pods(state["namespace"], state["object"])
        assert pod["spec"]["nodeName"] == state["nodes"][0]
    quota = mixed.fake.get("resourcequotas", "gp-vision", "gpuportal-gpus")
    hard, used = quota["spec"]["hard"], quota["status"]["used"]
    nvidia = sum(Quota.objects.filter(tenant__name="vision").exclude(
        gpu_model__in=[m for m, *_r in VENDOR_MODELS]).values_list("limit_gpus", flat=True))
    assert hard["requests.nvidia.com/gpu"] == str(nvidia)
    for _model, _vendor, resource, _variable in VENDOR_MODELS:  # each vendor's limit, each vendor's use
        assert hard[f"requests.{resource}"] == "8" and used[f"requests.{resource}"] == "4"
    mixed.sync()
    assert set(Job.objects.filter(gpu_model__in=[m for m, *_r in VENDOR_MODELS]).values_list(
        "status", flat=True)) == {JobStatus.RUNNING}


def test_the_clusters_resource_names_override_the_defaults(mixed, users):
    Cluster.objects.filter(pk=mixed.cluster.pk).update(accelerator_resources={
        "huawei": "huawei.com/Ascend910B", "MLU370-X8": "cambricon.com/mlu370"})
    ascend, mlu = submit(users, "Ascend910B"), submit(users, "MLU370-X8")
    for job, resource in ((ascend, "huawei.com/Ascend910B"), (mlu, "cambricon.com/mlu370")):
        state = Job.objects.get(pk=job.pk).executor_state
        body = mixed.fake.get("jobs", state["namespace"], state["object"])
        assert container_of(body)["resources"]["limits"] == {resource: "4"}
    hard = mixed.fake.get("resourcequotas", "gp-vision", "gpuportal-gpus")["spec"]["hard"]
    assert hard["requests.huawei.com/Ascend910B"] == "8" and hard["requests.cambricon.com/mlu370"] == "8"
    assert "requests.huawei.com/Ascend910" not in hard and hard["requests.amd.com/gpu"] == "8"


def test_k8s_manifests_for_a_vendors_job_shows_the_clusters_names(mixed, users):
    Cluster.objects.filter(pk=mixed.cluster.pk).update(accelerator_resources={"huawei": "huawei.com/Ascend910B"})
    job = submit(users, "Ascend910B")
    out = io.StringIO()
    call_command("k8s_manifests", job=job.pk, stdout=out)
    objects = [o for o in yaml.safe_load_all(out.getvalue()) if o]
    [k8s_job] = [o for o in objects if o["kind"] == "Job"]
    assert container_of(k8s_job)["resources"]["limits"] == {"huawei.com/Ascend910B": "4"}
    assert env_of(k8s_job)["GPUPORTAL_ACCELERATOR_VENDOR"] == "huawei"
    [quota] = [o for o in objects if o["kind"] == "ResourceQuota"]
    assert quota["spec"]["hard"]["requests.huawei.com/Ascend910B"] == "8"
