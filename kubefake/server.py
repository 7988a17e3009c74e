"""A small Kubernetes API server on loopback, for tests and benchmarks driven by the real ``kubernetes`` client
and by ``kubectl``.

It speaks the REST paths the portal uses (core ``v1``, ``batch/v1``, ``apps/v1``, ``networking.k8s.io/v1``,
``scheduling.k8s.io/v1``): create, get, list with label and field selectors, patch (merge; strategic merge is
taken as merge; JSON patch), replace, delete and deletecollection, status, pod logs, and watch streams with
``timeoutSeconds``. Objects get a uid, a rising resourceVersion and a creationTimestamp; ``kind`` and
``apiVersion`` come from the URL when a body leaves them out (400 when they name another type); lists are
``<Kind>List`` with ``metadata.resourceVersion``, in namespace/name order; errors are ``Status`` bodies (400,
403, 404, 409, 410, 422, 5xx) worded like a real server's (``jobs.batch "x" not found``). Every body it
receives is validated against the Kubernetes 1.30 schema in strict mode and refused with 422 like a real API
server. A new Job gets the selector and pod labels the API server adds; deleting a namespace deletes what is
in it (at once, where a real namespace first goes Terminating).

For ``kubectl`` (1.29 and later; ``/usr/bin/kubectl`` dispatches to the one matching the server, 1.30) it
serves ``/version``; legacy discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>[/<version>]``, as
plain ``application/json`` even when the client prefers aggregated discovery: client-go then reads the legacy
documents); OpenAPI v3 (``kubefake.openapi``: with it ``kubectl create -f`` leaves validation to this server,
``?fieldValidation=Strict``, and ``kubectl explain`` works; kubectl 1.28 and older ask ``/openapi/v2``, which is
not served: they need ``--validate=false``); and server-side printing: an ``Accept`` with ``as=Table`` gets a
``meta.k8s.io/v1`` Table (``kubectl get`` without ``-o``, watches included), ``as=PartialObjectMetadata[List]``
metadata only.

A tiny Job controller creates one pod per completion (indexed when asked), places it on the node its
affinity names and starts it. A tiny Deployment controller does what a Deployment and its ReplicaSet do: it
keeps ``spec.replicas`` pods of the current template (named ``<deployment>-<pod-template-hash>-<suffix>``, owned
by that ReplicaSet, which is not served), replaces a deleted pod, recreates the pods when the template changes,
deletes them with the Deployment, and keeps ``status`` (replicas, updated, ready, available, the Available and
Progressing conditions) in step with its pods. A container with a readiness probe starts not ready (the fake
runs no probes): ``ready`` marks it ready, ``crash_loop`` makes it crash-loop (CrashLoopBackOff, restartCount,
the last state's exit code) and ``failing_readiness`` makes it run without passing its probe (and records the
kubelet's ``Unhealthy`` event). A ClusterIP Service gets a cluster IP.

Injectors make pods succeed, exit, run out of memory, fail to pull their
image, get evicted, lose their node, hang in NCCL, or miss their deadline; ``fail_next`` answers the next
requests with 5xx; ``compact`` forgets the event history so that old watches get 410. Pods posted directly
start too (``start_pods``), without a node unless they name one.

ResourceQuota is enforced on pod creation as the real quota admission does (rules in ``kubefake.quota``):
requests default to limits (stored in the pod too, as the API server's defaulting does); a pod that would take
a quota'd amount of its namespace over ``spec.hard`` is refused with 403 Forbidden, ``pods "NAME" is forbidden:
exceeded quota: QUOTA, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited:
requests.nvidia.com/gpu=8``, and one that leaves out cpu or memory that a quota holds with ``pods "NAME" is
forbidden: failed quota: QUOTA: must specify ...``. Succeeded and Failed pods count only for ``count/pods``.
``status.hard`` and ``status.used`` of every ResourceQuota follow the pods, as the quota controller keeps them
(``quota_used(namespace)`` reads them). When the Job controller is refused a pod it does what the real one
does: no pod, a ``FailedCreate`` Warning Event on the Job (``Error creating: pods "..." is forbidden: ...``;
events are recorded as client-go's recorder does, see ``record_event``), and another try whenever the
namespace has more room (a quota created, replaced, patched or deleted, a pod finished or deleted), so a job
refused by a quota too small starts once the quota is raised. A finished or deleted job stops trying.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import hashlib
import itertools
import json
import re
import socket
import threading
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from . import openapi
from . import quota as quotas
from .validation import errors as validation_errors

#: plural -> (kind, apiVersion, namespaced)
RESOURCES = {
    "namespaces": ("Namespace", "v1", False), "nodes": ("Node", "v1", False),
    "pods": ("Pod", "v1", True), "services": ("Service", "v1", True), "events": ("Event", "v1", True),
    "secrets": ("Secret", "v1", True), "resourcequotas": ("ResourceQuota", "v1", True),
    "persistentvolumeclaims": ("PersistentVolumeClaim", "v1", True),
    "jobs": ("Job", "batch/v1", True), "networkpolicies": ("NetworkPolicy", "networking.k8s.io/v1", True),
    "priorityclasses": ("PriorityClass", "scheduling.k8s.io/v1", False),
    "deployments": ("Deployment", "apps/v1", True), "ingresses": ("Ingress", "networking.k8s.io/v1", True),
}
#: plural -> (singular, short names, categories, subresources), as a real API server's discovery lists them
NAMES = {
    "namespaces": ("namespace", ["ns"], [], ("status",)), "nodes": ("node", ["no"], [], ("status",)),
    "pods": ("pod", ["po"], ["all"], ("log", "status", "eviction")),
    "services": ("service", ["svc"], ["all"], ("status",)), "events": ("event", ["ev"], [], ()),
    "secrets": ("secret", [], [], ()), "resourcequotas": ("resourcequota", ["quota"], [], ("status",)),
    "persistentvolumeclaims": ("persistentvolumeclaim", ["pvc"], [], ("status",)),
    "jobs": ("job", [], ["all"], ("status",)), "networkpolicies": ("networkpolicy", ["netpol"], [], ()),
    "priorityclasses": ("priorityclass", ["pc"], [], ()),
    "deployments": ("deployment", ["deploy"], ["all"], ("status",)),
    "ingresses": ("ingress", ["ing"], [], ("status",)),
}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUBRESOURCE_VERBS = {"log": ["get"], "status": ["get", "patch", "update"], "eviction": ["create"]}
PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                  r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$")
NAMESPACE_PATH = re.compile(r"^/api/v1/namespaces(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$")


def _qualified(plural: str) -> str:
    """``jobs.batch``, ``pods``: how a real API server names a resource in its messages."""
    group = RESOURCES[plural][1].rpartition("/")[0]
    return f"{plural}.{group}" if group else plural


def _details(plural: str, name: str) -> dict:
    group = RESOURCES[plural][1].rpartition("/")[0]
    return {"name": name, **({"group": group} if group else {}), "kind": plural}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def _match_labels(labels: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in re.split(r",(?![^()]*\))", selector or ""))):
        if m := re.match(r"^([\w./-]+)\s+(in|notin)\s+\((.*)\)$", term):
            values = {v.strip() for v in m.group(3).split(",")}
            if (labels.get(m.group(1)) in values) != (m.group(2) == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: dict, path: str):
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _match_fields(obj: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        negate = "!=" in term
        key, value = term.split("!=" if negate else "=", 1)
        if (str(_field(obj, key.strip().lstrip("=")) or "") == value.strip().lstrip("=")) == negate:
            return False
    return True


def _merge(target: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _json_patch(target: dict, operations: list) -> dict:
    """RFC 6902 (add, remove, replace, move, copy, test), what ``kubectl patch --type=json`` sends."""

    def walk(doc, pointer: str):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
        if not parts:
            raise ApiError(422, "Invalid", "the whole document cannot be patched")
        for part in parts[:-1]:
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        return doc, parts[-1]

    def get(pointer):
        parent, key = walk(target, pointer)
        return parent[int(key)] if isinstance(parent, list) else parent[key]

    def remove(pointer):
        parent, key = walk(target, pointer)
        return parent.pop(int(key)) if isinstance(parent, list) else parent.pop(key)

    def add(pointer, value):
        parent, key = walk(target, pointer)
        if isinstance(parent, list):
            parent.insert(len(parent) if key == "-" else int(key), value)
        else:
            parent[key] = value

    for operation in operations:
        op, path = operation.get("op"), operation.get("path", "")
        try:
            if op == "add":
                add(path, copy.deepcopy(operation["value"]))
            elif op == "remove":
                remove(path)
            elif op == "replace":
                remove(path)
                add(path, copy.deepcopy(operation["value"]))
            elif op in ("move", "copy"):
                value = remove(operation["from"]) if op == "move" else copy.deepcopy(get(operation["from"]))
                add(path, value)
            elif op == "test":
                if get(path) != operation["value"]:
                    raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                                                   f"request: testing value {path} failed")
            else:
                raise ApiError(400, "BadRequest", f"Unexpected kind: {op}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                           f"{op} operation does not apply: doc is missing path: {path!r}") from exc
    return target


class FakeKubernetes:
    """The API server's state, its controllers and its injectors. ``start()`` serves it over HTTP."""

    def __init__(self, nodes=(), *, validate: bool = True, start_pods: bool = True, history: int = 100_000,
                 record_access: bool = False):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.validate = validate
        self.start_pods = start_pods
        self.rv = 0
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.history: deque = deque(maxlen=history)
        self.compacted_before = 0
        self.logs: dict[tuple[str, str], str] = {}
        self.failures: list[list] = []  # [method, path fragment, code, remaining]
        self.requests: list[tuple[str, str]] = []
        # Opt-in (record_access=True): (API group, resource[/subresource], verb) of every request to a resource,
        # as a real API server's authorizer sees it — what an RBAC rule must allow (tests/deploy/test_rbac.py).
        self.access: list[tuple[str, str, str]] | None = [] if record_access else None
        self.deletions: list[tuple[str, str, str, str]] = []  # plural, namespace, name, propagation
        self.server = None
        self._suffix = itertools.count(1)
        # quota bookkeeping: what each pod counts, the sum per namespace, the quotas per namespace
        self._pod_usage: dict[str, dict[str, dict]] = {}
        self._usage: dict[str, dict[str, quotas.Quantity]] = {}
        self._quota_names: dict[str, set[str]] = {}
        self._dirty: set[str] = set()  # namespaces whose quotas and waiting jobs to look at again
        self._depth = 0
        # the job controller: pod slots still to create per (namespace, job), and the room when last refused
        self._pending: dict[tuple[str, str], list[int]] = {}
        self._refused_room: dict[tuple[str, str], dict] = {}
        self._event_names: dict[tuple, str] = {}
        # the deployment controller: deployments per namespace, the deployment of each ReplicaSet name, and the
        # deployments whose status is to be brought up to date
        self._deployments_in: dict[str, set[str]] = {}
        self._rs_owner: dict[tuple[str, str], str] = {}
        self._dirty_deployments: set[tuple[str, str]] = set()
        self._cluster_ips = itertools.count(10)
        self._similar_events: dict[tuple, set[str]] = {}
        for name in nodes:
            self.add_node(name)

    # --- serving ---------------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        fake = self

        class Handler(_Handler):
            api = fake

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                         name="kubefake").start()  # a short poll: stop() returns at once
        return f"http://{host}:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server:
            with self.changed:
                self.changed.notify_all()
            self.server.shutdown()
            self.server.server_close()

    def kubeconfig(self, url: str, context: str = "fake") -> dict:
        return {"apiVersion": "v1", "kind": "Config", "current-context": context,
                "clusters": [{"name": context, "cluster": {"server": url}}],
                "users": [{"name": context, "user": {"token": "fake-token"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": context}}]}

    # --- storage ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _changing(self):
        """Hold the lock; when the outermost change ends, bring quotas and waiting jobs up to date."""
        with self.lock:
            self._depth += 1
            try:
                yield
            finally:
                try:
                    if self._depth == 1:  # settling changes things too: they settle in the same loop
                        self._settle()
                finally:
                    self._depth -= 1

    def _bump(self, event: str, plural: str, obj: dict) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]  # kept serialized: cheaper than a copy, and watches send it as it is
        self.history.append((self.rv, event, plural, json.dumps(obj), meta.get("namespace"),
                             dict(meta.get("labels") or {})))
        if plural == "pods":
            self._track_pod(event, obj)
            if (deployment := self._deployment_of(obj)) is not None:
                self._dirty_deployments.add((meta.get("namespace"), deployment))
        elif plural == "resourcequotas":
            namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            names = self._quota_names.setdefault(namespace, set())
            names.discard(name) if event == "DELETED" else names.add(name)
            self._dirty.add(namespace)
        self.changed.notify_all()

    def _key(self, plural, namespace, name):
        return plural, (namespace or "") if RESOURCES[plural][2] else "", name

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
        if body["kind"] == "Deployment" and (problem := _invalid_deployment(body)):
            raise ApiError(422, "Invalid", f'Deployment.apps "{name}" is invalid: {problem}')

    def create(self, plural: str, namespace: str | None, body: dict) -> dict:
        kind, api_version, namespaced = RESOURCES[plural]
        body = self._typed(plural, body)
        self._check(body, body.get("metadata", {}).get("name", ""))
        with self._changing():
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if namespaced:
                namespace = namespace or meta.get("namespace") or "default"
                if ("namespaces", "", namespace) not in self.objects:
                    raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                                   {"name": namespace, "kind": "namespaces"})
                meta["namespace"] = namespace
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{next(self._suffix):05d}"
            key = self._key(plural, namespace, meta.get("name", ""))
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{_qualified(plural)} "{meta["name"]}" already exists',
                               _details(plural, meta["name"]))
            meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": _now(), "generation": 1})
            if plural == "secrets" and "stringData" in obj:
                obj.setdefault("data", {}).update({k: base64.b64encode(v.encode()).decode()
                                                    for k, v in obj.pop("stringData").items()})
            if plural == "namespaces":
                obj["status"] = {"phase": "Active"}
            if plural == "jobs":
                _default_job(obj)
            if plural == "resourcequotas":
                obj.pop("status", None)  # the quota controller's to fill
            if plural == "deployments":
                _default_deployment(obj)
                self._deployments_in.setdefault(namespace, set()).add(meta["name"])
            if plural == "services":
                self._assign_cluster_ip(obj)
            if plural == "ingresses":
                obj["status"] = {"loadBalancer": {}}
            if plural == "pods":
                quotas.default_requests(obj)
                obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj)}
                self._admit_pod(obj)
            self.objects[key] = obj
            self._bump("ADDED", plural, obj)
            if plural == "jobs":
                self._start_job(obj)
            if plural == "deployments":
                self._reconcile_deployment(obj)
            if plural == "pods" and self.start_pods:
                self._set_container(obj, running=True)
            return copy.deepcopy(obj)

    def get(self, plural: str, namespace: str | None, name: str) -> dict:
        with self.lock:
            obj = self.objects.get(self._key(plural, namespace, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{_qualified(plural)} "{name}" not found', _details(plural, name))
            return copy.deepcopy(obj)

    def list(self, plural, namespace=None, label_selector="", field_selector="") -> tuple[list[dict], int]:
        with self.lock:
            items = [copy.deepcopy(o) for (p, ns, _n), o in self.objects.items()
                     if p == plural and (not namespace or ns == namespace)
                     and _match_labels(o["metadata"].get("labels", {}), label_selector)
                     and _match_fields(o, field_selector)]
            return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])), self.rv

    def update(self, plural, namespace, name, patch: dict | None = None, replace: dict | None = None,
               validate: bool = True, json_patch: list | None = None) -> dict:
        with self._changing():
            key = self._key(plural, namespace, name)
            if key not in self.objects:
                raise ApiError(404, "NotFound", f'{_qualified(plural)} "{name}" not found', _details(plural, name))
            current = self.objects[key]
            if replace is not None:
                updated = copy.deepcopy(self._typed(plural, replace))
            elif json_patch is not None:
                updated = _json_patch(copy.deepcopy(current), json_patch)
            else:
                updated = _merge(copy.deepcopy(current), patch or {})
            for field in ("uid", "creationTimestamp", "namespace", "name"):
                updated.setdefault("metadata", {})[field] = current["metadata"].get(field)
            updated.update({"kind": current["kind"], "apiVersion": current["apiVersion"]})
            if validate:
                self._check(updated, name)
            if plural == "deployments":
                _default_deployment(updated, current, status_update=not validate)
            self.objects[key] = updated
            self._bump("MODIFIED", plural, updated)
            if plural == "deployments":
                self._reconcile_deployment(updated)
            return copy.deepcopy(updated)

    def delete(self, plural, namespace, name, propagation: str = "Background") -> dict:
        with self._changing():
            obj = self.objects.pop(self._key(plural, namespace, name), None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{_qualified(plural)} "{name}" not found', _details(plural, name))
            self.deletions.append((plural, namespace or "", name, propagation))
            self._bump("DELETED", plural, obj)
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
            return copy.deepcopy(obj)

    def delete_collection(self, plural, namespace, label_selector="", field_selector="") -> list[dict]:
        with self._changing():
            items, _rv = self.list(plural, namespace, label_selector, field_selector)
            return [self.delete(plural, item["metadata"].get("namespace"), item["metadata"]["name"])
                    for item in items
                    if self._key(plural, item["metadata"].get("namespace"), item["metadata"]["name"]) in self.objects]

    def events_since(self, rv: int):
        """Events after ``rv`` (newest last), read from the end of the history: O(new events)."""
        if rv and rv < self.compacted_before - 1:  # from the newest compacted version on, nothing is missing
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.compacted_before})")
        newer = []
        for event in reversed(self.history):
            if event[0] <= rv:
                break
            newer.append(event)
        newer.reverse()
        return newer

    def compact(self) -> None:
        """Forget the event history: a watch from an older resourceVersion now gets 410 Gone."""
        with self.lock:
            self.history.clear()
            self.compacted_before = self.rv + 1

    # --- resource quotas (admission and the quota controller) ------------------------------------------

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

    def record_event(self, obj: dict, type_: str, reason: str, message: str, component: str) -> dict:
        """A core/v1 Event about ``obj``, recorded as client-go's recorder does: the same message again counts
        up; from the 10th different message of the same reason on, they go into one event ``(combined from
        similar events): <latest message>`` that counts up."""
        with self._changing():
            meta = obj["metadata"]
            namespace = meta.get("namespace") or "default"
            similar = (namespace, meta.get("uid"), type_, reason, component)
            messages = self._similar_events.setdefault(similar, set())
            messages.add(message)
            if len(messages) >= 10:
                identity, message = (*similar, None), f"(combined from similar events): {message}"
            else:
                identity = (*similar, message)
            existing = self.objects.get(("events", namespace, self._event_names.get(identity, "")))
            if existing is not None:
                existing.update({"count": existing.get("count", 1) + 1, "lastTimestamp": _now(), "message": message})
                self._bump("MODIFIED", "events", existing)
                return copy.deepcopy(existing)
            now = _now()
            stamp = time.time_ns()  # client-go names events <object>.<unix nanoseconds in hex>: they sort in time
            while ("events", namespace, name := f"{meta['name']}.{stamp:x}") in self.objects:
                stamp += 1
            event = {"apiVersion": "v1", "kind": "Event",
                     "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                                  "creationTimestamp": now},
                     "involvedObject": {"kind": obj["kind"], "namespace": namespace, "name": meta["name"],
                                        "uid": meta.get("uid"), "apiVersion": obj["apiVersion"],
                                        "resourceVersion": meta.get("resourceVersion")},
                     "reason": reason, "message": message, "source": {"component": component},
                     "firstTimestamp": now, "lastTimestamp": now, "count": 1, "type": type_, "eventTime": None,
                     "reportingComponent": component, "reportingInstance": ""}
            self._event_names[identity] = name
            self.objects[("events", namespace, name)] = event
            self._bump("ADDED", "events", event)
            return copy.deepcopy(event)

    # --- nodes and the job controller -------------------------------------------------------------------

    def add_node(self, name: str, gpus: int = 8) -> None:
        with self.lock:
            node = {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                "labels": {"kubernetes.io/hostname": name}},
                "spec": {}, "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                       "message": "kubelet is posting ready status"}],
                                       "nodeInfo": {"kubeletVersion": "v1.30.0-kubefake"}}}
            self.objects[("nodes", "", name)] = node
            self._bump("ADDED", "nodes", node)

    def _pods_of(self, namespace, job_name) -> list[dict]:
        return [o for (p, ns, _n), o in self.objects.items()
                if p == "pods" and ns == namespace and o["metadata"].get("labels", {}).get("job-name") == job_name]

    def _start_job(self, job: dict) -> None:
        meta = job["metadata"]
        self._pending[(meta["namespace"], meta["name"])] = list(range(job["spec"].get("parallelism", 1)))
        job["status"] = {"active": self._create_job_pods(job), "startTime": _now()}
        self._bump("MODIFIED", "jobs", job)

    def _job_pod(self, job: dict, index: int) -> dict:
        spec, meta = job["spec"], job["metadata"]
        template = spec["template"]
        hosts = _pinned_hosts(template["spec"])
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
                            "creationTimestamp": _now(),
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

    def _set_container(self, pod: dict, *, running=False, waiting=None, terminated=None, phase=None,
                       reason=None, message=None, ready=None, restarts=None, last_terminated=None) -> None:
        """The kubelet's report on the pod's (first) container. ``ready`` None: a running container is ready
        unless it has a readiness probe (which the fake never runs: ``ready`` marks it ready)."""
        container = pod["spec"]["containers"][0]
        state = ({"running": {"startedAt": _now()}} if running else
                 {"waiting": waiting} if waiting else {"terminated": {"startedAt": _now(), "finishedAt": _now(),
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
            entry["lastState"] = {"terminated": {"startedAt": _now(), "finishedAt": _now(), **last_terminated}}
        elif previous.get("lastState"):
            entry["lastState"] = previous["lastState"]
        status["containerStatuses"] = [entry]
        status["startTime"] = status.get("startTime") or _now()
        ended = status["phase"] in ("Succeeded", "Failed")
        readiness = {"status": "True" if ready else "False", "lastProbeTime": None, "lastTransitionTime": _now()}
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
        if hosts := _pinned_hosts(pod_spec):
            pod_spec["nodeName"] = hosts[0]
        rs_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{meta['uid']}/{rs_name}"))
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {**pod_meta, "name": f"{rs_name}-{next(self._suffix):05d}",
                            "namespace": meta["namespace"], "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                                                 "uid": rs_uid, "controller": True, "blockOwnerDeletion": True}]},
               "spec": pod_spec, "status": {"phase": "Pending", "qosClass": "BestEffort", "conditions": []}}
        quotas.default_requests(pod)
        pod["status"]["qosClass"] = _qos_class(pod)
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
        available = ready >= wanted - _max_unavailable(deployment)
        complete = updated == wanted == ready == len(pods)
        previous = {c["type"]: c for c in (deployment.get("status") or {}).get("conditions") or []}

        def condition(type_, ok, reason, message):
            kept = previous.get(type_, {})
            same = kept.get("status") == ("True" if ok else "False") and kept.get("reason") == reason
            return {"type": type_, "status": "True" if ok else "False",
                    "lastUpdateTime": kept["lastUpdateTime"] if same else _now(),
                    "lastTransitionTime": kept["lastTransitionTime"] if same else _now(),
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

    def _assign_cluster_ip(self, service: dict) -> None:
        spec = service.setdefault("spec", {})
        if spec.get("type", "ClusterIP") in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.get("clusterIP"):
            number = next(self._cluster_ips)
            spec["clusterIP"] = f"10.96.{number // 250}.{number % 250 + 1}"
            spec["clusterIPs"] = [spec["clusterIP"]]

    # --- injectors (what tests and benchmarks make happen) -----------------------------------------------

    def pods(self, namespace: str, job_name: str) -> list[dict]:
        with self.lock:
            return sorted(self._pods_of(namespace, job_name), key=lambda p: p["metadata"]["name"])

    def deployment_pods(self, namespace: str, name: str) -> list[dict]:
        with self.lock:
            return copy.deepcopy(self._deployment_pods(namespace, name))

    def _owned(self, namespace: str, name: str) -> list[dict]:
        """The pods of Deployment ``name``, else of Job ``name``."""
        if ("deployments", namespace, name) in self.objects:
            return self._deployment_pods(namespace, name)
        return self._pods_of(namespace, name)

    def ready(self, namespace: str, name: str, ready: bool = True) -> None:
        """The pods of Deployment (or Job) ``name`` run and pass (``ready`` False: fail) their readiness probe."""
        with self._changing():
            for pod in self._owned(namespace, name):
                self._set_container(pod, running=True, ready=ready)

    def crash_loop(self, namespace: str, name: str, code: int = 1, reason: str = "Error", restarts: int = 3,
                   log: str = "") -> None:
        """Their container keeps exiting with ``code`` and the kubelet keeps restarting it: CrashLoopBackOff,
        ``restarts`` restarts, the last state's exit code and reason; the pod stays Running, as a real one does."""
        with self._changing():
            for pod in self._owned(namespace, name):
                pod_name = pod["metadata"]["name"]
                container = pod["spec"]["containers"][0]["name"]
                self._set_container(pod, waiting={
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {min(10 * 2 ** restarts, 300)}s restarting failed container={container} "
                               f"pod={pod_name}_{namespace}({pod['metadata']['uid']})"},
                    phase="Running", ready=False, restarts=restarts,
                    last_terminated={"exitCode": code, "reason": reason})
                self.record_event(pod, "Warning", "BackOff", "Back-off restarting failed container "
                                  f"{container} in pod {pod_name}_{namespace}({pod['metadata']['uid']})", "kubelet")
                if log:
                    self.logs[(namespace, pod_name)] = log

    def failing_readiness(self, namespace: str, name: str,
                          message: str = "HTTP probe failed with statuscode: 503") -> None:
        """Their container runs but fails its readiness probe (the kubelet's Unhealthy event says how)."""
        with self._changing():
            for pod in self._owned(namespace, name):
                self._set_container(pod, running=True, ready=False)
                self.record_event(pod, "Warning", "Unhealthy", f"Readiness probe failed: {message}", "kubelet")

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
                         "conditions": [{**condition, "lastProbeTime": _now(), "lastTransitionTime": _now()}]}
        self._bump("MODIFIED", "jobs", job)

    def run(self, namespace, job_name) -> None:
        with self._changing():
            for pod in self._pods_of(namespace, job_name):
                self._set_container(pod, running=True)

    def succeed(self, namespace, job_name) -> None:
        with self._changing():
            for pod in self._pods_of(namespace, job_name):
                self._set_container(pod, terminated={"exitCode": 0, "reason": "Completed"})
            self._job_done(namespace, job_name)

    def exit(self, namespace, job_name, code=1, index=0, reason="Error", log="", others=None) -> None:
        """Pod ``index`` ends with ``code``; the others end too (``others`` None: they keep running)."""
        with self._changing():
            pods = self.pods(namespace, job_name)
            for i, pod in enumerate(pods):
                key = ("pods", namespace, pod["metadata"]["name"])
                if i == index:
                    self._set_container(self.objects[key], terminated={"exitCode": code, "reason": reason})
                    if log:
                        self.logs[(namespace, pod["metadata"]["name"])] = log
                elif others is not None:
                    self._set_container(self.objects[key], terminated={"exitCode": others, "reason": "Error"})
            self._job_done(namespace, job_name, "BackoffLimitExceeded", "Job has reached the specified backoff limit")

    def oom(self, namespace, job_name, index=0) -> None:
        self.exit(namespace, job_name, code=137, index=index, reason="OOMKilled")

    def image_pull_error(self, namespace, job_name, reason="ErrImagePull") -> None:
        with self._changing():
            for pod in self._pods_of(namespace, job_name):
                image = pod["spec"]["containers"][0]["image"]
                self._set_container(pod, waiting={"reason": reason, "message": f'failed to pull image "{image}": '
                                                                              "manifest unknown"})

    def evict(self, namespace, job_name, index=0) -> None:
        with self._changing():
            pod = self.pods(namespace, job_name)[index]
            self._set_container(self.objects[("pods", namespace, pod["metadata"]["name"])],
                                terminated={"exitCode": 137, "reason": "Error"}, phase="Failed", reason="Evicted",
                                message="The node was low on resource: memory.")

    def node_not_ready(self, node: str) -> None:
        """The node stops reporting: NotReady, and its pods fail as NodeLost."""
        with self._changing():
            node_obj = self.objects[("nodes", "", node)]
            node_obj["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                                 "message": "Kubelet stopped posting node status."}]
            self._bump("MODIFIED", "nodes", node_obj)
            for (plural, _ns, _name), pod in list(self.objects.items()):
                if plural == "pods" and pod["spec"].get("nodeName") == node and pod["status"]["phase"] == "Running":
                    self._set_container(pod, terminated={"exitCode": 255, "reason": "Unknown"}, phase="Failed",
                                        reason="NodeLost", message=f"Node {node} which was running pod is unresponsive")

    def deadline_exceeded(self, namespace, job_name) -> None:
        with self._changing():
            for pod in self._pods_of(namespace, job_name):
                self.delete("pods", namespace, pod["metadata"]["name"])
            self._job_done(namespace, job_name, "DeadlineExceeded", "Job was active longer than specified deadline")

    def set_log(self, namespace, pod_name, text) -> None:
        self.logs[(namespace, pod_name)] = text

    def fail_next(self, count: int, code: int = 500, method: str = "POST", path: str = "") -> None:
        with self.lock:
            self.failures.append([method, path, code, count])

    def _injected_failure(self, method, path) -> int | None:
        with self.lock:
            for failure in self.failures:
                if failure[3] > 0 and failure[0] == method and failure[1] in path:
                    failure[3] -= 1
                    return failure[2]
        return None


def _default_job(job: dict) -> None:
    """What the API server adds to a new Job: the selector on a label with its uid, those labels on its pods."""
    meta, spec = job["metadata"], job.setdefault("spec", {})
    labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"],
              "controller-uid": meta["uid"], "job-name": meta["name"]}
    if not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}})
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        template_meta["labels"] = {**template_meta.get("labels", {}), **labels}
    job["status"] = {"active": 0}


