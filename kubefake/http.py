"""The fake API server over HTTP: the request handler that turns REST paths into calls on
``kubefake.server.FakeKubernetes``, and ``serve`` that runs it on a thread.

It speaks the REST paths the portal uses (core ``v1``, ``batch/v1``, ``apps/v1``, ``networking.k8s.io/v1``,
``scheduling.k8s.io/v1``): create, get, list with label and field selectors, patch (merge; strategic merge is
taken as merge; JSON patch), replace, delete and deletecollection, status, pod logs, and watch streams with
``timeoutSeconds`` (chunked, one JSON event a line). Lists are ``<Kind>List`` with ``metadata.resourceVersion``,
in namespace/name order; an ``ApiError`` becomes a ``Status`` body (400, 403, 404, 409, 410, 422, 5xx).
``/version``, discovery and OpenAPI v3 (``kubefake.discovery``, ``kubefake.openapi``) and server-side
printing (``kubefake.printing``) are served here for ``kubectl``; kubectl 1.28 and older ask ``/openapi/v2``,
which is not served: they need ``--validate=false``. With ``record_access`` every request to a resource is
recorded as RBAC sees it (``authorization_attributes``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol
from urllib.parse import parse_qs, urlparse

from . import openapi
from .discovery import discovery, version
from .printing import partial, table, wanted_as
from .resources import NAMES, RESOURCES, ApiError, status_body
from .selectors import match_fields, match_labels

PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                  r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$")
NAMESPACE_PATH = re.compile(r"^/api/v1/namespaces(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$")


class ServedApi(Protocol):
    """What the handler uses of the fake it serves (``kubefake.server.FakeKubernetes``)."""

    requests: list[tuple[str, str]]
    access: list[tuple[str, str, str]] | None
    logs: dict[tuple[str, str], str]
    rv: int
    changed: threading.Condition

    def create(self, plural: str, namespace: str | None, body: dict) -> dict: ...
    def get(self, plural: str, namespace: str | None, name: str) -> dict: ...
    def list(self, plural, namespace=None, label_selector="", field_selector="") -> tuple[list[dict], int]: ...
    def update(self, plural, namespace, name, patch: dict | None = None, replace: dict | None = None,
               validate: bool = True, json_patch: list | None = None) -> dict: ...
    def delete(self, plural, namespace, name, propagation: str = "Background") -> dict: ...
    def delete_collection(self, plural, namespace, label_selector="", field_selector="") -> list[dict]: ...
    def events_since(self, rv: int) -> list: ...
    def _injected_failure(self, method, path) -> int | None: ...


def serve(api: ServedApi, host: str, port: int) -> ThreadingHTTPServer:
    """Serve ``api`` on a daemon thread; ``shutdown()`` on the result stops it."""

    server = ThreadingHTTPServer((host, port), type("BoundHandler", (Handler,), {"api": api}))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                     name="kubefake").start()  # a short poll: stop() returns at once
    return server


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


class Handler(BaseHTTPRequestHandler):
    """One connection's requests; ``api`` is the fake it serves (set by ``serve``)."""

    protocol_version = "HTTP/1.1"
    api: ServedApi

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
                return self._send(200, version())
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
        wanted = wanted_as(self.headers.get("Accept", ""))
        if name:
            obj = self.api.get(plural, namespace, name)
            if wanted == "Table":
                return self._send(200, table(plural, [obj], obj["metadata"]["resourceVersion"],
                                             query.get("includeObject", "Metadata")))
            return self._send(200, partial(obj) if wanted.startswith("PartialObjectMetadata") else obj)
        if query.get("watch") in ("true", "1"):
            return self._watch(plural, namespace, query, wanted)
        items, rv = self.api.list(plural, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        if wanted == "Table":
            return self._send(200, table(plural, items, str(rv), query.get("includeObject", "Metadata")))
        if wanted.startswith("PartialObjectMetadata"):
            return self._send(200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                                    "metadata": {"resourceVersion": str(rv)}, "items": [partial(o) for o in items]})
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
                            not match_labels(labels, label_selector):
                        continue
                    if field_selector or wanted:
                        obj = json.loads(data)
                        if not match_fields(obj, field_selector):
                            continue
                        if wanted == "Table":
                            data = json.dumps(table(plural, [obj], str(rv), query.get("includeObject", "Metadata")))
                        elif wanted.startswith("PartialObjectMetadata"):
                            data = json.dumps(partial(obj))
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
