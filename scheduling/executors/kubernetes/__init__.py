"""Run admitted jobs on a Kubernetes cluster with the official client.

Each tenant gets a namespace (labelled with the tenant) holding a ResourceQuota that mirrors its GPU
limit, a NetworkPolicy that refuses other tenants' namespaces and, when the cluster asks for one, a data
claim; task types become PriorityClasses. A job becomes a Secret (its report token), a headless Service
when it spans nodes, and a ``batch/v1`` Job pinned to the nodes the scheduler chose. Object names are
deterministic per attempt, so a dispatch that runs twice finds its objects (409) and creates nothing new.
Status comes back through ``sync`` (a watch on pods plus a periodic resync), not through ``observe``.
"""

from __future__ import annotations

import json
import threading

import urllib3
from django.conf import settings
from django.utils.translation import gettext as _
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tenants.quotas import tenant_gpu_limit

from ... import job_tokens, lifecycle
from ...models import JobEvent
from ..base import Executor, ExecutorUpdate
from ..logs import NOT_STARTED, LogTail, kube_timestamped, merge_streams, stored_tail
from . import manifests
from .connection import DispatchError, api_client, call, create, delete, message_of
from .diagnosis import PodState

_prepared: set[tuple] = set()
_prepared_lock = threading.Lock()
#: Tries for a read a person waits for (the job page, the log API): one retry, then say the cluster is down.
READ_RETRIES = 1


def spec_for(job, nodes=None) -> manifests.JobSpec:
    nodes = nodes or getattr(job, "placement_nodes", None)  # set by dispatch_many for a batch
    if nodes is None:
        nodes = sorted(set(job.allocations.filter(released_at__isnull=True).values_list("gpu__node__name", flat=True)))
    return manifests.JobSpec(
        id=job.pk, attempt=job.retry_count, tenant=job.tenant.name, project=job.project.name,
        task_type=job.task_type.code, image=job.image, command=job.command, gpus_per_node=job.gpus_per_node,
        node_count=job.node_count, nodes=tuple(nodes), max_runtime_minutes=job.max_runtime_minutes,
        gpu_milli=job.gpu_milli, cpu_milli=job.cpu_milli, memory_mib=job.memory_mib,
        resume_from=(job.executor_state or {}).get("resume_from", ""))


class KubernetesExecutor(Executor):
    def __init__(self, cluster):
        super().__init__(cluster)
        self.api = api_client(cluster)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.networking = client.NetworkingV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.prefix = cluster.namespace_prefix
        self.tenant_limits: dict[int, int] = {}  # tenant id -> effective GPU limit, for this executor's batch

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
        """The tenant's objects; the ResourceQuota holds its effective limit now (limits + active bursts),
        read once per batch in ``prepare`` so that the dispatch threads do not query the database."""
        if tenant.pk not in self.tenant_limits:
            self.tenant_limits[tenant.pk] = tenant_gpu_limit(tenant)
        return manifests.for_tenant(self.prefix, tenant.name, self.tenant_limits[tenant.pk],
                                    self.cluster.tenant_storage_gib, self.cluster.storage_class)

    def prepare_task_type(self, task_type) -> None:
        key = (self.cluster.pk, "priority", task_type.code)
        if key not in _prepared:
            self._create(manifests.priority_class(task_type.code, task_type.priority, task_type.name))
            with _prepared_lock:
                _prepared.add(key)

    def prepare(self, jobs) -> None:
        """Tenant namespaces and priority classes for a batch (database reads here, not in the threads)."""
        for tenant in {job.tenant.pk: job.tenant for job in jobs}.values():
            self.prepare_tenant(tenant)
        for task_type in {job.task_type.pk: job.task_type for job in jobs}.values():
            self.prepare_task_type(task_type)

    def manifests_for(self, job, token: str = "<job token>") -> list[dict]:  # noqa: S107 - a placeholder
        return manifests.for_job(self.prefix, spec_for(job), settings.PORTAL_URL, token,
                                 share_resources=self.cluster.gpu_share_resources or None,
                                 data_claim=bool(self.cluster.tenant_storage_gib))

    def dispatch(self, job) -> dict:
        spec = spec_for(job)
        try:
            self.prepare_tenant(job.tenant)
            self.prepare_task_type(job.task_type)
            created = [self._create(body) for body in self.manifests_for(job, job_tokens.token_for(job))]
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise DispatchError(message_of(exc)) from exc
        return {"namespace": manifests.namespace_name(self.prefix, spec.tenant),
                "object": manifests.object_name(spec), "attempt": spec.attempt, "nodes": list(spec.nodes),
                "already_existed": not any(created)}

    # --- stopping ---------------------------------------------------------------------------------------

    def stop(self, job, reason: str = "") -> None:
        """Delete this attempt's Job (foreground: its pods go first), Service and token; record it."""
        state = job.executor_state or {}
        namespace, name = state.get("namespace"), state.get("object")
        if not namespace or not name:
            return
        deleted = self.delete_objects(namespace, name)
        lifecycle.note(
            job, JobEvent.Kind.EXECUTOR,
            ((_("Deleted Kubernetes Job %(ns)s/%(name)s (foreground propagation).") if deleted
              else _("Kubernetes Job %(ns)s/%(name)s was already gone.")) % {"ns": namespace, "name": name}
             + f" {reason}").strip(),
            data={"namespace": namespace, "object": name, "propagation": "Foreground"})

    def delete_objects(self, namespace: str, name: str) -> bool:
        """Delete one attempt's Job (foreground: its pods go first), Service and token; False if already gone."""
        options = {"propagationPolicy": "Foreground"}
        deleted = delete(self.batch.delete_namespaced_job, name, namespace, body=options, _preload_content=False)
        delete(self.core.delete_namespaced_service, name, namespace, _preload_content=False)
        delete(self.core.delete_namespaced_secret, f"{name}-token", namespace, _preload_content=False)
        return bool(deleted)

    def has_objects(self, job) -> bool:
        """Does this attempt's Job object exist on the cluster?"""
        state = job.executor_state or {}
        try:
            self.raw(self.batch.read_namespaced_job, state.get("object", ""), state.get("namespace", ""))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def managed_jobs(self) -> list[dict]:
        """Every Job object the portal made on this cluster (its labels say which job and attempt)."""
        return self.raw(self.batch.list_job_for_all_namespaces,
                        label_selector="app.kubernetes.io/managed-by=gpuportal").get("items", [])

    def observe(self, job, now) -> ExecutorUpdate | None:
        return None  # Kubernetes jobs are followed by scheduling.executors.kubernetes.sync

    # --- reading ----------------------------------------------------------------------------------------

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
        attempt = int(state.get("attempt", job.retry_count))
        selector = f"{manifests.JOB_LABEL}={job.pk},{manifests.ATTEMPT_LABEL}={attempt}"
        try:
            pods = self.raw(self.core.list_namespaced_pod, namespace, label_selector=selector,
                            retries=READ_RETRIES).get("items", [])
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


__all__ = ["DispatchError", "KubernetesExecutor", "spec_for"]