def _pinned_hosts(pod_spec: dict) -> list[str]:
    """The nodes a pod's required node affinity names by hostname (where the fake's scheduler puts it)."""
    hosts = []
    for term in (pod_spec.get("affinity", {}).get("nodeAffinity", {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])):
        for expression in term.get("matchExpressions", []):
            if expression["key"] == "kubernetes.io/hostname":
                hosts.extend(expression["values"])
    return hosts


def _invalid_deployment(deployment: dict) -> str:
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


def _default_deployment(deployment: dict, current: dict | None = None, status_update: bool = False) -> None:
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


def _max_unavailable(deployment: dict) -> int:
    strategy = deployment["spec"].get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    replicas = int(deployment["spec"].get("replicas", 1))
    if isinstance(value, str) and value.endswith("%"):
        return replicas * int(value[:-1]) // 100
    return int(value)


def _qos_class(pod: dict) -> str:
    containers = [*pod["spec"].get("containers", []), *pod["spec"].get("initContainers", [])]
    if quotas.best_effort(pod):
        return "BestEffort"
    for container in containers:
        requests, limits = quotas.container_resources(container)
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name) != limits[name]:
                return "Burstable"
    return "Guaranteed"


# --- discovery and server-side printing (what kubectl asks besides the objects) -------------------------------

