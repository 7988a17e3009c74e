"""What a body goes through before the fake API server stores it, and the ResourceQuota bookkeeping that
admission and the quota controller share.

* Typing: ``kind`` and ``apiVersion`` come from the URL when a body leaves them out (400 when they name another
  type).
* Validation: every body is checked against the Kubernetes 1.30 schema in strict mode (``kubefake.validation``)
  and refused with 422 like a real API server; so are a ResourceQuota's unknown ``hard`` keys and what the API
  server's own Deployment validation refuses beyond the schema.
* Defaulting and allocation on create: a Job gets the selector and pod labels the API server adds, a
  Deployment its replicas, strategy and revision, a Secret's ``stringData`` goes into ``data``, a ClusterIP
  Service gets a cluster IP, a pod its QoS class and requests defaulted to limits.
* ResourceQuota admission (rules in ``kubefake.quota``): a pod that would take a quota'd amount of its
  namespace over ``spec.hard`` is refused with 403 Forbidden, ``pods "NAME" is forbidden: exceeded quota:
  QUOTA, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited:
  requests.nvidia.com/gpu=8``, and one that leaves out cpu or memory that a quota holds with ``pods "NAME" is
  forbidden: failed quota: QUOTA: must specify ...``. Succeeded and Failed pods count only for ``count/pods``.
  ``status.hard`` and ``status.used`` of every ResourceQuota follow the pods, as the quota controller keeps
  them (``quota_used(namespace)`` reads them); ``_room`` tells the Job controller when a refused pod may fit.

``Admission`` is one part of ``kubefake.server.FakeKubernetes``; ``kubefake.store`` calls its hooks.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json

from . import quota as quotas
from .resources import RESOURCES, ApiError
from .validation import errors as validation_errors


def default_job(job: dict) -> None:
    """What the API server adds to a new Job: the selector on a label with its uid, those labels on its pods."""
    meta, spec = job["metadata"], job.setdefault("spec", {})
    labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"],
              "controller-uid": meta["uid"], "job-name": meta["name"]}
    if not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}})
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        template_meta["labels"] = {**template_meta.get("labels", {}), **labels}
    job["status"] = {"active": 0}


def invalid_deployment(deployment: dict) -> str:
    """What the API server's own validation of a Deployment refuses beyond the schema."""
    spec = deployment.get("spec") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not selector:
        return "spec.selector: Required value"
    if any(labels.get(key) != value for key, value in selector.items()):
        return (f"spec.template.metadata.labels: Invalid value: {json.dumps(labels)}: `selector` does not match "
                "template `labels`")
    policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy", "Always")
    if policy != "Always":
        return f'spec.template.spec.restartPolicy: Unsupported value: "{policy}": supported values: "Always"'
    return ""


def default_deployment(deployment: dict, current: dict | None = None, status_update: bool = False) -> None:
    """What the API server adds to a Deployment (replicas, strategy, history, deadline, its revision), and on
    an update: a new generation when the spec changed, the status kept unless the status itself is written."""
    spec = deployment.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%",
                                                                           "maxSurge": "25%"}})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    meta = deployment["metadata"]
    annotations = meta.setdefault("annotations", {})
    if current is None:
        meta["generation"] = 1
        annotations.setdefault("deployment.kubernetes.io/revision", "1")
        deployment["status"] = {}
        return
    before = current["metadata"]
    meta["generation"] = before.get("generation", 1) + (current.get("spec") != spec)
    revision = int((before.get("annotations") or {}).get("deployment.kubernetes.io/revision", "1"))
    if current["spec"].get("template") != spec.get("template"):
        revision += 1
    annotations["deployment.kubernetes.io/revision"] = str(revision)
    if not status_update:
        deployment["status"] = copy.deepcopy(current.get("status") or {})


def qos_class(pod: dict) -> str:
    containers = [*pod["spec"].get("containers", []), *pod["spec"].get("initContainers", [])]
    if quotas.best_effort(pod):
        return "BestEffort"
    for container in containers:
        requests, limits = quotas.container_resources(container)
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name) != limits[name]:
                return "Burstable"
    return "Guaranteed"


