"""The Kubernetes objects for tenants and jobs, as plain dicts (what ``k8s_manifests`` prints).

Every object validates against the Kubernetes 1.30 schema in strict mode (``kubernetes-validate``); a
test checks each job shape. Names are deterministic (``gp-<job>-a<attempt>``), so a dispatch that is run
again finds its objects (409) instead of making copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuportal"}
JOB_LABEL = "gpuportal.io/job"
TENANT_LABEL = "gpuportal.io/tenant"
PROJECT_LABEL = "gpuportal.io/project"
ATTEMPT_LABEL = "gpuportal.io/attempt"
MASTER_PORT = 29500
#: HAMi-style mapping of a GPU share to extended resources (used when the cluster names none).
DEFAULT_SHARE_RESOURCES = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "{percent}",
                           "nvidia.com/gpucores": "{percent}"}


def dns_label(text: str, limit: int = 63) -> str:
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:limit].rstrip("-") or "x"


@dataclass(frozen=True)
class JobSpec:
    """What the manifests need of a job (plain values, so ``--example`` needs no database)."""

    id: int
    attempt: int
    tenant: str
    project: str
    task_type: str
    image: str
    command: str
    gpus_per_node: int
    node_count: int
    nodes: tuple[str, ...]
    max_runtime_minutes: int
    gpu_milli: int = 1000
    cpu_milli: int = 0
    memory_mib: int = 0
    resume_from: str = ""
    env: dict = field(default_factory=dict)


def namespace_name(prefix: str, tenant: str) -> str:
    return dns_label(f"{prefix}{tenant}")


def object_name(spec: JobSpec) -> str:
    return f"gp-{spec.id}-a{spec.attempt}"


def token_secret_name(spec: JobSpec) -> str:
    return f"{object_name(spec)}-token"


def labels(spec: JobSpec) -> dict:
    return {**MANAGED_BY, JOB_LABEL: str(spec.id), TENANT_LABEL: dns_label(spec.tenant),
            PROJECT_LABEL: dns_label(spec.project), ATTEMPT_LABEL: str(spec.attempt)}


def namespace(prefix: str, tenant: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_name(prefix, tenant),
                         "labels": {**MANAGED_BY, TENANT_LABEL: dns_label(tenant)}}}


def resource_quota(prefix: str, tenant: str, gpu_limit: int) -> dict:
    """The tenant's GPU limit again, enforced by Kubernetes: a second line of defence."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpuportal-gpus", "namespace": namespace_name(prefix, tenant), "labels": MANAGED_BY},
            "spec": {"hard": {"requests.nvidia.com/gpu": str(gpu_limit)}}}


def network_policy(prefix: str, tenant: str) -> dict:
    """Refuse traffic from other tenants' namespaces; pods of this tenant (ranks of one job) still talk."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "gpuportal-tenant-isolation", "namespace": namespace_name(prefix, tenant),
                         "labels": MANAGED_BY},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"namespaceSelector": {
                         "matchLabels": {TENANT_LABEL: dns_label(tenant)}}}]}]}}


def storage_claim(prefix: str, tenant: str, gib: int, storage_class: str = "") -> dict:
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": f"{gib}Gi"}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "gpuportal-data", "namespace": namespace_name(prefix, tenant), "labels": MANAGED_BY},
            "spec": spec}


def for_tenant(prefix: str, tenant: str, gpu_limit: int, storage_gib: int = 0, storage_class: str = "") -> list[dict]:
    """A tenant's namespace and what isolates it, in creation order."""
    objects = [namespace(prefix, tenant), resource_quota(prefix, tenant, gpu_limit), network_policy(prefix, tenant)]
    if storage_gib:
        objects.append(storage_claim(prefix, tenant, storage_gib, storage_class))
    return objects


def priority_class(code: str, priority: int, description: str = "") -> dict:
    """One per task type. Preemption stays with the portal's scheduler, so Kubernetes never preempts."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"gpuportal-{dns_label(code)}", "labels": MANAGED_BY},
            "value": int(priority) * 1000, "preemptionPolicy": "Never", "globalDefault": False,
            "description": description or f"gpuportal task type {code}"}


def token_secret(prefix: str, spec: JobSpec, token: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": token_secret_name(spec), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": labels(spec)},
            "stringData": {"token": token}}


def headless_service(prefix: str, spec: JobSpec) -> dict:
    """Lets the ranks of a multi-node job find each other as ``<job>-<index>.<service>``."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": object_name(spec), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": labels(spec)},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)},
                     "ports": [{"name": "rendezvous", "port": MASTER_PORT, "protocol": "TCP"}]}}


def gpu_limits(spec: JobSpec, share_resources: dict | None = None) -> dict:
    if spec.gpu_milli >= 1000:
        return {"nvidia.com/gpu": str(spec.gpus_per_node)}
    percent = max(1, round(spec.gpu_milli / 10))
    mapping = share_resources or DEFAULT_SHARE_RESOURCES
    return {name: str(value).replace("{percent}", str(percent)).replace("{milli}", str(spec.gpu_milli))
            for name, value in mapping.items()}


