"""A small Kubernetes API server on loopback, for tests and benchmarks driven by the real ``kubernetes`` client
and by ``kubectl``: ``FakeKubernetes(nodes=[...]).start()`` returns its URL.

Objects get a uid, a rising resourceVersion and a creationTimestamp; every body is validated against the
Kubernetes 1.30 schema in strict mode and refused with 422 like a real API server; ResourceQuota is enforced on
pod creation as the real quota admission does; tiny Job and Deployment controllers and a kubelet stand-in make
pods; injectors make them fail. ``FakeKubernetes`` is put together from one part per concern, each in its own
module, which say what they do in detail:

* ``kubefake.store`` — objects, resource versions, the watch history and the verbs on them;
* ``kubefake.admission`` — typing, schema validation (``kubefake.validation``), defaulting and ResourceQuota
  admission with the quota controller's bookkeeping (rules in ``kubefake.quota``);
* ``kubefake.controllers`` — the Job and Deployment controllers, garbage collection, the kubelet's reports;
* ``kubefake.events`` — Events recorded as client-go records them;
* ``kubefake.faults`` — what tests make happen (pods that fail, nodes lost, 5xx) and the pod lists they read;
* ``kubefake.http`` — the REST handler and watch streams, with ``kubefake.discovery``, ``kubefake.openapi`` and
  ``kubefake.printing`` for what ``kubectl`` asks besides the objects;
* ``kubefake.resources`` and ``kubefake.selectors`` — the served types, errors and selectors all of them read.

All state lives on the one object and changes under its one lock, so the parts call one another through
``self``; the store calls the others' hooks in the order a real API server runs them.
"""

from __future__ import annotations

from .admission import Admission
from .controllers import Controllers
from .events import EventRecorder
from .faults import Faults
from .http import serve
from .store import Store


class FakeKubernetes(Faults, Controllers, EventRecorder, Admission, Store):
    """The API server's state, its controllers and its injectors. ``start()`` serves it over HTTP."""

    def __init__(self, nodes=(), *, validate: bool = True, start_pods: bool = True, history: int = 100_000,
                 record_access: bool = False):
        self._init_store(history)
        self._init_admission(validate)
        self._init_controllers(start_pods)
        self._init_events()
        self._init_faults()
        self.requests: list[tuple[str, str]] = []
        # Opt-in (record_access=True): (API group, resource[/subresource], verb) of every request to a resource,
        # as a real API server's authorizer sees it — what an RBAC rule must allow (tests/deploy/test_rbac.py).
        self.access: list[tuple[str, str, str]] | None = [] if record_access else None
        self.server = None
        for name in nodes:
            self.add_node(name)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self.server = serve(self, host, port)
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
