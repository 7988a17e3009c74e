"""The Kubernetes objects for tenants and jobs, as plain dicts (what ``k8s_manifests`` prints).

Every object validates against the Kubernetes 1.30 schema in strict mode (``kubernetes-validate``); a
test checks each job shape. Names are deterministic (``gp-<job>-a<attempt>``), so a dispatch that is run
again finds its objects (409) instead of making copies.

The kinds of work (``JobSpec.kind``) take these shapes, each pinned to the node the scheduler chose:

* batch: a token Secret, a headless Service when it spans nodes, a ``batch/v1`` Job;
* named ports (``tensorboard:6006``) of a batch job, an array task or a notebook: container ports of the main
  container and ports of the job's Service (the notebook's, the headless one of a job that spans nodes, whose
  first rank serves them, or a ClusterIP Service of its own), which the portal's proxy reaches;
* array task: the same, with its index in the environment (``GPUPORTAL_ARRAY_INDEX``, ``SLURM_ARRAY_TASK_ID``);
* notebook: the batch Job running Jupyter behind ``/jobs/<id>/open/``, its secret token in the attempt's Secret,
  a ClusterIP Service on port 8888 and, when the cluster has an ingress host, an Ingress whose nginx asks the
  portal (``auth-url``) whether the reader may open it;
* service replica: an ``apps/v1`` Deployment of one pod per replica job (each replica is a job of its own,
  scheduled by the portal; Kubernetes only restarts its container), and one Service (and optional Ingress) per
  service that every ready replica of every revision sits behind, so a rollout swaps replicas under one name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet import vendors
from fleet.vendors import DEFAULT_VENDOR, Vendor
from gpuportal.text.names import dns_label
from gpuportal.web.paths import portal_path
from scheduling.executors.base import port_environment
from scheduling.models import NamedPort

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuportal"}
JOB_LABEL = "gpuportal.io/job"
TENANT_LABEL = "gpuportal.io/tenant"
PROJECT_LABEL = "gpuportal.io/project"
ATTEMPT_LABEL = "gpuportal.io/attempt"
SERVICE_LABEL = "gpuportal.io/service"
REVISION_LABEL = "gpuportal.io/revision"
REPLICA_LABEL = "gpuportal.io/replica"
ARRAY_LABEL = "gpuportal.io/array"
ARRAY_INDEX_LABEL = "gpuportal.io/array-index"
NOTEBOOK_PORT = 8888
DEFAULT_HEALTH_PATH = "/healthz"
#: Idle websockets (a kernel that computes for long, a terminal) must outlive nginx's default 60 s.
WEBSOCKET_TIMEOUT_SECONDS = "3600"
MASTER_PORT = 29500
#: What each vendor's devices are asked for by and what its container learns (the extended resource of its
#: device plugin, its runtime's variables, how a share of a device is asked for) is its record in
#: ``fleet.vendors``. The device plugins set the device visibility themselves (``NVIDIA_VISIBLE_DEVICES``,
#: ``ASCEND_VISIBLE_DEVICES`` for the Ascend runtime, the AMD plugin's device nodes): never overridden here; the
#: runtimes' logical indices inside the container (``Vendor.sets_visible_devices``) count the devices the pod
#: got from 0. The log levels of ``Vendor.env`` make the collective library print the warning lines
#: ``diagnosis`` reads. A job's own environment wins. A cluster whose plugins name the resources otherwise says
#: so in ``Cluster.accelerator_resources``, per vendor or per model (``{"huawei": "huawei.com/Ascend910B"}``).


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
    max_runtime_minutes: int | None
    gpu_milli: int = 1000
    cpu_milli: int = 0
    memory_mib: int = 0
    resume_from: str = ""
    env: dict = field(default_factory=dict)
    kind: str = "batch"  # WorkloadKind: batch, notebook, service, array
    group_id: int | None = None  # the array or the service
    group_index: int | None = None  # array index, or replica number
    group_size: int | None = None
    group_indices: tuple[int, ...] = ()
    revision: int | None = None  # a service replica's revision
    port: int | None = None  # a service's port
    health_path: str = DEFAULT_HEALTH_PATH
    vendor: str = DEFAULT_VENDOR  # fleet.vendors name of the model the job landed on
    gpu_model: str = ""  # that model (an Ascend 310P asks for another resource than a 910)
    ports: tuple[tuple[str, int], ...] = ()  # named ports: (name, port)


@dataclass(frozen=True)
class IngressConfig:
    """Where notebooks and services are published (``settings.KUBERNETES["INGRESS_HOST"]`` and friends); the
    portal at ``portal_url`` answers nginx's auth subrequests."""

    host: str
    portal_url: str
    class_name: str = ""
    tls_secret: str = ""
    #: "namespace/name" of the ConfigMap of headers nginx adds to its auth subrequests (the shared secret that
    #: makes the portal answer them with the notebook's token); empty: none, and the portal refuses them.
    auth_headers: str = ""


