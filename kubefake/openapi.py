"""OpenAPI v3 documents for the fake API server, what ``kubectl create``/``apply`` fetch before they send.

``kubectl create -f`` (1.27 and later) first asks ``/openapi/v3`` whether the API server validates bodies
itself: for the object's group-version it reads the PATCH operation tagged with the object's
``x-kubernetes-group-version-kind`` and looks for a ``fieldValidation`` query parameter. When it finds one it
sends ``?fieldValidation=Strict`` and leaves validation to the server (which this fake does, strictly);
without the documents it falls back to ``/openapi/v2`` and, with neither, refuses to create anything
("failed to download openapi"). So the fake serves a root (``/openapi/v3``) and one document per
group-version: the real operations for each resource it serves (with ``fieldValidation``, ``dryRun``,
``fieldManager``), and the schemas of its kinds, converted from the Kubernetes 1.30 JSON schemas that
``kubernetes-validate`` ships (so ``kubectl explain`` works too).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from functools import lru_cache

from . import validation

_lock = threading.Lock()
_PREFIX = "#/$defs/"


def _definitions() -> dict:
    with _lock:
        return validation._definitions(validation._schema_dir()).contents["$defs"]


def _openapi_schema(node):
    """JSON-schema-isms of kubernetes-json-schema back to OpenAPI: nullable type lists, local refs, strictness."""
    if isinstance(node, list):
        return [_openapi_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    if "oneOf" in node and all(set(option) == {"type"} for option in node["oneOf"]):
        types = {t for option in node["oneOf"] for t in (option["type"] if isinstance(option["type"], list)
                                                          else [option["type"]]) if t != "null"}
        rest = {k: v for k, v in node.items() if k != "oneOf"}
        if types == {"string", "integer"}:  # IntOrString, as real servers describe it
            return {**rest, "type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True}
        return {**rest, "oneOf": [{"type": t} for t in sorted(types, reverse=True)]}  # Quantity
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = "#/components/schemas/" + value.rsplit("/", 1)[-1]
        elif key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            out[key] = kept[0] if len(kept) == 1 else kept
        elif key == "additionalProperties" and value is False:
            continue
        elif key in ("properties", "patternProperties"):
            out[key] = {name: _openapi_schema(schema) for name, schema in value.items()}
        else:
            out[key] = _openapi_schema(value)
    return out


def _refs(node, found: set) -> set:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(_PREFIX):
                found.add(value[len(_PREFIX):])
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _refs(item, found)
    return found


def _closure(names) -> dict:
    definitions = _definitions()
    todo, seen = list(names), {}
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen[name] = definitions[name]
        todo.extend(_refs(definitions[name], set()) - set(seen))
    return {name: _openapi_schema(schema) for name, schema in sorted(seen.items())}


def _definition_of(group: str, version: str, kind: str) -> str | None:
    for name, schema in _definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group", ""), gvk.get("version"), gvk.get("kind")) == (group, version, kind):
                return name
    return None


def _param(name: str, where: str = "query", description: str = "", required: bool = False) -> dict:
    return {"name": name, "in": where, "description": description or name, "required": required,
            "schema": {"type": "string", "uniqueItems": True}}


_WRITE_PARAMS = [
    _param("dryRun", description="When present, indicates that modifications should not be persisted."),
    _param("fieldManager", description="fieldManager is a name associated with the actor or entity that is making "
                                       "these changes."),
    _param("fieldValidation", description="fieldValidation instructs the server on how to handle objects in the "
                                          "request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid "
                                          "values are: Ignore, Warn, Strict."),
]
_LIST_PARAMS = [_param(name) for name in ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector",
                                          "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
                                          "timeoutSeconds", "watch")]


def _operation(action: str, operation_id: str, gvk: dict, response: str | None, *, body: str | None = None,
               params=(), patch: bool = False) -> dict:
    op = {"description": f"{action} {gvk['kind']}", "operationId": operation_id, "parameters": list(params),
          "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
          "tags": [operation_id], "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
    if response:
        schema = {"$ref": f"#/components/schemas/{response}"}
        op["responses"]["200"]["content"] = {"application/json": {"schema": schema}}
    if action == "post":
        op["responses"]["201"] = copy.deepcopy(op["responses"]["200"])
        op["responses"]["201"]["description"] = "Created"
    if body:
        types = ("application/json-patch+json", "application/merge-patch+json",
                 "application/strategic-merge-patch+json") if patch else ("*/*",)
        schema = {"type": "object"} if patch else {"$ref": f"#/components/schemas/{body}"}
        op["requestBody"] = {"content": {t: {"schema": schema} for t in types}, "required": True}
    return op


def group_version_document(group: str, version: str, resources: dict) -> dict:
    """The OpenAPI v3 document of one group-version; ``resources``: plural -> (kind, apiVersion, namespaced)."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    words = "".join(part.capitalize() for part in (group.split(".")[0] if group else "core", version))
    paths, kinds = {}, []
    for plural, (kind, _api_version, namespaced) in sorted(resources.items()):
        gvk = {"group": group, "version": version, "kind": kind}
        definition = _definition_of(group, version, kind)
        list_definition = _definition_of(group, version, f"{kind}List")
        kinds += [d for d in (definition, list_definition) if d]
        scope = "Namespaced" if namespaced else ""
        collection = f"{prefix}/namespaces/{{namespace}}/{plural}" if namespaced else f"{prefix}/{plural}"
        common = [_param("pretty")] + ([_param("namespace", "path", required=True)] if namespaced else [])
        paths[collection] = {
            "get": _operation("list", f"list{words}{scope}{kind}", gvk, list_definition, params=_LIST_PARAMS),
            "post": _operation("post", f"create{words}{scope}{kind}", gvk, definition, body=definition,
                               params=_WRITE_PARAMS),
            "delete": _operation("deletecollection", f"deleteCollection{words}{scope}{kind}", gvk, None,
                                 params=[*_LIST_PARAMS, _WRITE_PARAMS[0]]),
            "parameters": common}
        paths[f"{collection}/{{name}}"] = {
            "get": _operation("get", f"read{words}{scope}{kind}", gvk, definition),
            "put": _operation("put", f"replace{words}{scope}{kind}", gvk, definition, body=definition,
                              params=_WRITE_PARAMS),
            "patch": _operation("patch", f"patch{words}{scope}{kind}", gvk, definition, body=definition,
                                params=[*_WRITE_PARAMS, _param("force")], patch=True),
            "delete": _operation("delete", f"delete{words}{scope}{kind}", gvk, None,
                                 params=[_WRITE_PARAMS[0], _param("gracePeriodSeconds"), _param("propagationPolicy")]),
            "parameters": [*common, _param("name", "path", required=True)]}
        if namespaced:
            paths[f"{prefix}/{plural}"] = {"get": _operation("list", f"list{words}{kind}ForAllNamespaces", gvk,
                                                             list_definition, params=_LIST_PARAMS),
                                           "parameters": [_param("pretty")]}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.30.0"}, "paths": paths,
            "components": {"schemas": _closure(kinds)}}


@lru_cache(maxsize=16)
def _document_bytes(group: str, version: str, resources_json: str) -> bytes:
    return json.dumps(group_version_document(group, version, json.loads(resources_json))).encode()


def documents(resources: dict) -> dict[str, bytes]:
    """``{"api/v1": bytes, "apis/batch/v1": bytes, ...}`` for the resources the server serves."""
    by_group_version: dict[str, dict] = {}
    for plural, (kind, api_version, namespaced) in resources.items():
        by_group_version.setdefault(api_version, {})[plural] = (kind, api_version, namespaced)
    out = {}
    for api_version, members in sorted(by_group_version.items()):
        group, _, version = api_version.rpartition("/")
        key = f"apis/{api_version}" if group else f"api/{version}"
        out[key] = _document_bytes(group, version, json.dumps(members, sort_keys=True))
    return out


def root(resources: dict) -> dict:
    """``/openapi/v3``: where each group-version's document is, with a hash of its content as real servers do."""
    return {"paths": {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash="
                                                 f"{hashlib.sha512(data).hexdigest().upper()}"}
                      for key, data in documents(resources).items()}}
