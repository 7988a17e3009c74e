"""What tests and benchmarks make happen to the fake cluster, and the reads they check it with.

A real cluster's failures come from kubelets, nodes and etcd; here a test calls an injector instead. Pods
succeed (``succeed``), exit (``exit``), run out of memory (``oom``), fail to pull their image
(``image_pull_error``), get evicted (``evict``), lose their node (``node_not_ready``), hang in NCCL (``run``
keeps them running) or miss their deadline (``deadline_exceeded``); a Deployment's pods become ready
(``ready``), crash-loop (``crash_loop``: CrashLoopBackOff, restartCount, the last state's exit code) or run
without passing their readiness probe (``failing_readiness``, with the kubelet's ``Unhealthy`` event).
``fail_next`` answers the next matching requests with 5xx; ``set_log`` gives a pod its log; ``compact``
(``kubefake.store``) forgets the event history so that old watches get 410. ``Faults`` is one part of
``kubefake.server.FakeKubernetes``.
"""

from __future__ import annotations

import copy


class Faults:
    """Injectors (kubelet, node and API failures) and the pod lists tests read."""

    def _init_faults(self) -> None:
        self.failures: list[list] = []  # [method, path fragment, code, remaining]

    # --- reads --------------------------------------------------------------------------------------------

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

    # --- Deployments (and Jobs) whose containers have readiness probes ------------------------------------

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

    # --- Jobs ---------------------------------------------------------------------------------------------

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

    # --- the API server itself ----------------------------------------------------------------------------

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