def namespace_name(prefix: str, tenant: str) -> str:
    return dns_label(f"{prefix}{tenant}")


def object_name(spec: JobSpec) -> str:
    return f"gp-{spec.id}-a{spec.attempt}"


def token_secret_name(spec: JobSpec) -> str:
    return f"{object_name(spec)}-token"


def group_service_name(group_id: int) -> str:
    """The one Service of an inference service, shared by its replicas of every revision."""
    return f"gp-svc-{group_id}"


def notebook_path(job_id: int) -> str:
    return portal_path("scheduling:notebook-open-root", job_id)


def cluster_url(name: str, namespace_: str, port: int) -> str:
    """How pods (and a portal inside the cluster) reach a Service."""
    return f"http://{name}.{namespace_}.svc.cluster.local:{port}"


def port_url(name: str, namespace_: str, port: int, node_count: int) -> str:
    """How the portal reaches a job's named port: its Service, or on a job that spans nodes its first rank's
    address under the headless Service."""
    host = f"{name}-0.{name}" if node_count > 1 else name
    return cluster_url(host, namespace_, port)


def _container_ports(spec: JobSpec) -> list[dict]:
    return [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in spec.ports]


def _service_ports(spec: JobSpec) -> list[dict]:
    return [{"name": name, "port": port, "targetPort": port, "protocol": "TCP"} for name, port in spec.ports]


def labels(spec: JobSpec) -> dict:
    found = {**MANAGED_BY, JOB_LABEL: str(spec.id), TENANT_LABEL: dns_label(spec.tenant),
             PROJECT_LABEL: dns_label(spec.project), ATTEMPT_LABEL: str(spec.attempt)}
    if spec.kind == "service" and spec.group_id is not None:
        found.update({SERVICE_LABEL: str(spec.group_id), REVISION_LABEL: str(spec.revision or 1),
                      REPLICA_LABEL: str(spec.group_index or 0)})
    elif spec.kind == "array" and spec.group_id is not None:
        found.update({ARRAY_LABEL: str(spec.group_id), ARRAY_INDEX_LABEL: str(spec.group_index or 0)})
    return found


def group_labels(spec: JobSpec) -> dict:
    """A service's shared objects: no job label, they outlive every replica."""
    return {**MANAGED_BY, TENANT_LABEL: dns_label(spec.tenant), PROJECT_LABEL: dns_label(spec.project),
            SERVICE_LABEL: str(spec.group_id)}


def namespace(prefix: str, tenant: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_name(prefix, tenant),
                         "labels": {**MANAGED_BY, TENANT_LABEL: dns_label(tenant)}}}


def resource_quota(prefix: str, tenant: str, gpu_limit: int | dict[str, int]) -> dict:
    """The tenant's GPU limit again, enforced by Kubernetes: a second line of defence. ``gpu_limit``: one number
    (NVIDIA's ``nvidia.com/gpu``), or the limit per extended resource ({"nvidia.com/gpu": 32, "amd.com/gpu": 8}:
    each vendor's models together count against their vendor's resource)."""
    limits = gpu_limit if isinstance(gpu_limit, dict) else {vendors.default_vendor().resource: gpu_limit}
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpuportal-gpus", "namespace": namespace_name(prefix, tenant), "labels": MANAGED_BY},
            "spec": {"hard": {f"requests.{name}": str(limit) for name, limit in sorted(limits.items())}}}


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


def for_tenant(prefix: str, tenant: str, gpu_limit: int | dict[str, int], storage_gib: int = 0,
               storage_class: str = "") -> list[dict]:
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


