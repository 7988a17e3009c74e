"""Run admitted jobs on a Kubernetes cluster with the official client.

Each tenant gets a namespace (labelled with the tenant) holding a ResourceQuota that mirrors its GPU
limit, a NetworkPolicy that refuses other tenants' namespaces and, when the cluster asks for one, a data
claim; task types become PriorityClasses. A job becomes a Secret (its report token), a headless Service
when it spans nodes, and a ``batch/v1`` Job pinned to the nodes the scheduler chose; a notebook adds its
Service (and Ingress); a service replica is a one-pod Deployment behind its service's shared Service (see
``manifests``). Object names are deterministic per attempt, so a dispatch that runs twice finds its objects
(409) and creates nothing new. Status comes back through ``sync`` (a watch on pods plus a periodic resync),
not through ``observe``; what a running notebook or replica shows (ready, restarts, a crash loop) through
``probe``, asked when read.
"""

from __future__ import annotations

import json
import threading

import urllib3
from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleet.catalogue import accelerator_models, vendor_of
from fleet.models import Node
from gpuportal.text.phrases import Phrase
from scheduling import lifecycle
from scheduling.executors.base import Executor, ExecutorUpdate, LiveState
from scheduling.executors.kubernetes import manifests
from scheduling.executors.kubernetes.connection import DispatchError, api_client, call, create, delete, message_of
from scheduling.executors.kubernetes.diagnosis import PodState, live_problem
from scheduling.executors.logs import NOT_STARTED, LogTail, kube_timestamped, merge_streams, stored_tail
from scheduling.jobs import tokens as job_tokens
from scheduling.models import JobEvent, JobGroup
from tenants.models import Quota
from tenants.quotas import effective_quotas

_prepared: set[tuple] = set()
_prepared_lock = threading.Lock()
#: Tries for a read a person waits for (the job page, the log API): one retry, then say the cluster is down.
READ_RETRIES = 1


def accelerator_of(job, nodes) -> tuple[str, str]:
    """(model, vendor) of the devices the job landed on: the model of its nodes (a job that accepts several
    models asks for one of them), else the model it asked for. ``prepare`` sets both on a batch's jobs so that
    the dispatch threads read nothing."""
    if getattr(job, "accelerator_vendor", None):
        return job.accelerator_model, job.accelerator_vendor
    model = (Node.objects.filter(name__in=list(nodes)).values_list("gpu_model", flat=True).first() if nodes
             else None) or job.gpu_model or ""
    return model, str(vendor_of(model))  # a plain string: it travels into YAML and JSON


def spec_for(job, nodes=None) -> manifests.JobSpec:
    nodes = nodes or getattr(job, "placement_nodes", None)  # set by dispatch_many for a batch
    if nodes is None:
        nodes = sorted(set(job.allocations.filter(released_at__isnull=True).values_list("gpu__node__name", flat=True)))
    model, vendor = accelerator_of(job, nodes)
    kind = job.kind or "batch"
    group = job.group if job.group_id else None  # loaded by ``prepare`` for a batch, not in the threads
    grouped = {}
    if group is not None and kind in ("service", "array"):
        request = group.request or {}
        grouped = {"group_id": group.pk, "group_index": job.group_index, "group_size": group.size,
                   "group_indices": tuple(int(i) for i in group.indices or ())}
        if kind == "service":
            grouped.update(revision=job.revision or group.revision, port=group.port or int(request.get("port") or 0),
                           health_path=request.get("health_path") or manifests.DEFAULT_HEALTH_PATH)
    return manifests.JobSpec(
        id=job.pk, attempt=job.retry_count, tenant=job.tenant.name, project=job.project.name,
        task_type=job.task_type.code, image=job.image, command=job.command, gpus_per_node=job.gpus_per_node,
        node_count=job.node_count, nodes=tuple(nodes), max_runtime_minutes=job.max_runtime_minutes,
        gpu_milli=job.gpu_milli, cpu_milli=job.cpu_milli, memory_mib=job.memory_mib,
        resume_from=(job.executor_state or {}).get("resume_from", ""), kind=kind, vendor=vendor, gpu_model=model,
        ports=tuple((port["name"], port["port"]) for port in job.ports or ()), **grouped)


