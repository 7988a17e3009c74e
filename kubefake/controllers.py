"""What runs inside a real cluster besides the API server, as far as the portal can see it: the Job and
Deployment controllers, the garbage collector and namespace controller, and the kubelet's reports.

* Job controller: one pod per completion (indexed when asked), placed on the node its affinity names and
  started. When quota admission refuses a pod it does what the real one does: no pod, a ``FailedCreate``
  Warning Event on the Job (``Error creating: pods "..." is forbidden: ...``), and another try whenever the
  namespace has more room (a quota created, replaced, patched or deleted, a pod finished or deleted), so a job
  refused by a quota too small starts once the quota is raised. A finished or deleted job stops trying.
* Deployment controller, with what its ReplicaSet does: it keeps ``spec.replicas`` pods of the current
  template (named ``<deployment>-<pod-template-hash>-<suffix>``, owned by that ReplicaSet, which is not
  served), replaces a deleted pod, recreates the pods when the template changes, deletes them with the
  Deployment, and keeps ``status`` (replicas, updated, ready, available, the Available and Progressing
  conditions) in step with its pods.
* Garbage collection: a Job's or Deployment's pods go with it; deleting a namespace deletes what is in it (at
  once, where a real namespace first goes Terminating).
* Kubelet: pods start when created (``start_pods``; without a node unless they name one); ``_set_container``
  is its report on a pod's container. A container with a readiness probe starts not ready (the fake runs no
  probes; ``kubefake.faults`` marks it ready or not).

All of it runs synchronously inside the write that triggers it: ``_settle`` runs when the outermost change
ends, so a test sees the cluster settled when its call returns. ``Controllers`` is one part of
``kubefake.server.FakeKubernetes``; ``kubefake.store`` calls its hooks.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid

from . import quota as quotas
from .admission import qos_class
from .resources import RESOURCES, ApiError, now


def pinned_hosts(pod_spec: dict) -> list[str]:
    """The nodes a pod's required node affinity names by hostname (where the fake's scheduler puts it)."""
    hosts = []
    for term in (pod_spec.get("affinity", {}).get("nodeAffinity", {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])):
        for expression in term.get("matchExpressions", []):
            if expression["key"] == "kubernetes.io/hostname":
                hosts.extend(expression["values"])
    return hosts


def max_unavailable(deployment: dict) -> int:
    strategy = deployment["spec"].get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    replicas = int(deployment["spec"].get("replicas", 1))
    if isinstance(value, str) and value.endswith("%"):
        return replicas * int(value[:-1]) // 100
    return int(value)


class Controllers:
    """The controllers and the kubelet: they react to writes through the store's hooks."""

    def _init_controllers(self, start_pods: bool) -> None:
        self.start_pods = start_pods
        # the job controller: pod slots still to create per (namespace, job), and the room when last refused
        self._pending: dict[tuple[str, str], list[int]] = {}
        self._refused_room: dict[tuple[str, str], dict] = {}
        # the deployment controller: deployments per namespace, the deployment of each ReplicaSet name, and the
        # deployments whose status is to be brought up to date
        self._deployments_in: dict[str, set[str]] = {}
        self._rs_owner: dict[tuple[str, str], str] = {}
        self._dirty_deployments: set[tuple[str, str]] = set()

    # --- hooks the store calls ---------------------------------------------------------------------------

    def _created(self, plural: str, obj: dict) -> None:
        if plural == "jobs":
            self._start_job(obj)
        if plural == "deployments":
            self._deployments_in.setdefault(obj["metadata"]["namespace"], set()).add(obj["metadata"]["name"])
            self._reconcile_deployment(obj)
        if plural == "pods" and self.start_pods:
            self._set_container(obj, running=True)

    def _updated(self, plural: str, obj: dict) -> None:
        if plural == "deployments":
            self._reconcile_deployment(obj)

    def _deleted(self, plural: str, namespace: str | None, name: str, propagation: str) -> None:
        if plural == "jobs":
            self._pending.pop((namespace, name), None)
            self._refused_room.pop((namespace, name), None)
            for pod in self._pods_of(namespace, name):
                self.delete("pods", namespace, pod["metadata"]["name"])
        if plural == "deployments":  # the garbage collector takes its ReplicaSet's pods with it
            self._deployments_in.get(namespace or "", set()).discard(name)
            self._dirty_deployments.discard((namespace, name))
            for pod in self._deployment_pods(namespace, name):
                self.delete("pods", namespace, pod["metadata"]["name"], propagation)
        if plural == "namespaces":  # what a real namespace controller does once the namespace terminates
            for key in sorted((k for k in self.objects if k[1] == name and RESOURCES[k[0]][2]),
                              key=lambda k: k[0] != "jobs"):
                if key in self.objects:
                    self.delete(key[0], name, key[2], propagation)

    def _track_deployment_pod(self, pod: dict) -> None:
        if (deployment := self._deployment_of(pod)) is not None:
            self._dirty_deployments.add((pod["metadata"].get("namespace"), deployment))

    def _settle(self) -> None:
        while self._dirty or self._dirty_deployments:
            if not self._dirty:
                self._refresh_deployment(*self._dirty_deployments.pop())
                continue
            namespace = self._dirty.pop()
            self._refresh_quotas(namespace)
            for deployment in sorted(self._deployments_in.get(namespace, ())):  # pods a quota refused, again
                if (found := self.objects.get(("deployments", namespace, deployment))) is not None:
                    self._reconcile_deployment(found)
            for key in sorted(k for k in self._pending if k[0] == namespace):
                if key in self._pending and self._room_grew(namespace, self._refused_room.get(key)):
                    job = self.objects.get(("jobs", *key))
                    if job is None:
                        self._pending.pop(key, None)
                        self._refused_room.pop(key, None)
                    elif created := self._create_job_pods(job):
                        job["status"]["active"] = job["status"].get("active", 0) + created
                        self._bump("MODIFIED", "jobs", job)

    # --- nodes and the kubelet ---------------------------------------------------------------------------

    def add_node(self, name: str, gpus: int = 8) -> None:
        with self.lock:
            node = {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now(),
                "labels": {"kubernetes.io/hostname": name}},
                "spec": {}, "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                       "message": "kubelet is posting ready status"}],
                                       "nodeInfo": {"kubeletVersion": "v1.30.0-kubefake"}}}
            self.objects[("nodes", "", name)] = node
            self._bump("ADDED", "nodes", node)

    def _set_container(self, pod: dict, *, running=False, waiting=None, terminated=None, phase=None,
                       reason=None, message=None, ready=None, restarts=None, last_terminated=None) -> None:
        """The kubelet's report on the pod's (first) container. ``ready`` None: a running container is ready
        unless it has a readiness probe (which the fake never runs: ``ready`` marks it ready)."""
        container = pod["spec"]["containers"][0]
        state = ({"running": {"startedAt": now()}} if running else
                 {"waiting": waiting} if waiting else {"terminated": {"startedAt": now(), "finishedAt": now(),
                                                                       **terminated}})
        status = pod["status"]
        status["phase"] = phase or ("Running" if running else "Pending" if waiting else
                                    ("Succeeded" if terminated.get("exitCode") == 0 else "Failed"))
        previous = (status.get("containerStatuses") or [{}])[0]
        if ready is None:
            ready = bool(running) and "readinessProbe" not in container
        entry = {"name": container["name"], "image": container["image"], "imageID": "", "ready": bool(ready),
                 "restartCount": previous.get("restartCount", 0) if restarts is None else restarts,
                 "started": bool(running), "state": state}
        if last_terminated:
            entry["lastState"] = {"terminated": {"startedAt": now(), "finishedAt": now(), **last_terminated}}
        elif previous.get("lastState"):
            entry["lastState"] = previous["lastState"]
        status["containerStatuses"] = [entry]
        status["startTime"] = status.get("startTime") or now()
        ended = status["phase"] in ("Succeeded", "Failed")
        readiness = {"status": "True" if ready else "False", "lastProbeTime": None, "lastTransitionTime": now()}
        if not ready:
            readiness.update(reason="PodCompleted" if ended else "ContainersNotReady",
                             message="" if ended else f"containers with unready status: [{container['name']}]")
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in ("Ready", "ContainersReady")]
        status["conditions"] = [*conditions, {"type": "ContainersReady", **readiness}, {"type": "Ready", **readiness}]
        for field, value in (("reason", reason), ("message", message)):
            if value:
                status[field] = value
            else:
                status.pop(field, None)
        self._bump("MODIFIED", "pods", pod)

    # --- the job controller ------------------------------------------------------------------------------

    def _pods_of(self, namespace, job_name) -> list[dict]:
        return [o for (p, ns, _n), o in self.objects.items()
                if p == "pods" and ns == namespace and o["metadata"].get("labels", {}).get("job-name") == job_name]

    def _start_job(self, job: dict) -> None:
        meta = job["metadata"]
        self._pending[(meta["namespace"], meta["name"])] = list(range(job["spec"].get("parallelism", 1)))
        job["status"] = {"active": self._create_job_pods(job), "startTime": now()}
        self._bump("MODIFIED", "jobs", job)

    def _job_pod(self, job: dict, index: int) -> dict:
        spec, meta = job["spec"], job["metadata"]
        template = spec["template"]
        hosts = pinned_hosts(template["spec"])
        indexed = spec.get("completionMode") == "Indexed"
        pod_meta = copy.deepcopy(template.get("metadata", {}))
        pod_meta["labels"] = {**pod_meta.get("labels", {}), "job-name": meta["name"],
                              "batch.kubernetes.io/job-name": meta["name"]}
        pod_meta["name"] = f"{meta['name']}-{index}-{next(self._suffix):05d}" if indexed else \
            f"{meta['name']}-{next(self._suffix):05d}"
        if indexed:
            pod_meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
            pod_meta["labels"]["batch.kubernetes.io/job-completion-index"] = str(index)
        pod_spec = copy.deepcopy(template["spec"])
        if hosts:
            pod_spec["nodeName"] = hosts[index % len(hosts)]
        if indexed and pod_spec.get("subdomain"):
            pod_spec["hostname"] = f"{meta['name']}-{index}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {**pod_meta, "namespace": meta["namespace"], "uid": str(uuid.uuid4()),
                            "creationTimestamp": now(),
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True}]},
               "spec": pod_spec, "status": {"phase": "Pending", "conditions": []}}
        quotas.default_requests(pod)
        return pod

    def _create_job_pods(self, job: dict) -> int:
        """Create the job's missing pods in index order; the first refusal stops it (a FailedCreate event) until
        the namespace has more room. Returns how many pods it created."""
        meta = job["metadata"]
        key = (meta["namespace"], meta["name"])
        slots = self._pending.get(key, [])
        created = 0
        while slots:
            pod = self._job_pod(job, slots[0])
            try:
                self._admit_pod(pod)
            except ApiError as exc:
                self._refused_room[key] = self._room(key[0])
                self.record_event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}", "job-controller")
                break
            slots.pop(0)
            self.objects[("pods", meta["namespace"], pod["metadata"]["name"])] = pod
            self._bump("ADDED", "pods", pod)
            if self.start_pods:
                self._set_container(pod, running=True)
            created += 1
        if not slots:
            self._pending.pop(key, None)
            self._refused_room.pop(key, None)
        return created

    def _job_done(self, namespace, job_name, failed_reason=None, message=""):
        job = self.objects.get(("jobs", namespace, job_name))
        if job is None:
            return
        self._pending.pop((namespace, job_name), None)  # a finished job creates no more pods
        self._refused_room.pop((namespace, job_name), None)
        pods = self._pods_of(namespace, job_name)
        condition = ({"type": "Failed", "status": "True", "reason": failed_reason, "message": message}
                     if failed_reason else {"type": "Complete", "status": "True"})
        job["status"] = {"active": 0, "succeeded": sum(p["status"]["phase"] == "Succeeded" for p in pods),
                         "failed": sum(p["status"]["phase"] == "Failed" for p in pods),
                         "conditions": [{**condition, "lastProbeTime": now(), "lastTransitionTime": now()}]}
        self._bump("MODIFIED", "jobs", job)

    # --- the deployment controller (with what its ReplicaSets do) ------------------------------------------

    def _deployment_of(self, pod: dict) -> str | None:
        for owner in pod["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "ReplicaSet":
                return self._rs_owner.get((pod["metadata"].get("namespace", ""), owner.get("name")))
        return None

    def _deployment_pods(self, namespace, name) -> list[dict]:
        return sorted((o for (p, ns, _n), o in self.objects.items()
                       if p == "pods" and ns == namespace and self._deployment_of(o) == name),
                      key=lambda p: p["metadata"]["name"])

    def _replica_set(self, deployment: dict) -> tuple[str, str]:
        """(name, pod-template-hash) of the ReplicaSet the current template makes."""
        template = json.dumps(deployment["spec"]["template"], sort_keys=True)
        digest = hashlib.sha256(template.encode()).hexdigest()
        alphabet = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes' SafeEncodeString uses
        template_hash = "".join(alphabet[int(digest[i:i + 2], 16) % len(alphabet)] for i in range(0, 20, 2))
        return f"{deployment['metadata']['name']}-{template_hash}", template_hash

    def _reconcile_deployment(self, deployment: dict) -> None:
        """``spec.replicas`` pods of the current template: old-template pods go first (the fake does a Recreate
        whatever the strategy), missing ones are created (a quota's refusal: a FailedCreate event, tried again
        when the namespace changes), extra ones deleted."""
        meta = deployment["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        rs_name, template_hash = self._replica_set(deployment)
        self._rs_owner[(namespace, rs_name)] = name
        pods = self._deployment_pods(namespace, name)
        for pod in pods:
            if pod["metadata"].get("labels", {}).get("pod-template-hash") != template_hash:
                self.delete("pods", namespace, pod["metadata"]["name"])
        pods = self._deployment_pods(namespace, name)
        wanted = int(deployment["spec"].get("replicas", 1))
        for pod in pods[wanted:]:
            self.delete("pods", namespace, pod["metadata"]["name"])
        for _missing in range(wanted - len(pods)):
            pod = self._deployment_pod(deployment, rs_name, template_hash)
            try:
                self._admit_pod(pod)
            except ApiError as exc:
                self.record_event(deployment, "Warning", "FailedCreate", f"Error creating: {exc.message}",
                                  "replicaset-controller")
                break
            self.objects[("pods", namespace, pod["metadata"]["name"])] = pod
            self._bump("ADDED", "pods", pod)
            if self.start_pods:
                self._set_container(pod, running=True)
        self._dirty_deployments.add((namespace, name))

    def _deployment_pod(self, deployment: dict, rs_name: str, template_hash: str) -> dict:
        meta, template = deployment["metadata"], deployment["spec"]["template"]
        pod_meta = copy.deepcopy(template.get("metadata", {}))
        pod_meta["labels"] = {**pod_meta.get("labels", {}), "pod-template-hash": template_hash}
        pod_spec = copy.deepcopy(template["spec"])
        if hosts := pinned_hosts(pod_spec):
            pod_spec["nodeName"] = hosts[0]
        rs_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{meta['uid']}/{rs_name}"))
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {**pod_meta, "name": f"{rs_name}-{next(self._suffix):05d}",
                            "namespace": meta["namespace"], "uid": str(uuid.uuid4()), "creationTimestamp": now(),
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                                                 "uid": rs_uid, "controller": True, "blockOwnerDeletion": True}]},
               "spec": pod_spec, "status": {"phase": "Pending", "qosClass": "BestEffort", "conditions": []}}
        quotas.default_requests(pod)
        pod["status"]["qosClass"] = qos_class(pod)
        return pod

    def _refresh_deployment(self, namespace: str, name: str) -> None:
        """``status`` from the pods, as the deployment controller keeps it (zero counts left out, as it does)."""
        deployment = self.objects.get(("deployments", namespace, name))
        if deployment is None:
            return
        rs_name, template_hash = self._replica_set(deployment)
        pods = [p for p in self._deployment_pods(namespace, name)
                if p["status"].get("phase") not in ("Succeeded", "Failed")]
        wanted = int(deployment["spec"].get("replicas", 1))
        ready = sum(bool((p["status"].get("containerStatuses") or [{}])[0].get("ready")) for p in pods)
        updated = sum(p["metadata"]["labels"].get("pod-template-hash") == template_hash for p in pods)
        counts = {"replicas": len(pods), "updatedReplicas": updated, "readyReplicas": ready,
                  "availableReplicas": ready, "unavailableReplicas": max(wanted - ready, 0)}
        available = ready >= wanted - max_unavailable(deployment)
        complete = updated == wanted == ready == len(pods)
        previous = {c["type"]: c for c in (deployment.get("status") or {}).get("conditions") or []}

        def condition(type_, ok, reason, message):
            kept = previous.get(type_, {})
            same = kept.get("status") == ("True" if ok else "False") and kept.get("reason") == reason
            return {"type": type_, "status": "True" if ok else "False",
                    "lastUpdateTime": kept["lastUpdateTime"] if same else now(),
                    "lastTransitionTime": kept["lastTransitionTime"] if same else now(),
                    "reason": reason, "message": message}

        status = {"observedGeneration": deployment["metadata"].get("generation", 1),
                  **{key: value for key, value in counts.items() if value},
                  "conditions": [
                      condition("Available", available, "MinimumReplicasAvailable" if available else
                                "MinimumReplicasUnavailable", "Deployment has minimum availability." if available
                                else "Deployment does not have minimum availability."),
                      condition("Progressing", True, "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                                f'ReplicaSet "{rs_name}" has successfully progressed.' if complete
                                else f'ReplicaSet "{rs_name}" is progressing.')]}
        if status != deployment.get("status"):
            deployment["status"] = status
            self._bump("MODIFIED", "deployments", deployment)