def token_secret(prefix: str, spec: JobSpec, token: str, notebook_token: str = "") -> dict:
    """The attempt's report token and, for a notebook, the Jupyter token only the portal and the server know."""
    data = {"token": token}
    if spec.kind == "notebook":
        data["notebook-token"] = notebook_token or "<notebook token: issued at dispatch>"  # noqa: S105
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": token_secret_name(spec), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": labels(spec)},
            "stringData": data}


def headless_service(prefix: str, spec: JobSpec) -> dict:
    """Lets the ranks of a multi-node job find each other as ``<job>-<index>.<service>``."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": object_name(spec), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": labels(spec)},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)},
                     "ports": [{"name": "rendezvous", "port": MASTER_PORT, "protocol": "TCP"},
                               *_service_ports(spec)]}}


def ports_service(prefix: str, spec: JobSpec) -> dict:
    """The named ports of a single-node batch job or array task (a notebook's are on its own Service)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": object_name(spec), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": labels(spec)},
            "spec": {"type": "ClusterIP", "selector": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)},
                     "ports": _service_ports(spec)}}


def device_resource(vendor: str, model: str = "", overrides: dict | None = None) -> str:
    """The extended resource one whole device of ``model`` (made by ``vendor``) is asked for by: the cluster's
    ``accelerator_resources`` for the model, else for the vendor, else the vendor's device plugin's name (for
    the model's family where the plugin advertises it under its own, an Ascend 310P)."""
    overrides = overrides or {}
    if model and overrides.get(model):
        return str(overrides[model])
    if overrides.get(vendor):
        return str(overrides[vendor])
    record = vendors.vendor_or_default(vendor)
    for family, name in record.model_resources:
        if model.startswith(family):
            return name
    return record.resource


