"""The Kubernetes executor's RBAC (deploy/kustomize/base/executor-rbac.yaml) grants exactly what
the executor uses: no verb missing, none to spare.

What it uses is measured, not listed by hand: the executor's real operations (dispatch of a single-node and a
multi-node job with a tenant data claim, a dispatch after a quota change, sync by list and by watch, log reading,
a failure's diagnosis, cancellation, reconciliation) run against the fake API server, which records each request
as a real API server's authorizer sees it — (API group, resource[/subresource], verb). That set must equal what
the rendered ClusterRole grants. So that the drive cannot miss a call the code makes, every Kubernetes client
method the executor package refers to is translated into the same attributes (from the client's own request
path and method) and must be among those recorded.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.utils import timezone
from kubernetes import client

from fleet.models import Cluster
from kubefake.http import NAMESPACE_PATH, PATH, authorization_attributes
from scheduling.executors import executor_for, read_job_log
from scheduling.executors.kubernetes.sync import ClusterSync
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from scheduling.passes.reconcile import reconcile
from tenants.models import Quota
from tests.conftest import job_payload
from tests.deploy.test_dockerfiles import REPO
from tests.deploy.test_manifests import KUBECTL, _clean_env
from tests.scheduling.kube import MODEL, served_cluster

EXECUTOR_PACKAGE = REPO / "scheduling" / "executors" / "kubernetes"
BASE = REPO / "deploy" / "kustomize" / "base"
SERVICE_ACCOUNT = ("gpuportal", "gpuportal-executor")

Attribute = tuple[str, str, str]  # (API group, resource[/subresource], verb)


# --- what the code refers to ----------------------------------------------------------------------------------


def _api_classes(tree: ast.AST) -> dict[str, str]:
    """``self.core = client.CoreV1Api(...)`` and the like: attribute name -> client API class name."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr.endswith("Api") and func.attr != "VersionApi":
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        found[target.attr] = func.attr
    return found


def referenced_client_methods() -> set[tuple[str, str]]:
    """(API class, method) for every ``<…>.core.create_namespace``-like reference in the executor package."""
    trees = [ast.parse(path.read_text(), str(path)) for path in sorted(EXECUTOR_PACKAGE.glob("*.py"))]
    classes = {}
    for tree in trees:
        classes |= _api_classes(tree)
    assert {"core", "batch", "networking", "scheduling"} <= set(classes), classes
    references = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and \
                    node.value.attr in classes and not node.attr.startswith("_"):
                references.add((classes[node.value.attr], node.attr))
    return references


def attributes_of(api_class: str, method: str) -> Attribute:
    """What a client method's request looks like to the authorizer, from the request the client itself builds
    (its ``_<method>_serialize``: HTTP method and path)."""
    source = inspect.getsource(getattr(getattr(client, api_class), f"_{method}_serialize"))
    http_method = re.search(r"method='(\w+)'", source).group(1)
    path = re.search(r"resource_path='([^']+)'", source).group(1)
    path = path.replace("{namespace}", "ns").replace("{name}", "object")
    match = NAMESPACE_PATH.match(path) or PATH.match(path)
    assert match, f"{api_class}.{method}: {path} is not a resource path"
    parts = match.groupdict()
    return authorization_attributes(http_method, parts.get("plural") or "namespaces", parts.get("name"),
                                    parts.get("sub"), {})


# --- what the RBAC grants -------------------------------------------------------------------------------------


def render_base(tmp_path: Path) -> list[dict]:
    done = subprocess.run([KUBECTL, "kustomize", str(BASE)], capture_output=True, text=True, timeout=60,
                          env=_clean_env(HOME=str(tmp_path)), check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def granted_to(objects: list[dict], account: tuple[str, str]) -> set[Attribute]:
    """Every (group, resource, verb) the Roles and ClusterRoles bound to ``account`` allow. A wildcard is kept as
    "*", which never equals a used attribute: it counts as granting more than is used."""
    namespace, name = account
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects
             if o["kind"] in ("Role", "ClusterRole")}
    granted = set()
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = binding.get("subjects", [])
        if not any(s["kind"] == "ServiceAccount" and s["name"] == name and s.get("namespace") == namespace
                   for s in subjects):
            continue
        ref = binding["roleRef"]
        role_namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_namespace, ref["name"])]
        for rule in role.get("rules", []):
            assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), "not compared here"
            granted |= {(group, resource, verb) for group in rule["apiGroups"] for resource in rule["resources"]
                        for verb in rule["verbs"]}
    return granted


def differences(granted: set[Attribute], used: set[Attribute]) -> dict[str, list[Attribute]]:
    return {"missing": sorted(used - granted), "unused": sorted(granted - used)}


# --- the drive ------------------------------------------------------------------------------------------------


def submit(users, user: str = "alice", **overrides) -> Job:
    payload = job_payload(gpu_model=MODEL, gpus_per_node=8, command="torchrun train.py")
    payload.update(overrides)
    return Job.objects.get(pk=submission.submit_job(users[user], payload).pk)