def tenant_device_limits(tenant, accelerator_resources: dict | None = None, now=None) -> dict[str, int]:
    """The tenant's effective limits (limits + active bursts) summed per extended resource: each model counts
    against its vendor's resource on this cluster (``manifests.device_resource``), so a tenant's MI300X limit
    is enforced as ``amd.com/gpu`` beside its H100 limit as ``nvidia.com/gpu``. NVIDIA's resource is always
    there (0 when the tenant has no NVIDIA quota), as it was before vendors."""
    known = accelerator_models()
    limits = {manifests.device_resource(manifests.DEFAULT_VENDOR, "", accelerator_resources): 0}
    for quota in effective_quotas(Quota.objects.filter(tenant=tenant), now):
        found = known.get(quota.gpu_model)
        vendor = found.vendor if found else manifests.DEFAULT_VENDOR
        name = manifests.device_resource(vendor, quota.gpu_model, accelerator_resources)
        limits[name] = limits.get(name, 0) + quota.effective_limit
    return limits


def ingress_config() -> manifests.IngressConfig | None:
    """Where notebooks and services are published: ``settings.KUBERNETES["INGRESS_HOST"]`` (none: no Ingress),
    ``PORTAL_URL`` (the portal as nginx reaches it for its auth subrequests; default ``settings.PORTAL_URL``),
    ``INGRESS_CLASS``, ``INGRESS_TLS_SECRET`` and ``INGRESS_AUTH_HEADERS``."""
    options = settings.KUBERNETES
    if not options.get("INGRESS_HOST"):
        return None
    return manifests.IngressConfig(host=options["INGRESS_HOST"],
                                   portal_url=options.get("PORTAL_URL") or settings.PORTAL_URL,
                                   class_name=options.get("INGRESS_CLASS") or "",
                                   tls_secret=options.get("INGRESS_TLS_SECRET") or "",
                                   auth_headers=options.get("INGRESS_AUTH_HEADERS") or "")