def partition_tiers(record: Vendor, resource: str) -> list[tuple[int, dict]]:
    """The vendor's static partitions of a device resource (Ascend's vNPU templates) as share tiers: (largest
    share in milli-devices the partition holds, its resources). A resource without documented partitions (a
    cluster's own name) uses those of the vendor's own resource."""
    found = record.partitions.get(resource) or record.partitions[record.resource]
    return [(1000 * n // found.cores, {f"{resource}-{n}c": "1"}) for n in found.templates]


def _share_mapping(spec: JobSpec, resource: str, share_resources: dict | None):
    """How this cluster shares this vendor's devices: a mapping of resources (HAMi style, with ``{percent}`` and
    ``{milli}``), a list of ``[largest share in milli, resources]`` tiers (vNPU templates), or None (no sharing:
    a share takes a whole device).

    ``Cluster.gpu_share_resources`` is either one flat mapping (NVIDIA's, as before vendors) or one entry per
    vendor (``{"huawei": [[125, {"huawei.com/Ascend910-4c": 1}], ...], "hygon": {"hygon.com/dcunum": 1, ...}}``).
    Without an entry: the vendor's record says (NVIDIA: HAMi's names, Ascend: the documented vNPU templates,
    the others none)."""
    share_resources = share_resources or {}
    per_vendor = any(key in vendors.VENDORS for key in share_resources)
    if per_vendor and spec.vendor in share_resources:
        return share_resources[spec.vendor]
    if share_resources and not per_vendor and spec.vendor == DEFAULT_VENDOR:
        return share_resources
    record = vendors.VENDORS.get(spec.vendor)
    if record is None:  # a vendor the registry does not know shares nothing
        return None
    if record.share_resources:
        return dict(record.share_resources)
    if record.partitions:
        return partition_tiers(record, resource)
    return None


def gpu_limits(spec: JobSpec, share_resources: dict | None = None, accelerator_resources: dict | None = None) -> dict:
    """The container's device limits: ``gpus_per_node`` of the vendor's resource, or for a share of one device
    what the cluster's sharing mode asks (see ``_share_mapping``)."""
    resource = device_resource(spec.vendor, spec.gpu_model, accelerator_resources)
    if spec.gpu_milli >= 1000:
        return {resource: str(spec.gpus_per_node)}
    mapping = _share_mapping(spec, resource, share_resources)
    if isinstance(mapping, list):  # tiers: the smallest that holds the share
        mapping = next((dict(resources) for most, resources in sorted(mapping, key=lambda tier: int(tier[0]))
                        if int(most) >= spec.gpu_milli), None)
    if not mapping:
        return {resource: "1"}
    percent = max(1, round(spec.gpu_milli / 10))

    def filled(text) -> str:
        return (str(text).replace("{percent}", str(percent)).replace("{milli}", str(spec.gpu_milli))
                .replace("{resource}", resource))

    return {filled(name): filled(value) for name, value in mapping.items()}


def _vendor_env(record: Vendor, spec: JobSpec) -> dict:
    """The vendor's runtime and collective-library settings (``Vendor.env``, the visible devices, and what
    ranks on several nodes need)."""
    env = dict(record.env)
    if record.sets_visible_devices:
        env[record.visible_devices] = ",".join(str(i) for i in range(max(1, spec.gpus_per_node)))
    if spec.node_count > 1:
        env.update(record.multi_node_env)
    return env


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
    env.append({"name": "GPUPORTAL_ACCELERATOR_VENDOR", "value": spec.vendor})
    record = vendors.vendor_or_default(spec.vendor)
    env.extend({"name": k, "value": v} for k, v in _vendor_env(record, spec).items() if k not in spec.env)
    if record.pod_ip_variable and spec.node_count > 1 and record.pod_ip_variable not in spec.env:
        # the collective library's first contact between ranks goes over the pod's own address
        env.append({"name": record.pod_ip_variable, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    env.extend(_kind_env(spec))
    env.extend({"name": k, "value": v} for k, v in port_environment([NamedPort(name=name, port=port)
                                                                      for name, port in spec.ports]).items()
               if k not in spec.env)
    env.extend({"name": k, "value": str(v)} for k, v in sorted(spec.env.items()))
    return env


def _kind_env(spec: JobSpec) -> list[dict]:
    """What an array task, a replica or a notebook learns about its place (Slurm's names too, for scripts
    written for Slurm arrays)."""
    if spec.kind == "array":
        index, size = spec.group_index or 0, spec.group_size or len(spec.group_indices) or 1
        env = {"GPUPORTAL_ARRAY_ID": spec.group_id, "GPUPORTAL_ARRAY_INDEX": index, "GPUPORTAL_ARRAY_SIZE": size,
               "SLURM_ARRAY_JOB_ID": spec.group_id, "SLURM_ARRAY_TASK_ID": index, "SLURM_ARRAY_TASK_COUNT": size}
        if spec.group_indices:
            env.update(SLURM_ARRAY_TASK_MIN=min(spec.group_indices), SLURM_ARRAY_TASK_MAX=max(spec.group_indices))
        return [{"name": k, "value": str(v)} for k, v in env.items()]
    if spec.kind == "service":
        return [{"name": "GPUPORTAL_SERVICE_ID", "value": str(spec.group_id)},
                {"name": "GPUPORTAL_SERVICE_REPLICA", "value": str(spec.group_index or 0)},
                {"name": "GPUPORTAL_REVISION", "value": str(spec.revision or 1)},
                {"name": "PORT", "value": str(spec.port)}]
    if spec.kind == "notebook":
        return [{"name": "JUPYTER_TOKEN",
                 "valueFrom": {"secretKeyRef": {"name": token_secret_name(spec), "key": "notebook-token"}}},
                {"name": "GPUPORTAL_NOTEBOOK_URL", "value": notebook_path(spec.id)}]
    return []


def _pod_spec(spec: JobSpec, portal_url: str, share_resources: dict | None, data_claim: bool,
              restart_policy: str, accelerator_resources: dict | None = None) -> tuple[dict, dict]:
    """The pod of any kind (pinned to the scheduler's nodes, its GPUs, shared memory, the data claim) and its
    main container, for the caller to add ports, probes and the command its kind runs."""
    resources = {"limits": gpu_limits(spec, share_resources, accelerator_resources)}
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
    pod_spec = {"restartPolicy": restart_policy, "priorityClassName": f"gpuportal-{dns_label(spec.task_type)}",
                "affinity": affinity, "containers": [container], "volumes": volumes,
                "enableServiceLinks": False}
    return pod_spec, container


def notebook_command(spec: JobSpec) -> list[str]:
    """Jupyter behind the portal's path; Kubernetes puts the token in (``$(JUPYTER_TOKEN)``), no shell needed."""
    return ["jupyter", "lab", "--ip=0.0.0.0", f"--port={NOTEBOOK_PORT}", "--no-browser",
            f"--ServerApp.base_url={notebook_path(spec.id)}", "--ServerApp.token=$(JUPYTER_TOKEN)"]


def job(prefix: str, spec: JobSpec, portal_url: str, *, share_resources: dict | None = None,
        data_claim: bool = False, accelerator_resources: dict | None = None) -> dict:
    """A ``batch/v1`` Job pinned to the nodes the scheduler chose; Indexed with one pod per node when the
    job spans nodes. ``backoffLimit: 0``: retries are the portal's, so it can avoid a faulty node. No
    ``activeDeadlineSeconds`` when the job has no max runtime."""
    name, job_labels = object_name(spec), labels(spec)
    pod_spec, container = _pod_spec(spec, portal_url, share_resources, data_claim, "Never", accelerator_resources)
    if spec.kind == "notebook":
        container["command"] = notebook_command(spec)
        container["ports"] = [{"name": "notebook", "containerPort": NOTEBOOK_PORT, "protocol": "TCP"},
                              *_container_ports(spec)]
        # Jupyter's /api answers without the token: ready once the server serves its base URL
        container["readinessProbe"] = {"httpGet": {"path": f"{notebook_path(spec.id)}api", "port": "notebook"},
                                       "periodSeconds": 5, "failureThreshold": 3}
    elif spec.ports:
        container["ports"] = _container_ports(spec)
    job_spec = {"backoffLimit": 0, "ttlSecondsAfterFinished": 7 * 24 * 3600, "parallelism": spec.node_count,
                "completions": spec.node_count,
                "template": {"metadata": {"labels": job_labels}, "spec": pod_spec}}
    if spec.max_runtime_minutes:
        job_spec["activeDeadlineSeconds"] = spec.max_runtime_minutes * 60
    if spec.node_count > 1:
        job_spec["completionMode"] = "Indexed"
        pod_spec["subdomain"] = name
        pod_spec["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)}},
            "topologyKey": "kubernetes.io/hostname"}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace_name(prefix, spec.tenant), "labels": job_labels},
            "spec": job_spec}


def deployment(prefix: str, spec: JobSpec, portal_url: str, *, share_resources: dict | None = None,
               data_claim: bool = False, accelerator_resources: dict | None = None) -> dict:
    """One replica of a service: a Deployment of one pod, so that Kubernetes restarts a crashed container
    (``restartPolicy: Always``) while the portal decides how many replicas there are and where. ``Recreate``:
    the pod holds its node's GPUs, a second one could not start beside it."""
    name, replica_labels = object_name(spec), labels(spec)
    pod_spec, container = _pod_spec(spec, portal_url, share_resources, data_claim, "Always",
                                    accelerator_resources)
    container["ports"] = [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}]
    def check(**timing) -> dict:  # a fresh dict each: printed YAML without anchors
        return {"httpGet": {"path": spec.health_path, "port": "http"}, **timing}

    # Loading a model can take long: the startup probe allows 30 minutes before liveness counts.
    container["startupProbe"] = check(periodSeconds=10, failureThreshold=180)
    container["readinessProbe"] = check(periodSeconds=5, failureThreshold=3, timeoutSeconds=2)
    container["livenessProbe"] = check(periodSeconds=20, failureThreshold=3, timeoutSeconds=5)
    pod_spec["terminationGracePeriodSeconds"] = 30
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace_name(prefix, spec.tenant), "labels": replica_labels},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 1,
                     "selector": {"matchLabels": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)}},
                     "template": {"metadata": {"labels": replica_labels}, "spec": pod_spec}}}


