"""Why a job failed on Kubernetes: one category, a plain sentence, the evidence and what to do next.

Pure: pod states, the Job's conditions, the nodes that are not ready, a fault the node agent reported and
the log tails go in; a ``Diagnosis`` comes out. Rules in order (the first that matches wins): deadline →
image / environment → node fault → GPU fault (the node agent's, or an Xid in the log) → out of memory →
cross-node communication → program exit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.utils.translation import gettext as _

IMAGE_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "ErrImageNeverPull")
MISSING_CUDA = re.compile(r"libcudart\.so|libcuda\.so|libnccl\.so|libcudnn|CUDA driver version is insufficient|"
                          r"no CUDA-capable device|cannot open shared object file", re.I)
GPU_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation",
                     re.I)
#: The driver's word that the GPU itself failed (an Xid, a GPU lost from the bus, an uncorrectable ECC error).
GPU_HARDWARE = re.compile(r"NVRM: Xid|\bXid \d+|GPU has fallen off the bus|uncorrectable ECC error", re.I)
COMMUNICATION = re.compile(r"NCCL (WARN|ERROR)|ncclSystemError|ncclInternalError|ncclRemoteError|"
                           r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timeout|Timeout)|"
                           r"Gloo.*(timeout|Connection closed)|Connection reset by peer|NET/IB.*(error|failed)", re.I)


@dataclass(frozen=True)
class PodState:
    name: str
    node: str = ""
    phase: str = "Pending"
    reason: str = ""  # pod-level: Evicted, NodeLost, DeadlineExceeded
    message: str = ""
    index: int = 0
    running: bool = False
    waiting_reason: str = ""
    waiting_message: str = ""
    exit_code: int | None = None
    terminated_reason: str = ""
    # what a long-running container (a notebook, a service replica) shows while it runs
    ready: bool = False
    restarts: int = 0
    last_exit_code: int | None = None
    last_reason: str = ""
    not_ready_message: str = ""  # the pod's Ready condition when False

    @classmethod
    def from_pod(cls, pod: dict) -> PodState:
        meta, status = pod.get("metadata", {}), pod.get("status", {}) or {}
        index = (meta.get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", "0")
        state, container = {}, {}
        for container in status.get("containerStatuses") or []:
            state = container.get("state") or {}
            break
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        last = (container.get("lastState") or {}).get("terminated") or {}
        ready_condition = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        return cls(name=meta.get("name", ""), node=(pod.get("spec") or {}).get("nodeName", "") or "",
                   phase=status.get("phase", "Pending"), reason=status.get("reason", "") or "",
                   message=status.get("message", "") or "", index=int(index or 0), running="running" in state,
                   waiting_reason=waiting.get("reason", "") or "", waiting_message=waiting.get("message", "") or "",
                   exit_code=terminated.get("exitCode"), terminated_reason=terminated.get("reason", "") or "",
                   ready=bool(container.get("ready")) and ready_condition.get("status", "True") == "True",
                   restarts=int(container.get("restartCount") or 0), last_exit_code=last.get("exitCode"),
                   last_reason=last.get("reason", "") or "",
                   not_ready_message=(ready_condition.get("message") or "")
                   if ready_condition.get("status") == "False" else "")


@dataclass
class Diagnosis:
    category: str
    message: str
    advice: str
    node: str = ""
    exit_code: int | None = None
    evidence: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"category": self.category, "message": self.message, "advice": self.advice, "node": self.node,
                "exit_code": self.exit_code, "evidence": self.evidence}


def _tail(logs: dict[str, str], pod: str, lines: int = 50) -> list[str]:
    return (logs.get(pod) or "").splitlines()[-lines:]


def _grep(logs: dict[str, str], pattern: re.Pattern) -> tuple[str, str] | None:
    for pod, text in logs.items():
        for line in (text or "").splitlines():
            if pattern.search(line):
                return pod, line.strip()
    return None


def diagnose(pods: list[PodState], *, node_count: int = 1, conditions: list[dict] | None = None,
             not_ready_nodes: set[str] | frozenset = frozenset(), agent_fault: dict | None = None,
             logs: dict[str, str] | None = None) -> Diagnosis | None:
    """The failure of a job from what Kubernetes and the node agents say, or None if it has not failed."""
    logs = logs or {}
    conditions = conditions or []
    failed_condition = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") == "True"), None)
    failed = [p for p in pods if p.phase == "Failed"]
    image = [p for p in pods if p.waiting_reason in IMAGE_REASONS]
    if not (failed or image or failed_condition):
        return None
    if failed_condition and failed_condition.get("reason") == "DeadlineExceeded":
        return Diagnosis("timeout", _("The job ran longer than its max runtime and was stopped."),
                         _("Ask for a longer max runtime, or save checkpoints and resume in a new job."),
                         evidence={"condition": failed_condition})
    if image:
        pod = image[0]
        return Diagnosis("image", _("The image could not be started (%(reason)s): %(msg)s") % {
            "reason": pod.waiting_reason, "msg": pod.waiting_message}, _(
            "Check the image name and tag, that the registry is reachable from the cluster, and its pull secret."),
            node=pod.node, evidence={"pod": pod.name, "reason": pod.waiting_reason, "message": pod.waiting_message})
    cuda = _grep(logs, MISSING_CUDA)
    if cuda:
        return Diagnosis("image", _("The environment lacks CUDA libraries: %(line)s") % {"line": cuda[1]}, _(
            "Use an image built for this CUDA version (e.g. a -cuda12 tag) or install the libraries it names."),
            evidence={"pod": cuda[0], "log_line": cuda[1], "log_tail": _tail(logs, cuda[0])})
    lost = [p for p in failed if p.reason in ("Evicted", "NodeLost", "Preempting") or p.node in not_ready_nodes]
    if lost:
        pod = lost[0]
        why = pod.message or (_("node %(n)s is not ready") % {"n": pod.node})
        text = _("Node %(node)s failed under the job: %(why)s") % {"node": pod.node, "why": why}
        return Diagnosis("node_fault", text,
                         _("Nothing to fix in the job: it is retried automatically on another node."), node=pod.node,
                         evidence={"pod": pod.name, "reason": pod.reason or "NotReady", "message": pod.message,
                                   "node_not_ready": pod.node in not_ready_nodes})
    if agent_fault and agent_fault.get("category") == "gpu_fault":
        return Diagnosis("gpu_fault", _("GPU fault on %(node)s: %(msg)s") % {
            "node": agent_fault.get("node", ""), "msg": agent_fault.get("message", "")},
            _("Nothing to fix in the job: it is retried automatically without that node."),
            node=agent_fault.get("node", ""), evidence={"agent": agent_fault})
    xid = _grep(logs, GPU_HARDWARE)
    if xid:
        pod = next((p for p in pods if p.name == xid[0]), None)
        return Diagnosis("gpu_fault", _("The GPU failed under the job: %(line)s") % {"line": xid[1]},
                         _("Nothing to fix in the job: it is retried automatically without that node."),
                         node=pod.node if pod else "",
                         evidence={"pod": xid[0], "log_line": xid[1], "log_tail": _tail(logs, xid[0])})
    oom = [p for p in failed if p.terminated_reason == "OOMKilled"]
    if oom:
        pod = oom[0]
        return Diagnosis("out_of_memory", _("The container ran out of memory and was killed (OOMKilled, exit 137)."),
                         _("Ask for more memory per node, or reduce the data loader workers and batch size."),
                         node=pod.node, exit_code=137,
                         evidence={"pod": pod.name, "reason": "OOMKilled", "log_tail": _tail(logs, pod.name)})
    gpu_oom = _grep(logs, GPU_OOM)
    if gpu_oom:
        pod = next((p for p in failed if p.name == gpu_oom[0]), failed[0] if failed else None)
        return Diagnosis("out_of_memory", _("The GPU ran out of memory: %(line)s") % {"line": gpu_oom[1]},
                         _("Reduce the batch size, use gradient checkpointing or mixed precision, or a GPU with "
                           "more memory."), node=pod.node if pod else "", exit_code=pod.exit_code if pod else None,
                         evidence={"pod": gpu_oom[0], "log_line": gpu_oom[1], "log_tail": _tail(logs, gpu_oom[0])})
    if node_count > 1:
        comm = _grep(logs, COMMUNICATION)
        hanging = [p for p in pods if p.running]
        if comm or (failed and hanging):
            pod = failed[0] if failed else pods[0]
            line = comm[1] if comm else _("rank %(r)d failed while %(n)d other rank(s) kept waiting for it") % {
                "r": pod.index, "n": len(hanging)}
            return Diagnosis("communication", _("Cross-node communication failed: %(line)s") % {"line": line}, _(
                "Usually the network between nodes: the job is retried on other nodes. If it repeats, check "
                "NCCL_SOCKET_IFNAME / NCCL_IB_HCA and the rendezvous settings."), node=pod.node,
                evidence={"failed_rank": pod.index, "hanging_ranks": [p.index for p in hanging],
                          "log_line": comm[1] if comm else "",
                          "log_tail": _tail(logs, comm[0] if comm else pod.name)})
    pod = failed[0] if failed else None
    code = pod.exit_code if pod else None
    return Diagnosis("exit_code", _("The program exited with code %(code)s.") % {"code": code}, _(
        "Read the last lines of its log below; fix the program and submit again."),
        node=pod.node if pod else "", exit_code=code,
        evidence={"pod": pod.name if pod else "", "reason": pod.terminated_reason if pod else "",
                  "log_tail": _tail(logs, pod.name) if pod else [],
                  "condition": failed_condition or {}})


def live_problem(pods: list[PodState], *, health: str = "") -> tuple[str, dict]:
    """Why a running notebook or service replica is not ready, in a sentence, and the evidence: a crash loop
    (the container keeps exiting and Kubernetes keeps restarting it: its last exit code and reason, how often),
    an image that does not come, a container that runs but fails its readiness check (``health``: path:port),
    or one that has not started yet. ("", {}) when there is nothing to say."""
    crashing = [p for p in pods if p.waiting_reason == "CrashLoopBackOff"
                or (p.restarts and not p.running and p.last_exit_code is not None)]
    if crashing:
        pod = crashing[0]
        return _("The container keeps crashing (%(reason)s): it last exited with code %(code)s (%(last)s) and was "
                 "restarted %(n)d time(s).") % {"reason": pod.waiting_reason or "CrashLoopBackOff",
                                                "code": pod.last_exit_code, "last": pod.last_reason or "Error",
                                                "n": pod.restarts}, {
            "pod": pod.name, "node": pod.node, "reason": pod.waiting_reason, "message": pod.waiting_message,
            "exit_code": pod.last_exit_code, "last_reason": pod.last_reason, "restarts": pod.restarts,
            "advice": _("Read the last lines of its log; fix the program or its settings and roll out again.")}
    image = [p for p in pods if p.waiting_reason in IMAGE_REASONS]
    if image:
        pod = image[0]
        return _("The image could not be started (%(reason)s): %(msg)s") % {
            "reason": pod.waiting_reason, "msg": pod.waiting_message}, {
            "pod": pod.name, "node": pod.node, "reason": pod.waiting_reason, "message": pod.waiting_message}
    running = [p for p in pods if p.running and not p.ready]
    if running:
        pod = running[0]
        return _("The container runs but does not pass its readiness check (%(check)s).") % {
            "check": health or "?"}, {
            "pod": pod.name, "node": pod.node, "check": health, "condition": pod.not_ready_message,
            "restarts": pod.restarts,
            "advice": _("A server still loading passes once it is up; if it never does, check that it listens on "
                        "the service's port and answers the health path with 200.")}
    pod = pods[0] if pods else None
    if pod is None or pod.phase in ("Succeeded", "Failed"):
        return "", {}
    return _("The container has not started yet (%(phase)s).") % {"phase": pod.waiting_reason or pod.phase}, {
        "pod": pod.name, "node": pod.node, "phase": pod.phase, "reason": pod.waiting_reason}