class Admission:
    """Typing, validation, defaulting and ResourceQuota admission, with the quota controller's bookkeeping."""

    def _init_admission(self, validate: bool) -> None:
        self.validate = validate
        # quota bookkeeping: what each pod counts, the sum per namespace, the quotas per namespace
        self._pod_usage: dict[str, dict[str, dict]] = {}
        self._usage: dict[str, dict[str, quotas.Quantity]] = {}
        self._quota_names: dict[str, set[str]] = {}
        self._dirty: set[str] = set()  # namespaces whose quotas and waiting jobs to look at again
        self._cluster_ips = itertools.count(10)

    # --- typing, validation and defaulting ---------------------------------------------------------------

    def _typed(self, plural: str, body: dict) -> dict:
        """``kind`` and ``apiVersion`` from the URL when the body leaves them out, as a real API server fills
        them; 400 when the body names another type."""
        kind, api_version, _namespaced = RESOURCES[plural]
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        body = {**body, "kind": body.get("kind") or kind, "apiVersion": body.get("apiVersion") or api_version}
        if body["apiVersion"] != api_version:
            raise ApiError(400, "BadRequest", f"the API version in the data ({body['apiVersion']}) does not match "
                                              f"the expected API version ({api_version})")
        if body["kind"] != kind:
            raise ApiError(400, "BadRequest", f"the kind in the data ({body['kind']}) does not match the expected "
                                              f"kind ({kind})")
        return body

    def _check(self, body: dict, name: str) -> None:
        if self.validate and (problem := validation_errors(body)):
            raise ApiError(422, "Invalid", f'{body["kind"]} "{name}" is invalid: {problem}')
        if body["kind"] == "ResourceQuota" and (problem := quotas.invalid_hard_keys(body)):
            raise ApiError(422, "Invalid", f'ResourceQuota "{name}" is invalid: {problem}')
        if body["kind"] == "Deployment" and (problem := invalid_deployment(body)):
            raise ApiError(422, "Invalid", f'Deployment.apps "{name}" is invalid: {problem}')

    def _default_new(self, plural: str, obj: dict) -> None:
        """A new object's defaults and allocations, then (for a pod) quota admission; it is not stored yet."""
        if plural == "secrets" and "stringData" in obj:
            obj.setdefault("data", {}).update({k: base64.b64encode(v.encode()).decode()
                                                for k, v in obj.pop("stringData").items()})
        if plural == "namespaces":
            obj["status"] = {"phase": "Active"}
        if plural == "jobs":
            default_job(obj)
        if plural == "resourcequotas":
            obj.pop("status", None)  # the quota controller's to fill
        if plural == "deployments":
            default_deployment(obj)
        if plural == "services":
            self._assign_cluster_ip(obj)
        if plural == "ingresses":
            obj["status"] = {"loadBalancer": {}}
        if plural == "pods":
            quotas.default_requests(obj)
            obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
            self._admit_pod(obj)

    def _default_update(self, plural: str, updated: dict, current: dict, status_update: bool) -> None:
        if plural == "deployments":
            default_deployment(updated, current, status_update=status_update)

    def _assign_cluster_ip(self, service: dict) -> None:
        spec = service.setdefault("spec", {})
        if spec.get("type", "ClusterIP") in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.get("clusterIP"):
            number = next(self._cluster_ips)
            spec["clusterIP"] = f"10.96.{number // 250}.{number % 250 + 1}"
            spec["clusterIPs"] = [spec["clusterIP"]]

    # --- resource quotas (admission and the quota controller) ------------------------------------------

    def _track_quota(self, event: str, quota: dict) -> None:
        namespace, name = quota["metadata"]["namespace"], quota["metadata"]["name"]
        names = self._quota_names.setdefault(namespace, set())
        names.discard(name) if event == "DELETED" else names.add(name)
        self._dirty.add(namespace)

    def _track_pod(self, event: str, pod: dict) -> None:
        """Keep what each pod counts and the namespace's sums; a namespace whose sums change is looked at again."""
        namespace, name = pod["metadata"].get("namespace", ""), pod["metadata"]["name"]
        pods = self._pod_usage.setdefault(namespace, {})
        before = pods.get(name)
        if event == "MODIFIED" and before is not None and ("pods" not in before) == quotas.terminal(pod):
            return  # a pod's resources do not change (the API server refuses it): only its ending counts
        after = None if event == "DELETED" else quotas.pod_usage(pod)
        if before == after:
            return
        total = self._usage.setdefault(namespace, {})
        for key, quantity in (before or {}).items():
            total[key] = total[key] - quantity
        for key, quantity in (after or {}).items():
            total[key] = total[key] + quantity if key in total else quantity
        if after is None:
            pods.pop(name, None)
        else:
            pods[name] = after
        self._dirty.add(namespace)

    def _quotas_in(self, namespace: str) -> list[dict]:
        return [self.objects[("resourcequotas", namespace, name)]
                for name in sorted(self._quota_names.get(namespace, ()))
                if ("resourcequotas", namespace, name) in self.objects]

    def _quota_usage(self, quota: dict) -> dict[str, quotas.Quantity]:
        """What the namespace's pods count against ``quota``, for each key it holds that pods count for."""
        namespace = quota["metadata"]["namespace"]
        keys = quotas.matching_keys(quota)
        spec = quota.get("spec") or {}
        if spec.get("scopes") or spec.get("scopeSelector"):
            total: dict = {}
            for name, usage in self._pod_usage.get(namespace, {}).items():
                if quotas.quota_matches(quota, self.objects[("pods", namespace, name)]):
                    for key, quantity in usage.items():
                        total[key] = total[key] + quantity if key in total else quantity
        else:
            total = self._usage.get(namespace, {})
        return {key: total.get(key, quotas.Quantity(0)) for key in keys}

    def _admit_pod(self, pod: dict) -> None:
        """The ResourceQuota admission plugin: 403 when ``pod`` would take a namespace over a quota."""
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta.get("name", "")
        matching = [q for q in self._quotas_in(namespace) if quotas.quota_matches(q, pod)]
        if not matching:
            return
        details = {"name": name, "kind": "pods"}
        for quota in matching:
            if problem := quotas.missing_requests(pod, quotas.matching_keys(quota)):
                raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: failed quota: '
                                                 f'{quota["metadata"]["name"]}: {problem}', details)
        usage = quotas.pod_usage(pod)
        for quota in matching:
            used = self._quota_usage(quota)
            requested = {key: usage[key] for key in used if key in usage}
            hard = {key: quotas.Quantity.parse(quota["spec"]["hard"][key]) for key in requested}
            exceeded = [key for key in requested if used[key].nanos + requested[key].nanos > hard[key].nanos]
            if exceeded:
                def only(values, keys=exceeded):
                    return quotas.pretty({key: values[key] for key in keys})

                raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: exceeded quota: '
                                                 f'{quota["metadata"]["name"]}, requested: {only(requested)}, '
                                                 f'used: {only(used)}, limited: {only(hard)}', details)

    def _refresh_quotas(self, namespace: str) -> None:
        """The quota controller: ``status.hard`` from the spec, ``status.used`` from the pods."""
        for quota in self._quotas_in(namespace):
            spec_hard = (quota.get("spec") or {}).get("hard") or {}
            hard = {key: quotas.canonical(value) for key, value in spec_hard.items()}
            status = {"hard": hard, "used": {key: str(q) for key, q in self._quota_usage(quota).items()}}
            if quota.get("status") != status:
                quota["status"] = status
                self._bump("MODIFIED", "resourcequotas", quota)

    def _room(self, namespace: str) -> dict:
        """What each quota of the namespace has left, per key: a waiting job is tried again when this grows."""
        room = {}
        for quota in self._quotas_in(namespace):
            for key, used in self._quota_usage(quota).items():
                room[(quota["metadata"]["name"], key)] = quotas.Quantity.parse(quota["spec"]["hard"][key]).nanos - \
                    used.nanos
        return room

    def _room_grew(self, namespace: str, before: dict | None) -> bool:
        if before is None:
            return True
        now = self._room(namespace)
        return set(now) != set(before) or any(now[key] > before[key] for key in now)

    def quota_used(self, namespace: str, name: str | None = None) -> dict[str, str]:
        """``status.used`` of the namespace's quota ``name``, or of all its quotas merged (they agree on a
        key unless scoped)."""
        with self._changing():
            pass  # leaving it brings the quotas up to date with changes made under the bare lock
        with self.lock:
            used: dict[str, str] = {}
            for quota in self._quotas_in(namespace):
                if name is None or quota["metadata"]["name"] == name:
                    used.update(quota.get("status", {}).get("used", {}))
            return used