def notebook_service(prefix: str, spec: JobSpec) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": object_name(spec), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": labels(spec)},
            "spec": {"type": "ClusterIP", "selector": {JOB_LABEL: str(spec.id), ATTEMPT_LABEL: str(spec.attempt)},
                     "ports": [{"name": "notebook", "port": NOTEBOOK_PORT, "targetPort": NOTEBOOK_PORT,
                                "protocol": "TCP"}, *_service_ports(spec)]}}


def group_service(prefix: str, spec: JobSpec) -> dict:
    """The service's address: every ready replica, whatever its revision (Kubernetes sends traffic only to
    pods whose readiness probe passes, so a rollout's new replica takes traffic once it is ready)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": group_service_name(spec.group_id), "namespace": namespace_name(prefix, spec.tenant),
                         "labels": group_labels(spec)},
            "spec": {"type": "ClusterIP", "selector": {SERVICE_LABEL: str(spec.group_id)},
                     "ports": [{"name": "http", "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}]}}


def _ingress(prefix: str, spec: JobSpec, ingress: IngressConfig, *, name: str, object_labels: dict, path: str,
             path_type: str, service: str, port: int, auth_url: str, extra: dict | None = None) -> dict:
    annotations = {
        "nginx.ingress.kubernetes.io/auth-url": auth_url,
        # the portal's answer may carry the upstream's credentials (a notebook's token), passed on to it
        "nginx.ingress.kubernetes.io/auth-response-headers": "Authorization",
        "nginx.ingress.kubernetes.io/proxy-read-timeout": WEBSOCKET_TIMEOUT_SECONDS,
        "nginx.ingress.kubernetes.io/proxy-send-timeout": WEBSOCKET_TIMEOUT_SECONDS,
        "nginx.ingress.kubernetes.io/proxy-body-size": "0",
        "nginx.ingress.kubernetes.io/proxy-buffering": "off",
        **(extra or {}),
    }
    if ingress.auth_headers:
        annotations["nginx.ingress.kubernetes.io/auth-proxy-set-headers"] = ingress.auth_headers
    spec_ = {"rules": [{"host": ingress.host, "http": {"paths": [{
        "path": path, "pathType": path_type,
        "backend": {"service": {"name": service, "port": {"number": port}}}}]}}]}
    if ingress.class_name:
        spec_["ingressClassName"] = ingress.class_name
    if ingress.tls_secret:
        spec_["tls"] = [{"hosts": [ingress.host], "secretName": ingress.tls_secret}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": namespace_name(prefix, spec.tenant), "labels": object_labels,
                         "annotations": annotations},
            "spec": spec_}


def notebook_ingress(prefix: str, spec: JobSpec, ingress: IngressConfig) -> dict:
    """``/jobs/<id>/open/`` on the ingress host; nginx asks the portal first (204: the reader may, 401/403:
    not), and the portal's answer carries ``Authorization: token <notebook token>`` for Jupyter."""
    portal = ingress.portal_url.rstrip("/")
    return _ingress(prefix, spec, ingress, name=object_name(spec), object_labels=labels(spec),
                    path=notebook_path(spec.id), path_type="Prefix", service=object_name(spec), port=NOTEBOOK_PORT,
                    auth_url=portal + portal_path("scheduling:notebook-auth", spec.id))


