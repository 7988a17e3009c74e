"""Server-side printing: what ``kubectl get`` shows without ``-o``.

kubectl asks for a ``meta.k8s.io/v1`` Table (an ``Accept`` with ``as=Table``) and prints the rows the server
computed; with ``as=PartialObjectMetadata[List]`` it gets metadata only. The columns follow the real server's
printers for the types kubectl users look at most (pods, jobs, namespaces, nodes, quotas, events, services,
secrets, deployments, ingresses); others get Name and Age. ``kubefake.http`` applies it to gets, lists and
watches alike.
"""

from __future__ import annotations

from datetime import UTC, datetime


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


def partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def table(plural: str, objects: list[dict], resource_version: str, include_object: str = "Metadata") -> dict:
    """A ``meta.k8s.io/v1`` Table, what ``kubectl get`` prints without ``-o``."""
    rows = [{"cells": [cell for _column, cell in _columns(plural, obj)],
             "object": {"Object": obj, "Metadata": partial(obj)}.get(include_object)} for obj in objects]
    names = [column for column, _cell in _columns(plural, objects[0] if objects else {"metadata": {"name": ""}})]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": [{"name": name, "type": "integer" if name in INTEGER_COLUMNS else "string",
                                   "format": "name" if name == "Name" else "", "description": name,
                                   "priority": 1 if name == "Node" else 0} for name in names],
            "rows": rows}



def wanted_as(accept: str) -> str:
    """The first of Table / PartialObjectMetadata(List) the client accepts before plain JSON; "" for plain."""
    for media in (accept or "").split(","):
        params = dict(p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p)
        if params.get("as") in ("Table", "PartialObjectMetadata", "PartialObjectMetadataList") and \
                params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return params["as"]
        if media.split(";")[0].strip() in ("application/json", "*/*") and "as" not in params:
            return ""
    return ""

