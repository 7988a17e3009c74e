"""A small Kubernetes API server on loopback, for tests and benchmarks driven by the real ``kubernetes`` client.

It speaks the REST paths the portal uses (core ``v1``, ``batch/v1``, ``networking.k8s.io/v1``,
``scheduling.k8s.io/v1``): create, get, list with label and field selectors, patch, replace, delete, status,
pod logs, and watch streams with ``timeoutSeconds``. Objects get a uid, a rising resourceVersion and a
creationTimestamp; errors are ``Status`` bodies (404, 409, 410, 422, 403, 5xx). Every body it receives is
validated against the Kubernetes 1.30 schema in strict mode and refused with 422 like a real API server.

A tiny Job controller creates one pod per completion (indexed when asked), places it on the node its
affinity names and starts it. Injectors make pods succeed, exit, run out of memory, fail to pull their
image, get evicted, lose their node, hang in NCCL, or miss their deadline; ``fail_next`` answers the next
requests with 5xx; ``compact`` forgets the event history so that old watches get 410.
"""

from __future__ import annotations

import base64
import copy
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

from .validation import errors as validation_errors

#: plural -> (kind, apiVersion, namespaced)
RESOURCES = {
    "namespaces": ("Namespace", "v1", False), "nodes": ("Node", "v1", False),
    "pods": ("Pod", "v1", True), "services": ("Service", "v1", True), "events": ("Event", "v1", True),
    "secrets": ("Secret", "v1", True), "resourcequotas": ("ResourceQuota", "v1", True),
    "persistentvolumeclaims": ("PersistentVolumeClaim", "v1", True),
    "jobs": ("Job", "batch/v1", True), "networkpolicies": ("NetworkPolicy", "networking.k8s.io/v1", True),
    "priorityclasses": ("PriorityClass", "scheduling.k8s.io/v1", False),
}
PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                  r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$")
NAMESPACE_PATH = re.compile(r"^/api/v1/namespaces(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


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


class FakeKubernetes:
    """The API server's state, its controller and its injectors. ``start()`` serves it over HTTP."""

    def __init__(self, nodes=(), *, validate: bool = True, start_pods: bool = True, history: int = 100_000):
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
        self.deletions: list[tuple[str, str, str, str]] = []  # plural, namespace, name, propagation
        self.server = None
        self._suffix = itertools.count(1)
        for name in nodes:
            self.add_node(name)

    # --- serving ---------------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        fake = self

        class Handler(_Handler):
            api = fake

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True, name="kubefake").start()
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

    def _bump(self, event: str, plural: str, obj: dict) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, event, plural, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _key(self, plural, namespace, name):
        return plural, (namespace or "") if RESOURCES[plural][2] else "", name

    def create(self, plural: str, namespace: str | None, body: dict) -> dict:
        kind, api_version, namespaced = RESOURCES[plural]
        if self.validate and (problem := validation_errors(body)):
            raise ApiError(422, "Invalid", f'{kind} "{body.get("metadata", {}).get("name", "")}" is invalid: {problem}')
        with self.lock:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if namespaced:
                namespace = namespace or meta.get("namespace") or "default"
                if ("namespaces", "", namespace) not in self.objects:
                    raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
                meta["namespace"] = namespace
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{next(self._suffix):05d}"
            key = self._key(plural, namespace, meta.get("name", ""))
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
            obj.update({"kind": kind, "apiVersion": api_version})
            meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": _now(), "generation": 1})
            if plural == "secrets" and "stringData" in obj:
                obj.setdefault("data", {}).update({k: base64.b64encode(v.encode()).decode()
                                                    for k, v in obj.pop("stringData").items()})
            if plural == "namespaces":
                obj["status"] = {"phase": "Active"}
            if plural == "jobs":
                obj["status"] = {"active": 0}
            self.objects[key] = obj
            self._bump("ADDED", plural, obj)
            if plural == "jobs":
                self._start_job(obj)
            return copy.deepcopy(obj)

    def get(self, plural: str, namespace: str | None, name: str) -> dict:
        with self.lock:
            obj = self.objects.get(self._key(plural, namespace, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            return copy.deepcopy(obj)

    def list(self, plural, namespace=None, label_selector="", field_selector="") -> tuple[list[dict], int]:
        with self.lock:
            items = [copy.deepcopy(o) for (p, ns, _n), o in self.objects.items()
                     if p == plural and (not namespace or ns == namespace)
                     and _match_labels(o["metadata"].get("labels", {}), label_selector)
                     and _match_fields(o, field_selector)]
            return sorted(items, key=lambda o: int(o["metadata"]["resourceVersion"])), self.rv

    def update(self, plural, namespace, name, patch: dict | None = None, replace: dict | None = None,
               validate: bool = True) -> dict:
        with self.lock:
            key = self._key(plural, namespace, name)
            if key not in self.objects:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            current = self.objects[key]
            updated = copy.deepcopy(replace) if replace is not None else _merge(copy.deepcopy(current), patch or {})
            for field in ("uid", "creationTimestamp", "namespace", "name"):
                updated.setdefault("metadata", {})[field] = current["metadata"].get(field)
            updated.update({"kind": current["kind"], "apiVersion": current["apiVersion"]})
            if validate and self.validate and (problem := validation_errors(updated)):
                raise ApiError(422, "Invalid", f'{current["kind"]} "{name}" is invalid: {problem}')
            self.objects[key] = updated
            self._bump("MODIFIED", plural, updated)
            return copy.deepcopy(updated)

    def delete(self, plural, namespace, name, propagation: str = "Background") -> dict:
        with self.lock:
            obj = self.objects.pop(self._key(plural, namespace, name), None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            self.deletions.append((plural, namespace or "", name, propagation))
            self._bump("DELETED", plural, obj)
            if plural == "jobs":
                for pod in self._pods_of(namespace, name):
                    self.delete("pods", namespace, pod["metadata"]["name"])
            return copy.deepcopy(obj)

    def events_since(self, rv: int):
        """Events after ``rv`` (newest last), read from the end of the history: O(new events)."""
        if rv and rv < self.compacted_before:
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

    # --- nodes and the job controller -------------------------------------------------------------------

    def add_node(self, name: str, gpus: int = 8) -> None:
        with self.lock:
            node = {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                "labels": {"kubernetes.io/hostname": name}},
                "spec": {}, "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                       "message": "kubelet is posting ready status"}]}}
            self.objects[("nodes", "", name)] = node
            self._bump("ADDED", "nodes", node)

    def _pods_of(self, namespace, job_name) -> list[dict]:
        return [o for (p, ns, _n), o in self.objects.items()
                if p == "pods" and ns == namespace and o["metadata"].get("labels", {}).get("job-name") == job_name]

    def _start_job(self, job: dict) -> None:
        spec, meta = job["spec"], job["metadata"]
        template = spec["template"]
        hosts = []
        for term in (template["spec"].get("affinity", {}).get("nodeAffinity", {})
                     .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])):
            for expression in term.get("matchExpressions", []):
                if expression["key"] == "kubernetes.io/hostname":
                    hosts.extend(expression["values"])
        indexed = spec.get("completionMode") == "Indexed"
        for index in range(spec.get("parallelism", 1)):
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
            self.objects[("pods", meta["namespace"], pod_meta["name"])] = pod
            self._bump("ADDED", "pods", pod)
            if self.start_pods:
                self._set_container(pod, running=True)
        job["status"] = {"active": spec.get("parallelism", 1), "startTime": _now()}
        self._bump("MODIFIED", "jobs", job)

    def _set_container(self, pod: dict, *, running=False, waiting=None, terminated=None, phase=None,
                       reason=None, message=None) -> None:
        name = pod["spec"]["containers"][0]["name"]
        state = ({"running": {"startedAt": _now()}} if running else
                 {"waiting": waiting} if waiting else {"terminated": {"startedAt": _now(), "finishedAt": _now(),
                                                                       **terminated}})
        status = pod["status"]
        status["phase"] = phase or ("Running" if running else "Pending" if waiting else
                                    ("Succeeded" if terminated.get("exitCode") == 0 else "Failed"))
        status["containerStatuses"] = [{"name": name, "image": pod["spec"]["containers"][0]["image"],
                                        "imageID": "", "ready": bool(running), "restartCount": 0, "state": state}]
        status["startTime"] = status.get("startTime") or _now()
        for field, value in (("reason", reason), ("message", message)):
            if value:
                status[field] = value
            else:
                status.pop(field, None)
        self._bump("MODIFIED", "pods", pod)

    # --- injectors (what tests and benchmarks make happen) -----------------------------------------------

    def pods(self, namespace: str, job_name: str) -> list[dict]:
        with self.lock:
            return sorted(self._pods_of(namespace, job_name), key=lambda p: p["metadata"]["name"])

    def _job_done(self, namespace, job_name, failed_reason=None, message=""):
        job = self.objects.get(("jobs", namespace, job_name))
        if job is None:
            return
        pods = self._pods_of(namespace, job_name)
        condition = ({"type": "Failed", "status": "True", "reason": failed_reason, "message": message}
                     if failed_reason else {"type": "Complete", "status": "True"})
        job["status"] = {"active": 0, "succeeded": sum(p["status"]["phase"] == "Succeeded" for p in pods),
                         "failed": sum(p["status"]["phase"] == "Failed" for p in pods),
                         "conditions": [{**condition, "lastProbeTime": _now(), "lastTransitionTime": _now()}]}
        self._bump("MODIFIED", "jobs", job)

    def run(self, namespace, job_name) -> None:
        with self.lock:
            for pod in self._pods_of(namespace, job_name):
                self._set_container(pod, running=True)

    def succeed(self, namespace, job_name) -> None:
        with self.lock:
            for pod in self._pods_of(namespace, job_name):
                self._set_container(pod, terminated={"exitCode": 0, "reason": "Completed"})
            self._job_done(namespace, job_name)

    def exit(self, namespace, job_name, code=1, index=0, reason="Error", log="", others=None) -> None:
        """Pod ``index`` ends with ``code``; the others end too (``others`` None: they keep running)."""
        with self.lock:
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
        with self.lock:
            for pod in self._pods_of(namespace, job_name):
                image = pod["spec"]["containers"][0]["image"]
                self._set_container(pod, waiting={"reason": reason, "message": f'failed to pull image "{image}": '
                                                                              "manifest unknown"})

    def evict(self, namespace, job_name, index=0) -> None:
        with self.lock:
            pod = self.pods(namespace, job_name)[index]
            self._set_container(self.objects[("pods", namespace, pod["metadata"]["name"])],
                                terminated={"exitCode": 137, "reason": "Error"}, phase="Failed", reason="Evicted",
                                message="The node was low on resource: memory.")

    def node_not_ready(self, node: str) -> None:
        """The node stops reporting: NotReady, and its pods fail as NodeLost."""
        with self.lock:
            node_obj = self.objects[("nodes", "", node)]
            node_obj["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                                 "message": "Kubelet stopped posting node status."}]
            self._bump("MODIFIED", "nodes", node_obj)
            for (plural, _ns, _name), pod in list(self.objects.items()):
                if plural == "pods" and pod["spec"].get("nodeName") == node and pod["status"]["phase"] == "Running":
                    self._set_container(pod, terminated={"exitCode": 255, "reason": "Unknown"}, phase="Failed",
                                        reason="NodeLost", message=f"Node {node} which was running pod is unresponsive")

    def deadline_exceeded(self, namespace, job_name) -> None:
        with self.lock:
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: FakeKubernetes

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: dict | str, content_type="application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
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
            if url.path.rstrip("/") == "/version":
                return self._send(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-kubefake",
                                        "gitCommit": "kubefake", "gitTreeState": "clean", "buildDate": _now(),
                                        "goVersion": "go1.22", "compiler": "gc", "platform": "linux/amd64"})
            match = NAMESPACE_PATH.match(url.path) or PATH.match(url.path)
            if match is None or (match.groupdict().get("plural") or "namespaces") not in RESOURCES:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
            parts = match.groupdict()
            plural = parts.get("plural") or "namespaces"
            namespace, name, sub = parts.get("ns"), parts.get("name"), parts.get("sub")
            if method == "GET":
                return self._get(plural, namespace, name, sub, query)
            if method == "POST":
                if plural == "pods" and name and sub == "eviction":
                    raise ApiError(403, "Forbidden", "evictions are not allowed here")
                return self._send(201, self.api.create(plural, namespace, body))
            if method in ("PATCH", "PUT"):
                if method == "PUT":
                    return self._send(200, self.api.update(plural, namespace, name, replace=body))
                return self._send(200, self.api.update(plural, namespace, name, patch=body, validate=sub != "status"))
            if method == "DELETE":
                propagation = body.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
                deleted = self.api.delete(plural, namespace, name, propagation)
                return self._send(200, deleted)
            raise ApiError(405, "MethodNotAllowed", method)
        except ApiError as exc:
            self._send(exc.code, status_body(exc.code, exc.reason, exc.message))
        except (ValueError, KeyError) as exc:
            self._send(400, status_body(400, "BadRequest", str(exc)))

    def _get(self, plural, namespace, name, sub, query):
        if name and sub == "log":
            text = self.api.logs.get((namespace, name), "")
            tail = int(query.get("tailLines", 0) or 0)
            lines = text.splitlines()[-tail:] if tail else text.splitlines()
            return self._send(200, "\n".join(lines), content_type="text/plain")
        if name:
            return self._send(200, self.api.get(plural, namespace, name))
        if query.get("watch") in ("true", "1"):
            return self._watch(plural, namespace, query)
        items, rv = self.api.list(plural, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        kind, api_version, _ = RESOURCES[plural]
        return self._send(200, {"apiVersion": api_version, "kind": f"{kind}List",
                                "metadata": {"resourceVersion": str(rv)}, "items": items})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, plural, namespace, query):
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
                for rv, event, kind_plural, obj in events:
                    since = rv
                    if (kind_plural == plural and (not namespace or obj["metadata"].get("namespace") == namespace)
                            and _match_labels(obj["metadata"].get("labels", {}), label_selector)
                            and _match_fields(obj, field_selector)):
                        out.append(json.dumps({"type": event, "object": obj}) + "\n")
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