def group_ingress(prefix: str, spec: JobSpec, ingress: IngressConfig) -> dict:
    """``/services/<id>/…`` on the ingress host, rewritten to ``/…`` for the server; nginx asks the portal
    (``/services/<id>/auth/``) first."""
    portal = ingress.portal_url.rstrip("/")
    service_path = portal_path("scheduling:service-detail", spec.group_id).rstrip("/")
    return _ingress(prefix, spec, ingress, name=group_service_name(spec.group_id), object_labels=group_labels(spec),
                    path=service_path + "(/|$)(.*)", path_type="ImplementationSpecific",
                    service=group_service_name(spec.group_id), port=spec.port,
                    auth_url=portal + portal_path("scheduling:service-auth", spec.group_id),
                    extra={"nginx.ingress.kubernetes.io/use-regex": "true",
                           "nginx.ingress.kubernetes.io/rewrite-target": "/$2"})


def group_objects(prefix: str, spec: JobSpec, ingress: IngressConfig | None = None) -> list[dict]:
    """What a service's replicas share: made by the first replica's dispatch (409 for the others), deleted by
    ``release_group``."""
    objects = [group_service(prefix, spec)]
    if ingress is not None:
        objects.append(group_ingress(prefix, spec, ingress))
    return objects


def for_job(prefix: str, spec: JobSpec, portal_url: str, token: str, *, share_resources=None,
            data_claim: bool = False, notebook_token: str = "", ingress: IngressConfig | None = None,
            accelerator_resources: dict | None = None) -> list[dict]:
    """Everything one attempt of a job needs, in creation order (a service replica: its service's shared
    objects first, so that the replica is reachable as soon as it is ready)."""
    objects = [token_secret(prefix, spec, token, notebook_token)]
    options = {"share_resources": share_resources, "data_claim": data_claim,
               "accelerator_resources": accelerator_resources}
    if spec.kind == "service":
        return [*group_objects(prefix, spec, ingress), *objects, deployment(prefix, spec, portal_url, **options)]
    if spec.kind == "notebook":
        objects.append(notebook_service(prefix, spec))
        if ingress is not None:
            objects.append(notebook_ingress(prefix, spec, ingress))
    elif spec.node_count > 1:
        objects.append(headless_service(prefix, spec))
    elif spec.ports:
        objects.append(ports_service(prefix, spec))
    objects.append(job(prefix, spec, portal_url, **options))
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
    if kind == "named-ports":
        return JobSpec(**{**base, "command": "tensorboard --logdir /data/runs --bind_all --port 6006 & torchrun "
                                             "train.py"}, gpus_per_node=2, node_count=1, nodes=("gpu-01",),
                       ports=(("tensorboard", 6006), ("ui", 8080)))
    if kind == "resumed":
        return JobSpec(**{**base, "attempt": 2}, gpus_per_node=4, node_count=1, nodes=("gpu-06",),
                       resume_from="/data/ckpt/step-12000.pt")
    if kind == "notebook":
        return JobSpec(**{**base, "task_type": "notebook", "command": "", "max_runtime_minutes": None,
                          "image": "registry.local/jupyter-pytorch:2.4-cuda12"}, gpus_per_node=1, node_count=1,
                       nodes=("gpu-02",), kind="notebook")
    if kind == "inference-service":
        return JobSpec(**{**base, "task_type": "inference", "max_runtime_minutes": None,
                          "image": "registry.local/vllm:0.6-cuda12",
                          "command": "vllm serve /data/models/llama-3-8b --port $PORT"},
                       gpus_per_node=1, node_count=1, nodes=("gpu-03",), kind="service", group_id=77, group_index=0,
                       group_size=2, revision=2, port=8000, health_path="/health")
    if kind == "array":
        return JobSpec(**{**base, "task_type": "evaluation", "command": "python eval.py --shard $GPUPORTAL_ARRAY_INDEX",
                          "max_runtime_minutes": 60}, gpus_per_node=1, node_count=1, nodes=("gpu-04",),
                       kind="array", group_id=55, group_index=3, group_size=10, group_indices=tuple(range(10)))
    if kind in VENDOR_EXAMPLES:
        vendor, model, image, node = VENDOR_EXAMPLES[kind]
        return JobSpec(**{**base, "image": image}, gpus_per_node=8, node_count=1, nodes=(node,), vendor=vendor,
                       gpu_model=model)
    return JobSpec(**base, gpus_per_node=2, node_count=1, nodes=("gpu-01",))


#: A single-node job per vendor whose record has an example (all but NVIDIA's, the other shapes): (vendor, model,
#: image, node) for ``--example <name>``, by name.
VENDOR_EXAMPLES = dict(sorted((v.example.name, (v.name, v.example.model, v.example.image, v.example.node))
                              for v in vendors.VENDORS.values() if v.example))
EXAMPLES = ("single-node", "multi-node", "fractional", "resumed")
#: The shapes of the other kinds of work (notebook, service replica, array task).
WORKLOAD_EXAMPLES = ("notebook", "inference-service", "array")
#: A job with named ports (TensorBoard and a web UI), reached through its Service.
PORT_EXAMPLES = ("named-ports",)
ALL_EXAMPLES = EXAMPLES + WORKLOAD_EXAMPLES + PORT_EXAMPLES + tuple(VENDOR_EXAMPLES)
#: The ingress the examples are published on when the settings name none.
EXAMPLE_INGRESS = IngressConfig(host="gpus.example.org", portal_url="https://portal.example.org",
                                class_name="nginx")
