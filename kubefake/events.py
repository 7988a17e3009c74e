"""Kubernetes Events about objects, recorded as client-go's event recorder records them.

The controllers (a Job or Deployment refused a pod: ``FailedCreate``) and the kubelet's injected failures
(``BackOff``, ``Unhealthy``) report through ``record_event``; the portal reads these events to explain what
happened, so their names, counting and aggregation follow client-go rather than something simpler.
``EventRecorder`` is one part of ``kubefake.server.FakeKubernetes``.
"""

from __future__ import annotations

import copy
import time
import uuid

from .resources import now as _now


class EventRecorder:
    """``record_event``: one core/v1 Event per distinct message, counted and aggregated as client-go does."""

    def _init_events(self) -> None:
        self._event_names: dict[tuple, str] = {}  # identity of an event -> the name it was stored under
        self._similar_events: dict[tuple, set[str]] = {}  # (namespace, uid, type, reason, component) -> messages

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