def _env(spec: JobSpec, portal_url: str) -> list[dict]:
    name = object_name(spec)
    multi = spec.node_count > 1
    env = [
        {"name": "GPUPORTAL_JOB_ID", "value": str(spec.id)},
        {"name": "GPUPORTAL_ATTEMPT", "value": str(spec.attempt)},
        {"name": "GPUPORTAL_URL", "value": portal_url},
        {"name": "GPUPORTAL_JOB_TOKEN",
         "valueFrom": {"secretKeyRef": {"name": token_secret_name(spec), "key": "token"}}},
        {"name": "MASTER_ADDR", "value": f"{name}-0.{name}" if multi else "127.0.0.1"},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "NNODES", "value": str(spec.node_count)},
        {"name": "NPROC_PER_NODE", "value": str(spec.gpus_per_node)},
        {"name": "WORLD_SIZE", "value": str(spec.node_count * spec.gpus_per_node)},
    ]
    if multi:
        env.append({"name": "NODE_RANK", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}})
    else:
        env.append({"name": "NODE_RANK", "value": "0"})
    if spec.resume_from:
        env.append({"name": "GPUPORTAL_RESUME_FROM", "value": spec.resume_from})
    env.extend({"name": k, "value": str(v)} for k, v in sorted(spec.env.items()))
    return env


def job(prefix: str, spec: JobSpec, portal_url: str, *, share_resources: dict | None = None,
        data_claim: bool = False) -> dict:
    """A ``batch/v1`` Job pinned to the nodes the scheduler chose; Indexed with one pod per node when the
    job spans nodes. ``backoffLimit: 0``: retries are the portal's, so it can avoid a faulty node."""
    name, job_labels = object_name(spec), labels(spec)
    resources = {"limits": gpu_limits(spec, share_resources)}
    requests = {}
    if spec.cpu_milli:
        requests["cpu"] = f"{spec.cpu_milli}m"
    if spec.memory_mib:
        requests["memory"] = f"{spec.memory_mib}Mi"
    if requests:
        resources["requests"] = requests
    container = {"name": "main", "image": spec.image, "env": _env(spec, portal_url), "resources": resources,
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}  # noqa: S108 - NCCL's shared memory
    if spec.command.strip():
        container["command"] = ["/bin/sh", "-c", spec.command]
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if data_claim:
        container["volumeMounts"].append({"name": "data", "mountPath": "/data"})
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": "gpuportal-data"}})
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(spec.nodes)}]}]}}}
    pod_spec = {"restartPolicy": "Never", "priorityClassName": f"gpuportal-{dns_label(spec.task_type)}",
                "affinity": affinity, "containers": [container], "volumes": volumes,
                "enableServiceLinks": False}
    job_spec = {"backoffLimit": 0, "activeDeadlineSeconds": spec.max_runtime_minutes * 60,
                "ttlSecondsAfterFinished": 7 * 24 * 3600, "parallelism": spec.node_count,
                "completions": spec.node_count,
                "template": {"metadata": {"labels": job_labels}, "spec": pod_spec}}
    if spec.node_count > 1:
        job_spec["completionMode"] = "Indexed"
        pod_spec["subdomain"] = name
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)}},
            "topologyKey": "kubernetes.io/hostname"}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace_name(prefix, spec.tenant), "labels": job_labels},
            "spec": job_spec}


def for_job(prefix: str, spec: JobSpec, portal_url: str, token: str, *, share_resources=None,
            data_claim: bool = False) -> list[dict]:
    """Everything one attempt of a job needs, in creation order."""
    objects = [token_secret(prefix, spec, token)]
    if spec.node_count > 1:
        objects.append(headless_service(prefix, spec))
    objects.append(job(prefix, spec, portal_url, share_resources=share_resources, data_claim=data_claim))
    return objects


def example_spec(kind: str = "single-node") -> JobSpec:
    """The job shapes ``k8s_manifests --example`` prints and the schema test checks."""
    base = {"id": 1234, "attempt": 0, "tenant": "vision", "project": "detection", "task_type": "training",
            "image": "registry.local/pytorch:2.4-cuda12", "command": "torchrun train.py", "max_runtime_minutes": 600}
    if kind == "multi-node":
        return JobSpec(**base, gpus_per_node=8, node_count=4, nodes=("gpu-01", "gpu-02", "gpu-03", "gpu-04"),
                       cpu_milli=64000, memory_mib=512 * 1024)
    if kind == "fractional":
        return JobSpec(**{**base, "task_type": "notebook", "command": ""}, gpus_per_node=1, node_count=1,
                       nodes=("gpu-05",), gpu_milli=250)
    if kind == "resumed":
        return JobSpec(**{**base, "attempt": 2}, gpus_per_node=4, node_count=1, nodes=("gpu-06",),
                       resume_from="/data/ckpt/step-12000.pt")
    return JobSpec(**base, gpus_per_node=2, node_count=1, nodes=("gpu-01",))


EXAMPLES = ("single-node", "multi-node", "fractional", "resumed")
