"""The fake API server's storage: its objects, resource versions and watch history, and the verbs on them.

What etcd and the API server's registry do together: objects keyed by (plural, namespace, name), each write
giving them a rising ``resourceVersion`` and recording an event in a bounded history that watches read from
(``events_since``; ``compact`` forgets it, so that an older watch gets 410 Gone). Objects get a uid, a
creationTimestamp and a generation; ``generateName`` makes a name; a namespaced object needs its namespace.
Patches are merges (strategic merge is taken as merge) or RFC 6902 JSON patches.

``Store`` is one part of ``kubefake.server.FakeKubernetes``: around each write it calls hooks the other parts
supply, in the order a real API server runs them —

* ``kubefake.admission``: ``_typed`` and ``_check`` (the body's type and schema), ``_default_new`` and
  ``_default_update`` (defaulting, allocations, quota admission), ``_track_pod`` and ``_track_quota`` (what
  pods and quotas count, on every write);
* ``kubefake.controllers``: ``_created``, ``_updated`` and ``_deleted`` (what the controllers do next),
  ``_track_deployment_pod``, and ``_settle`` when the outermost change ends.

Every change runs under one re-entrant lock (``lock``); ``changed`` wakes the watches.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import threading
import uuid
from collections import deque

from .resources import RESOURCES, ApiError, details, now, qualified
from .selectors import match_fields, match_labels


def merge_patch(target: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def apply_json_patch(target: dict, operations: list) -> dict:
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


class Store:
    """Objects, resource versions, the watch history and the verbs (create, get, list, update, delete)."""

    def _init_store(self, history: int) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 0
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.history: deque = deque(maxlen=history)
        self.compacted_before = 0
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> what the pod's log endpoint serves
        self.deletions: list[tuple[str, str, str, str]] = []  # plural, namespace, name, propagation
        self._suffix = itertools.count(1)  # generated names: <generateName><suffix>
        self._depth = 0  # how deep in nested changes: the outermost one settles

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
            self._track_deployment_pod(obj)
        elif plural == "resourcequotas":
            self._track_quota(event, obj)
        self.changed.notify_all()

    def _key(self, plural, namespace, name):
        return plural, (namespace or "") if RESOURCES[plural][2] else "", name

    def create(self, plural: str, namespace: str | None, body: dict) -> dict:
        _kind, _api_version, namespaced = RESOURCES[plural]
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
                raise ApiError(409, "AlreadyExists", f'{qualified(plural)} "{meta["name"]}" already exists',
                               details(plural, meta["name"]))
            meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": now(), "generation": 1})
            self._default_new(plural, obj)
            self.objects[key] = obj
            self._bump("ADDED", plural, obj)
            self._created(plural, obj)
            return copy.deepcopy(obj)

    def get(self, plural: str, namespace: str | None, name: str) -> dict:
        with self.lock:
            obj = self.objects.get(self._key(plural, namespace, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{qualified(plural)} "{name}" not found', details(plural, name))
            return copy.deepcopy(obj)

    def list(self, plural, namespace=None, label_selector="", field_selector="") -> tuple[list[dict], int]:
        with self.lock:
            items = [copy.deepcopy(o) for (p, ns, _n), o in self.objects.items()
                     if p == plural and (not namespace or ns == namespace)
                     and match_labels(o["metadata"].get("labels", {}), label_selector)
                     and match_fields(o, field_selector)]
            return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])), self.rv

    def update(self, plural, namespace, name, patch: dict | None = None, replace: dict | None = None,
               validate: bool = True, json_patch: list | None = None) -> dict:
        with self._changing():
            key = self._key(plural, namespace, name)
            if key not in self.objects:
                raise ApiError(404, "NotFound", f'{qualified(plural)} "{name}" not found', details(plural, name))
            current = self.objects[key]
            if replace is not None:
                updated = copy.deepcopy(self._typed(plural, replace))
            elif json_patch is not None:
                updated = apply_json_patch(copy.deepcopy(current), json_patch)
            else:
                updated = merge_patch(copy.deepcopy(current), patch or {})
            for field in ("uid", "creationTimestamp", "namespace", "name"):
                updated.setdefault("metadata", {})[field] = current["metadata"].get(field)
            updated.update({"kind": current["kind"], "apiVersion": current["apiVersion"]})
            if validate:
                self._check(updated, name)
            self._default_update(plural, updated, current, status_update=not validate)
            self.objects[key] = updated
            self._bump("MODIFIED", plural, updated)
            self._updated(plural, updated)
            return copy.deepcopy(updated)

    def delete(self, plural, namespace, name, propagation: str = "Background") -> dict:
        with self._changing():
            obj = self.objects.pop(self._key(plural, namespace, name), None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{qualified(plural)} "{name}" not found', details(plural, name))
            self.deletions.append((plural, namespace or "", name, propagation))
            self._bump("DELETED", plural, obj)
            self._deleted(plural, namespace, name, propagation)
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