def drive_the_executor(kube, users, settings) -> None:
    """Every operation the executor has, through the code paths production takes."""
    Cluster.objects.filter(pk=kube.cluster.pk).update(tenant_storage_gib=100, storage_class="standard")
    kube.cluster.refresh_from_db()
    single = submit(users, gpus_per_node=4)  # namespace, quota, policy, claim, priority class, token, Job
    gang = submit(users, nodes=2, task_type="evaluation")  # and a headless Service
    Quota.objects.filter(tenant__name="vision", gpu_model=MODEL).update(limit_gpus=24)
    cancelled = submit(users, gpus_per_node=1)  # the quota changed: the ResourceQuota is patched
    assert {Job.objects.get(pk=j.pk).status for j in (single, gang, cancelled)} == {JobStatus.DISPATCHING}

    sync = ClusterSync(Cluster.objects.get(pk=kube.cluster.pk))
    sync.resync()  # pods of every namespace, listed
    sync.watch(1)  # and watched
    assert Job.objects.get(pk=single.pk).status == JobStatus.RUNNING
    assert read_job_log(Job.objects.select_related("cluster").get(pk=single.pk), 20).error == ""

    namespace, name = kube.objects_of(gang)
    Job.objects.filter(pk=gang.pk).update(retry_count=2)  # retries used up: the failure is final
    kube.fake.exit(namespace, name, code=1, index=1, log="rank 8 up\nTraceback: boom", others=1)
    kube.sync()  # diagnosis: the Job's conditions, the nodes, the pods' logs; then the attempt is deleted
    assert Job.objects.get(pk=gang.pk).status == JobStatus.FAILED

    job_actions.cancel_job(users["alice"], Job.objects.get(pk=cancelled.pk), "no longer needed")

    settings.KUBERNETES = {**settings.KUBERNETES, "INGRESS_HOST": "gpus.example.org"}
    notebook = submit(users, gpus_per_node=1, kind="notebook", task_type="notebook")  # Job, Service, Ingress
    replica = submit(users, gpus_per_node=1, kind="service", task_type="inference", replicas=1)  # a Deployment
    for job in (notebook, replica):
        job_actions.cancel_job(users["alice"], Job.objects.get(pk=job.pk), "done")  # deleted per kind
    executor_for(kube.cluster).release_group(replica.group)  # the shared Service and Ingress go

    kube.fake.start_pods = False
    stuck = submit(users, gpus_per_node=1)  # stays dispatching: the reconciler looks its Job up
    submit(users, gpus_per_node=1, kind="service", task_type="inference", replicas=1)  # and a Deployment
    report = reconcile(now=timezone.now() + timedelta(hours=1))  # and lists the portal's Jobs everywhere
    assert not report.errors and Job.objects.get(pk=stuck.pk).status == JobStatus.DISPATCHING


# --- the tests --------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_executors_cluster_role_grants_exactly_what_the_executor_uses(users, tmp_path, settings):
    with served_cluster(tmp_path, settings, "rbac", retries=1) as kube:
        kube.fake.access = []  # record from here on (FakeKubernetes(record_access=True) does it from the start)
        drive_the_executor(kube, users, settings)
        used = set(kube.fake.access)

    referenced = {attributes_of(api_class, method) for api_class, method in referenced_client_methods()}
    assert referenced - used == set(), "calls in the code the drive did not make: extend drive_the_executor"
    watched = {(group, resource, "watch") for group, resource, verb in referenced if verb == "list"}
    assert used - referenced - watched == set(), "requests no client method of the executor explains"

    granted = granted_to(render_base(tmp_path), SERVICE_ACCOUNT)
    assert differences(granted, used) == {"missing": [], "unused": []}
    # What the issue listed and the code does not use is not granted.
    assert not {resource for _group, resource, _verb in granted} & {"events"}


def test_the_comparison_sees_a_missing_verb_an_unused_one_and_a_wildcard(tmp_path):
    objects = render_base(tmp_path)
    granted = granted_to(objects, SERVICE_ACCOUNT)
    assert ("", "pods/log", "get") in granted and ("batch", "jobs", "create") in granted
    [role] = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpuportal-executor"]
    jobs_rule = next(r for r in role["rules"] if r["resources"] == ["jobs"])

    jobs_rule["verbs"].remove("delete")  # a cancel would be refused
    assert differences(granted_to(objects, SERVICE_ACCOUNT), granted) == {
        "missing": [("batch", "jobs", "delete")], "unused": []}
    jobs_rule["verbs"] += ["delete", "update"]  # more than the code asks
    assert differences(granted_to(objects, SERVICE_ACCOUNT), granted) == {
        "missing": [], "unused": [("batch", "jobs", "update")]}
    role["rules"].append({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
    assert ("*", "*", "*") in differences(granted_to(objects, SERVICE_ACCOUNT), granted)["unused"]
    # Granted to another account: not the executor's.
    assert granted_to(objects, ("default", "gpuportal-executor")) == set()


def test_client_methods_translate_to_the_attributes_a_real_api_server_sees():
    assert attributes_of("CoreV1Api", "read_namespaced_pod_log") == ("", "pods/log", "get")
    assert attributes_of("CoreV1Api", "list_pod_for_all_namespaces") == ("", "pods", "list")
    assert attributes_of("CoreV1Api", "create_namespace") == ("", "namespaces", "create")
    assert attributes_of("CoreV1Api", "patch_namespaced_resource_quota") == ("", "resourcequotas", "patch")
    assert attributes_of("BatchV1Api", "delete_namespaced_job") == ("batch", "jobs", "delete")
    assert attributes_of("SchedulingV1Api", "create_priority_class") == ("scheduling.k8s.io", "priorityclasses",
                                                                        "create")
    assert attributes_of("NetworkingV1Api", "create_namespaced_network_policy") == (
        "networking.k8s.io", "networkpolicies", "create")
    assert attributes_of("CoreV1Api", "delete_collection_namespaced_pod") == ("", "pods", "deletecollection")
    assert attributes_of("CoreV1Api", "replace_namespaced_service") == ("", "services", "update")