@functools.lru_cache(maxsize=1)
def _group_versions() -> dict[str, list[str]]:
    """group -> plurals served under it ("" is the core group)."""
    groups: dict[str, list[str]] = {}
    for plural, (_kind, api_version, _namespaced) in RESOURCES.items():
        groups.setdefault(api_version.rpartition("/")[0], []).append(plural)
    return groups


def _api_group(group: str) -> dict:
    version = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"name": group, "versions": [version], "preferredVersion": version}


def discovery(path: str, server_address: str) -> dict | None:
    """Legacy discovery documents (APIVersions, APIGroupList, APIGroup, APIResourceList); None: not one."""
    if path.count("/") > 3:
        return None
    groups = _group_versions()
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [_api_group(group) for group in sorted(groups) if group]}
    if match := re.match(r"^/apis/([^/]+)$", path):
        return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(match.group(1))} \
            if match.group(1) in groups and match.group(1) else None
    match = re.match(r"^/(?:api/(v1)|apis/([^/]+)/(v1))$", path)
    if match is None or (match.group(1) is None and match.group(2) not in groups):
        return None
    group = match.group(2) or ""
    resources = []
    for plural in sorted(groups[group]):
        kind, _api_version, namespaced = RESOURCES[plural]
        singular, short_names, categories, subresources = NAMES[plural]
        entry = {"name": plural, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": VERBS}
        if short_names:
            entry["shortNames"] = short_names
        if categories:
            entry["categories"] = categories
        resources.append(entry)
        for sub in subresources:
            sub_entry = {"name": f"{plural}/{sub}", "singularName": "", "namespaced": namespaced, "kind": kind,
                         "verbs": SUBRESOURCE_VERBS[sub]}
            if sub == "eviction":
                sub_entry.update(kind="Eviction", group="policy", version="v1")
            resources.append(sub_entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/v1" if group else "v1",
            "resources": resources}


def _age(timestamp: str | None) -> str:
    """kubectl's HumanDuration of the time since ``timestamp``."""
    if not timestamp:
        return "<unknown>"
    seconds = int((datetime.now(UTC) - datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC))
                  .total_seconds())
    seconds = max(seconds, 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _pod_status(pod: dict) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            return state["waiting"]["reason"]
        if state.get("terminated", {}).get("reason") and not status.get("reason"):
            reason = state["terminated"]["reason"]
    return reason


def _columns(plural: str, obj: dict) -> list[tuple[str, object]]:
    """(column, cell) pairs like the real server's printers for the types kubectl users look at most."""
    meta, spec, status = obj.get("metadata", {}), obj.get("spec") or {}, obj.get("status") or {}
    age = ("Age", _age(meta.get("creationTimestamp")))
    if plural == "pods":
        containers = status.get("containerStatuses") or []
        return [("Name", meta["name"]),
                ("Ready", f"{sum(bool(c.get('ready')) for c in containers)}/{len(spec.get('containers', []))}"),
                ("Status", _pod_status(obj)), ("Restarts", sum(c.get("restartCount", 0) for c in containers)), age,
                ("Node", spec.get("nodeName") or "<none>")]
    if plural == "jobs":
        conditions = {c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"}
        state = "Complete" if "Complete" in conditions else "Failed" if "Failed" in conditions else "Running"
        return [("Name", meta["name"]), ("Status", state),
                ("Completions", f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}"), age]
    if plural == "namespaces":
        return [("Name", meta["name"]), ("Status", status.get("phase", "")), age]
    if plural == "nodes":
        ready = next((c["status"] for c in status.get("conditions") or [] if c["type"] == "Ready"), "Unknown")
        return [("Name", meta["name"]), ("Status", {"True": "Ready", "False": "NotReady"}.get(ready, "Unknown")),
                ("Roles", "<none>"), age, ("Version", status.get("nodeInfo", {}).get("kubeletVersion", ""))]
    if plural == "resourcequotas":
        used, hard = status.get("used", {}), status.get("hard", {})
        return [("Name", meta["name"]), age,
                ("Request", ", ".join(f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items())
                                      if not k.startswith("limits."))),
                ("Limit", ", ".join(f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items())
                                    if k.startswith("limits.")))]
    if plural == "events":
        involved = obj.get("involvedObject", {})
        return [("Last Seen", _age(obj.get("lastTimestamp"))), ("Type", obj.get("type", "")),
                ("Reason", obj.get("reason", "")), ("Object", f"{involved.get('kind', '').lower()}/"
                                                              f"{involved.get('name', '')}"),
                ("Message", obj.get("message", ""))]
    if plural == "services":
        ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
        return [("Name", meta["name"]), ("Type", spec.get("type", "ClusterIP")),
                ("Cluster-IP", spec.get("clusterIP", "<none>")), ("External-IP", "<none>"),
                ("Port(s)", ports or "<none>"), age]
    if plural == "secrets":
        return [("Name", meta["name"]), ("Type", obj.get("type", "Opaque")), ("Data", len(obj.get("data") or {})),
                age]
    if plural == "deployments":
        return [("Name", meta["name"]), ("Ready", f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}"),
                ("Up-to-date", status.get("updatedReplicas", 0)), ("Available", status.get("availableReplicas", 0)),
                age]
    if plural == "ingresses":
        hosts = ",".join(rule.get("host", "*") for rule in spec.get("rules") or []) or "*"
        addresses = ",".join(i.get("ip") or i.get("hostname", "") for i in
                             (status.get("loadBalancer") or {}).get("ingress") or [])
        return [("Name", meta["name"]), ("Class", spec.get("ingressClassName") or "<none>"), ("Hosts", hosts),
                ("Address", addresses), ("Ports", "80, 443" if spec.get("tls") else "80"), age]
    return [("Name", meta["name"]), age]


INTEGER_COLUMNS = ("Restarts", "Data", "Up-to-date", "Available")


def _partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def table(plural: str, objects: list[dict], resource_version: str, include_object: str = "Metadata") -> dict:
    """A ``meta.k8s.io/v1`` Table, what ``kubectl get`` prints without ``-o``."""
    rows = [{"cells": [cell for _column, cell in _columns(plural, obj)],
             "object": {"Object": obj, "Metadata": _partial(obj)}.get(include_object)} for obj in objects]
    names = [column for column, _cell in _columns(plural, objects[0] if objects else {"metadata": {"name": ""}})]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": [{"name": name, "type": "integer" if name in INTEGER_COLUMNS else "string",
                                   "format": "name" if name == "Name" else "", "description": name,
                                   "priority": 1 if name == "Node" else 0} for name in names],
            "rows": rows}



