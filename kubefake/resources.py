"""The types the fake API server serves and the shape of its errors: what every other part of ``kubefake`` reads.

One table (``RESOURCES``, with ``NAMES`` for discovery) decides which REST paths exist, how objects are keyed
(namespaced or not) and which ``kind``/``apiVersion`` a body must carry; ``ApiError`` is raised anywhere below
the HTTP handler and becomes a ``Status`` body worded like a real server's (``jobs.batch "x" not found``).
"""

from __future__ import annotations

from datetime import UTC, datetime

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


def qualified(plural: str) -> str:
    """``jobs.batch``, ``pods``: how a real API server names a resource in its messages."""
    group = RESOURCES[plural][1].rpartition("/")[0]
    return f"{plural}.{group}" if group else plural


def details(plural: str, name: str) -> dict:
    group = RESOURCES[plural][1].rpartition("/")[0]
    return {"name": name, **({"group": group} if group else {}), "kind": plural}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