class KubernetesExecutor(Executor):
    def __init__(self, cluster):
        super().__init__(cluster)
        self.api = api_client(cluster)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.networking = client.NetworkingV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.prefix = cluster.namespace_prefix
        # tenant id -> effective GPU limit per extended resource, for this executor's batch
        self.tenant_limits: dict[int, dict[str, int]] = {}

    # --- creating ---------------------------------------------------------------------------------------

    def _create(self, body: dict) -> bool:
        kind, namespace = body["kind"], body["metadata"].get("namespace")
        calls = {
            "Namespace": (self.core.create_namespace, ()),
            "ResourceQuota": (self.core.create_namespaced_resource_quota, (namespace,)),
            "NetworkPolicy": (self.networking.create_namespaced_network_policy, (namespace,)),
            "PersistentVolumeClaim": (self.core.create_namespaced_persistent_volume_claim, (namespace,)),
            "PriorityClass": (self.scheduling.create_priority_class, ()),
            "Secret": (self.core.create_namespaced_secret, (namespace,)),
            "Service": (self.core.create_namespaced_service, (namespace,)),
            "Job": (self.batch.create_namespaced_job, (namespace,)),
            "Deployment": (self.apps.create_namespaced_deployment, (namespace,)),
            "Ingress": (self.networking.create_namespaced_ingress, (namespace,)),
        }
        fn, args = calls[kind]
        return create(fn, *args, body, _preload_content=False)

    def prepare_tenant(self, tenant) -> None:
        """Namespace, quota, network policy and data claim of ``tenant``: once per process, cluster and
        content, so a changed limit reaches the ResourceQuota at the next dispatch."""
        bodies = self.tenant_manifests(tenant)
        key = (self.cluster.pk, "tenant", json.dumps(bodies, sort_keys=True))
        if key in _prepared:
            return
        for body in bodies:
            if not self._create(body) and body["kind"] == "ResourceQuota":  # the limit may have changed since
                self.raw(self.core.patch_namespaced_resource_quota, body["metadata"]["name"],
                         body["metadata"]["namespace"], {"spec": body["spec"]})
        with _prepared_lock:
            _prepared.add(key)

    def tenant_manifests(self, tenant) -> list[dict]:
        """The tenant's objects; the ResourceQuota holds its effective limit now (limits + active bursts) per
        vendor's extended resource, read once per batch in ``prepare`` so that the dispatch threads do not query
        the database."""
        if tenant.pk not in self.tenant_limits:
            self.tenant_limits[tenant.pk] = tenant_device_limits(tenant, self.cluster.accelerator_resources or None)
        return manifests.for_tenant(self.prefix, tenant.name, self.tenant_limits[tenant.pk],
                                    self.cluster.tenant_storage_gib, self.cluster.storage_class)

    def prepare_task_type(self, task_type) -> None:
        key = (self.cluster.pk, "priority", task_type.code)
        if key not in _prepared:
            self._create(manifests.priority_class(task_type.code, task_type.priority, task_type.name))
            with _prepared_lock:
                _prepared.add(key)

    def prepare(self, jobs) -> None:
        """Tenant namespaces and priority classes for a batch (database reads here, not in the threads: the
        groups of arrays and services too)."""
        groups = JobGroup.objects.in_bulk({job.group_id for job in jobs if job.group_id})
        for job in jobs:
            if job.group_id and job.group_id in groups:
                job.group = groups[job.group_id]
        node_models = dict(Node.objects.filter(name__in={n for job in jobs for n in getattr(
            job, "placement_nodes", None) or ()}).values_list("name", "gpu_model"))
        vendors = {name: model.vendor for name, model in accelerator_models().items()}
        for job in jobs:
            model = next((node_models[n] for n in getattr(job, "placement_nodes", None) or () if n in node_models),
                         job.gpu_model or "")
            job.accelerator_model, job.accelerator_vendor = model, vendors.get(model, manifests.DEFAULT_VENDOR)
        for tenant in {job.tenant.pk: job.tenant for job in jobs}.values():
            self.prepare_tenant(tenant)
        for task_type in {job.task_type.pk: job.task_type for job in jobs}.values():
            self.prepare_task_type(task_type)

    def manifests_for(self, job, token: str = "<job token>",  # noqa: S107 - a placeholder
                      notebook_token: str = "<notebook token>") -> list[dict]:  # noqa: S107 - a placeholder
        return manifests.for_job(self.prefix, spec_for(job), settings.PORTAL_URL, token,
                                 share_resources=self.cluster.gpu_share_resources or None,
                                 data_claim=bool(self.cluster.tenant_storage_gib), notebook_token=notebook_token,
                                 ingress=ingress_config(),
                                 accelerator_resources=self.cluster.accelerator_resources or None)

    def dispatch(self, job) -> dict:
        """Create the attempt's objects (a service replica: its service's Service first, once for all)."""
        spec = spec_for(job)
        bodies = self.manifests_for(job, job_tokens.token_for(job),
                                    job_tokens.notebook_token(job) if spec.kind == "notebook" else "")
        try:
            self.prepare_tenant(job.tenant)
            self.prepare_task_type(job.task_type)
            created = [self._create(body) for body in bodies]
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise DispatchError(message_of(exc)) from exc
        own = [made for body, made in zip(bodies, created, strict=True)
               if manifests.JOB_LABEL in body["metadata"].get("labels", {})]  # a shared Service may exist already
        state = {"namespace": manifests.namespace_name(self.prefix, spec.tenant),
                 "object": manifests.object_name(spec), "attempt": spec.attempt, "nodes": list(spec.nodes),
                 "already_existed": not any(own), "kind": spec.kind, "vendor": spec.vendor}
        if spec.kind == "service":
            state["service"] = manifests.group_service_name(spec.group_id)
        return state

    # --- stopping ---------------------------------------------------------------------------------------

    def stop(self, job, reason: str = "") -> None:
        """Delete this attempt's objects (foreground: its pods go first) and record it. A service replica: its
        Deployment and token only; the service's Service stays for the other replicas (``release_group``)."""
        state = job.executor_state or {}
        namespace, name = state.get("namespace"), state.get("object")
        if not namespace or not name:
            return
        kind = state.get("kind") or job.kind or "batch"
        deleted = self.delete_objects(namespace, name, kind)
        if kind == "service":
            text = (gettext_noop("Deleted Kubernetes Deployment %(ns)s/%(name)s (foreground propagation).") if deleted
                    else gettext_noop("Kubernetes Deployment %(ns)s/%(name)s was already gone."))
        else:
            text = (gettext_noop("Deleted Kubernetes Job %(ns)s/%(name)s (foreground propagation).") if deleted
                    else gettext_noop("Kubernetes Job %(ns)s/%(name)s was already gone."))
        done = Phrase(text, {"ns": namespace, "name": name})
        # the reason (a phrase where the caller gave one) reads in the reader's language with the sentence
        said = Phrase(gettext_noop("%(done)s %(reason)s"), {"done": done, "reason": reason}) if reason else done
        lifecycle.note(job, JobEvent.Kind.EXECUTOR, said,
                       data={"namespace": namespace, "object": name, "propagation": "Foreground"})

    def delete_objects(self, namespace: str, name: str, kind: str | None = None) -> bool:
        """Delete one attempt's objects (foreground: its pods go first): a Job, or a service replica's
        Deployment, with its own Service, Ingress and token; False if already gone. ``kind`` None (an object
        found on the cluster): whatever of these exists."""
        options = {"propagationPolicy": "Foreground"}
        deleted = False
        if kind in (None, "service"):
            deleted |= delete(self.apps.delete_namespaced_deployment, name, namespace, body=options,
                              _preload_content=False)
        if kind != "service":
            deleted |= delete(self.batch.delete_namespaced_job, name, namespace, body=options, _preload_content=False)
            delete(self.core.delete_namespaced_service, name, namespace, _preload_content=False)
        if kind in (None, "notebook"):
            delete(self.networking.delete_namespaced_ingress, name, namespace, _preload_content=False)
        delete(self.core.delete_namespaced_secret, f"{name}-token", namespace, _preload_content=False)
        return bool(deleted)

    def release_group(self, group) -> None:
        """Delete what a stopped service's replicas shared: its Service and Ingress (404: already gone)."""
        namespace = manifests.namespace_name(self.prefix, group.tenant.name)
        name = manifests.group_service_name(group.pk)
        delete(self.core.delete_namespaced_service, name, namespace, _preload_content=False)
        delete(self.networking.delete_namespaced_ingress, name, namespace, _preload_content=False)

    def has_objects(self, job) -> bool:
        """Does this attempt's Job (a replica: Deployment) exist on the cluster?"""
        state = job.executor_state or {}
        read = self.apps.read_namespaced_deployment if (state.get("kind") or job.kind) == "service" \
            else self.batch.read_namespaced_job
        try:
            self.raw(read, state.get("object", ""), state.get("namespace", ""))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def managed_jobs(self) -> list[dict]:
        """Every Job and Deployment the portal made on this cluster (its labels say which job and attempt)."""
        selector = "app.kubernetes.io/managed-by=gpuportal"
        return [*self.raw(self.batch.list_job_for_all_namespaces, label_selector=selector).get("items", []),
                *self.raw(self.apps.list_deployment_for_all_namespaces, label_selector=selector).get("items", [])]

    # --- live state of notebooks and service replicas ---------------------------------------------------

    def probe(self, job) -> LiveState:
        """Where the portal's proxy reaches a notebook or replica, whether it is ready, how often its container
        restarted and, when it is not ready, why (a crash loop, a failing readiness check) with the evidence.
        Read from its pods (one request); an unreachable cluster is a problem to show, not an error."""
        state = job.executor_state or {}
        kind = state.get("kind") or job.kind
        namespace, name = state.get("namespace"), state.get("object")
        if kind not in ("notebook", "service") or not namespace or not name:
            return LiveState()
        if kind == "notebook":
            upstream = manifests.cluster_url(name, namespace, manifests.NOTEBOOK_PORT)
        else:
            group = job.group
            upstream = manifests.cluster_url(state.get("service") or manifests.group_service_name(job.group_id),
                                             namespace, group.port if group else 0)
        attempt, selector = self._attempt_selector(job, state)
        try:
            pods = self._attempt_pods(namespace, selector)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            return LiveState(upstream=upstream, problem=_("The cluster did not answer: %(e)s") % {
                "e": message_of(exc)}, evidence={"error": message_of(exc)})
        states = [PodState.from_pod(pod) for pod in pods if not pod.get("metadata", {}).get("deletionTimestamp")]
        restarts = sum(s.restarts for s in states)
        if not states:
            return LiveState(upstream=upstream, ready=False, problem=_("No pod of it exists on the cluster."),
                             evidence={"namespace": namespace, "selector": selector})
        ready = any(s.ready for s in states)
        problem, evidence = ("", {}) if ready else live_problem(states, health=self._health(job, kind))
        return LiveState(upstream=upstream, ready=ready, restarts=restarts, problem=problem, evidence=evidence)

    def port_upstream(self, job, port) -> str:
        """The job's Service (on a job that spans nodes, its first rank under the headless Service)."""
        state = job.executor_state or {}
        namespace, name = state.get("namespace"), state.get("object")
        if not namespace or not name:
            return ""
        return manifests.port_url(name, namespace, port["port"], len(state.get("nodes") or ()) or job.node_count)

    @staticmethod
    def _health(job, kind: str) -> str:
        """The readiness check, as the problem names it (port and path)."""
        if kind == "notebook":
            return f"{manifests.notebook_path(job.pk)}api:{manifests.NOTEBOOK_PORT}"
        group = job.group
        path = ((group.request or {}).get("health_path") if group else "") or manifests.DEFAULT_HEALTH_PATH
        return f"{path}:{group.port if group else ''}"

    def observe(self, job, now) -> ExecutorUpdate | None:
        return None  # Kubernetes jobs are followed by scheduling.executors.kubernetes.sync

    # --- reading ----------------------------------------------------------------------------------------

    @staticmethod
    def _attempt_selector(job, state: dict) -> tuple[int, str]:
        """The current attempt's number and the label selector of its pods."""
        attempt = int(state.get("attempt", job.retry_count))
        return attempt, f"{manifests.JOB_LABEL}={job.pk},{manifests.ATTEMPT_LABEL}={attempt}"

    def _attempt_pods(self, namespace: str, selector: str) -> list[dict]:
        """The pods of an attempt, as plain dicts (a read a person waits for: one retry)."""
        return self.raw(self.core.list_namespaced_pod, namespace, label_selector=selector,
                        retries=READ_RETRIES).get("items", [])

    def raw(self, fn, *args, **kwargs) -> dict:
        response = call(fn, *args, _preload_content=False, **kwargs)
        try:
            return json.loads(response.data or b"{}")
        finally:
            response.release_conn()

    def pod_log(self, namespace: str, pod: str, tail: int | None = None, **options) -> str:
        """The last ``tail`` lines (default: the diagnosis' ``LOG_TAIL_LINES``) of a pod's log; "" when the
        cluster has none to give (a container that never started, a pod already gone)."""
        try:
            response = call(self.core.read_namespaced_pod_log, pod, namespace,
                            tail_lines=tail or settings.KUBERNETES["LOG_TAIL_LINES"], _preload_content=False,
                            **options)
            try:
                return response.data.decode("utf-8", "replace")
            finally:
                response.release_conn()
        except ApiException:
            return ""

    def read_log(self, job, tail: int) -> LogTail:
        """The logs of the current attempt's pods, merged in time order (Kubernetes' timestamps); once the
        pods are gone (a failed attempt's are deleted), the tail kept with its diagnosis."""
        state = job.executor_state or {}
        namespace = state.get("namespace")
        if not namespace or job.status in NOT_STARTED:
            return stored_tail(job, tail)
        attempt, selector = self._attempt_selector(job, state)
        try:
            pods = self._attempt_pods(namespace, selector)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            if not isinstance(exc, ApiException) or exc.status != 404:
                return LogTail(attempt + 1, error=message_of(exc))
            pods = []
        if not pods:
            return stored_tail(job, tail)
        streams = {}
        for pod in pods:
            pod_state = PodState.from_pod(pod)
            text = self.pod_log(namespace, pod_state.name, tail, timestamps=True, retries=READ_RETRIES)
            streams[pod_state.index] = kube_timestamped(text)
        return LogTail(attempt + 1, merge_streams(streams, tail))


__all__ = ["DispatchError", "KubernetesExecutor", "spec_for", "tenant_device_limits"]