def _wanted_as(accept: str) -> str:
    """The first of Table / PartialObjectMetadata(List) the client accepts before plain JSON; "" for plain."""
    for media in (accept or "").split(","):
        params = dict(p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p)
        if params.get("as") in ("Table", "PartialObjectMetadata", "PartialObjectMetadataList") and \
                params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return params["as"]
        if media.split(";")[0].strip() in ("application/json", "*/*") and "as" not in params:
            return ""
    return ""


def authorization_attributes(method: str, plural: str, name: str | None, sub: str | None,
                             query: dict) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) of a request, the attributes RBAC rules are written in: GET is
    get (one object), list or watch (``?watch=true``); POST create; PUT update; PATCH patch; DELETE delete (one
    object) or deletecollection."""
    if method == "GET":
        verb = "get" if name else "watch" if query.get("watch") in ("true", "1") else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]
    group = RESOURCES[plural][1].rpartition("/")[0]
    return group, f"{plural}/{sub}" if sub else plural, verb


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: FakeKubernetes

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: dict | str | bytes, content_type="application/json") -> None:
        data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else \
            json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.api.requests.append((method, url.path))
        try:
            body = self._body() if method != "GET" else {}  # read first: keep-alive needs the stream drained
            if (code := self.api._injected_failure(method, url.path)) is not None:
                raise ApiError(code, "InternalError", "injected failure: etcdserver: request timed out")
            path = url.path.rstrip("/") or "/"
            if path == "/version":
                return self._send(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-kubefake",
                                        "gitCommit": "kubefake", "gitTreeState": "clean", "buildDate": _now(),
                                        "goVersion": "go1.22", "compiler": "gc", "platform": "linux/amd64"})
            if method == "GET" and path == "/openapi/v3":
                return self._send(200, openapi.root(RESOURCES))
            if method == "GET" and path.startswith("/openapi/v3/"):
                if (data := openapi.documents(RESOURCES).get(path[len("/openapi/v3/"):])) is None:
                    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
                return self._send(200, data)
            if method == "GET" and (document := discovery(path, "{}:{}".format(*self.server.server_address[:2]))):
                return self._send(200, document)
            match = NAMESPACE_PATH.match(path) or PATH.match(path)
            if match is None or (match.groupdict().get("plural") or "namespaces") not in RESOURCES or \
                    self._wrong_group(match):
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
            parts = match.groupdict()
            plural = parts.get("plural") or "namespaces"
            namespace, name, sub = parts.get("ns"), parts.get("name"), parts.get("sub")
            if sub and sub not in NAMES[plural][3]:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
            if self.api.access is not None:
                self.api.access.append(authorization_attributes(method, plural, name, sub, query))
            if method == "GET":
                return self._get(plural, namespace, name, sub, query)
            if method == "POST" and not name:
                return self._send(201, self.api.create(plural, namespace, body))
            if method == "POST" and sub == "eviction":
                raise ApiError(403, "Forbidden", "evictions are not allowed here")
            if method in ("PATCH", "PUT") and name:
                if method == "PUT":
                    return self._send(200, self.api.update(plural, namespace, name, replace=body,
                                                           validate=sub != "status"))
                if isinstance(body, list):
                    return self._send(200, self.api.update(plural, namespace, name, json_patch=body,
                                                           validate=sub != "status"))
                return self._send(200, self.api.update(plural, namespace, name, patch=body, validate=sub != "status"))
            if method == "DELETE" and name:
                propagation = body.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
                deleted = self.api.delete(plural, namespace, name, propagation)
                return self._send(200, deleted)
            if method == "DELETE":
                deleted = self.api.delete_collection(plural, namespace, query.get("labelSelector", ""),
                                                     query.get("fieldSelector", ""))
                kind, api_version, _ = RESOURCES[plural]
                return self._send(200, {"apiVersion": api_version, "kind": f"{kind}List",
                                        "metadata": {"resourceVersion": str(self.api.rv)}, "items": deleted})
            raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested "
                                                    f"resource ({method} {url.path})")
        except ApiError as exc:
            self._send(exc.code, status_body(exc.code, exc.reason, exc.message, exc.details))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._send(400, status_body(400, "BadRequest", str(exc)))

    @staticmethod
    def _wrong_group(match) -> bool:
        """A known plural under another group or version (``/apis/apps/v1/pods``) is not found either."""
        parts = match.groupdict()
        plural = parts.get("plural") or "namespaces"
        served = f"{parts['group']}/{parts['version']}" if parts.get("group") else "v1"
        return RESOURCES[plural][1] != served

    def _get(self, plural, namespace, name, sub, query):
        if name and sub == "log":
            self.api.get("pods", namespace, name)  # 404 for a pod that is not there
            text = self.api.logs.get((namespace, name), "")
            tail = int(query.get("tailLines", 0) or 0)
            lines = text.splitlines()[-tail:] if tail else text.splitlines()
            return self._send(200, "".join(f"{line}\n" for line in lines), content_type="text/plain")
        wanted = _wanted_as(self.headers.get("Accept", ""))
        if name:
            obj = self.api.get(plural, namespace, name)
            if wanted == "Table":
                return self._send(200, table(plural, [obj], obj["metadata"]["resourceVersion"],
                                             query.get("includeObject", "Metadata")))
            return self._send(200, _partial(obj) if wanted.startswith("PartialObjectMetadata") else obj)
        if query.get("watch") in ("true", "1"):
            return self._watch(plural, namespace, query, wanted)
        items, rv = self.api.list(plural, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        if wanted == "Table":
            return self._send(200, table(plural, items, str(rv), query.get("includeObject", "Metadata")))
        if wanted.startswith("PartialObjectMetadata"):
            return self._send(200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                                    "metadata": {"resourceVersion": str(rv)}, "items": [_partial(o) for o in items]})
        kind, api_version, _ = RESOURCES[plural]
        return self._send(200, {"apiVersion": api_version, "kind": f"{kind}List",
                                "metadata": {"resourceVersion": str(rv)}, "items": items})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, plural, namespace, query, wanted=""):
        label_selector, field_selector = query.get("labelSelector", ""), query.get("fieldSelector", "")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
        since = int(query.get("resourceVersion") or 0)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        api = self.api
        try:
            while True:
                with api.changed:  # collect under the lock, write outside it
                    since = since or api.rv
                    try:
                        events = api.events_since(since)
                        if not events:
                            api.changed.wait(max(0.0, min(deadline - time.monotonic(), 0.5)))
                            events = api.events_since(since)
                    except ApiError as exc:
                        self._chunk((json.dumps({"type": "ERROR", "object": status_body(
                            exc.code, exc.reason, exc.message)}) + "\n").encode())
                        break
                out = []
                for rv, event, kind_plural, data, obj_namespace, labels in events:
                    since = rv
                    if kind_plural != plural or (namespace and obj_namespace != namespace) or \
                            not _match_labels(labels, label_selector):
                        continue
                    if field_selector or wanted:
                        obj = json.loads(data)
                        if not _match_fields(obj, field_selector):
                            continue
                        if wanted == "Table":
                            data = json.dumps(table(plural, [obj], str(rv), query.get("includeObject", "Metadata")))
                        elif wanted.startswith("PartialObjectMetadata"):
                            data = json.dumps(_partial(obj))
                    out.append(f'{{"type": "{event}", "object": {data}}}\n')
                if out:
                    self._chunk("".join(out).encode())
                if time.monotonic() >= deadline:
                    break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PATCH(self):
        self._route("PATCH")

    def do_PUT(self):
        self._route("PUT")

    def do_DELETE(self):
        self._route("DELETE")
