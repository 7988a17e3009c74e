"""What ``kubectl`` asks before it asks for objects: the server's version and legacy API discovery.

``kubectl`` (1.29 and later; ``/usr/bin/kubectl`` dispatches to the one matching the server, 1.30) reads
``/version``, then legacy discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>[/<version>]``), served
as plain ``application/json`` even when the client prefers aggregated discovery: client-go then reads the
legacy documents. The OpenAPI v3 documents it fetches before ``create``/``apply`` are in ``kubefake.openapi``.
Everything here is derived from the one table of served types, ``kubefake.resources``.
"""

from __future__ import annotations

import functools
import re

from .resources import NAMES, RESOURCES, SUBRESOURCE_VERBS, VERBS, now


def version() -> dict:
    """``/version``: the Kubernetes version the fake imitates (1.30), which picks kubectl's version too."""
    return {"major": "1", "minor": "30", "gitVersion": "v1.30.0-kubefake", "gitCommit": "kubefake",
            "gitTreeState": "clean", "buildDate": now(), "goVersion": "go1.22", "compiler": "gc",
            "platform": "linux/amd64"}


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
