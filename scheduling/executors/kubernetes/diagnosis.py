"""Why a job failed on Kubernetes: one category, a plain sentence, the evidence and what to do next.

Pure: pod states, the Job's conditions, the nodes that are not ready, a fault the node agent reported and
the log tails go in; a ``Diagnosis`` comes out. Rules in order (the first that matches wins): deadline →
image / environment → node fault (a lost node, or the node agent's) → device fault (the node agent's, or the
driver's word in the log) → out of memory → cross-node communication → what the program's last lines say
(``signatures``: the decisive line quoted as evidence) → its exit code, only when no line is recognised.

Sentences are stored as phrases (``gpuportal.text.phrases``): English now, read later in each reader's language.

Every vendor's words (``Vendor.words`` of its record in ``fleet/vendors.py``) are read, whatever the job asked
for: the device faults (NVIDIA Xid, AMD/Hygon RAS events and HSA hardware exceptions, Ascend alarm codes and
ACL device errors, Cambricon ECC and hang errors), device out-of-memory (CUDA, HIP, Ascend ``EL0004`` / ACL
207001, Cambricon CNRT) and collective failures (NCCL, RCCL, HCCL, CNCL). The line that matched says which
vendor it was (``vendor`` breaks the tie for HIP, which AMD and Hygon share, and for a failure with no telling
line); the advice names that vendor's tool (``amd-smi``, ``npu-smi``, ``cnmon``, ``hy-smi``) and collective
library. The default vendor's (NVIDIA's) sentences are the ones the portal always had.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, override

from fleet import vendors
from fleet.vendors import DEFAULT_VENDOR
from gpuportal.text.phrases import Phrase
from scheduling.executors import signatures

IMAGE_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "ErrImageNeverPull")


def _table(words: str) -> list[tuple[str, re.Pattern]]:
    """(vendor, pattern) for one kind of failure words (a ``fleet.vendors.LogWords`` field) of every vendor but
    the default, in the registry's reading order; a pattern two vendors share is read once, as the first one's
    (``_vendor`` breaks the tie). The default's words are the generic ones: read last (``_with_default``), or on
    their own where its sentence is the portal's first one (a missing CUDA library)."""
    table, seen = [], set()
    for record in vendors.reading_order()[:-1]:
        pattern = getattr(record.words, words)
        if pattern is not None and id(pattern) not in seen:
            seen.add(id(pattern))
            table.append((record.name, pattern))
    return table


def _with_default(words: str) -> list[tuple[str, re.Pattern]]:
    """``_table`` and the default vendor's words after every other's."""
    default = vendors.default_vendor()
    pattern = getattr(default.words, words)
    return [*_table(words), *([(default.name, pattern)] if pattern is not None else [])]


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
    vendor: str = ""  # of the devices it asked for, as dispatch told its container (GPUPORTAL_ACCELERATOR_VENDOR)

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
        main = next(iter((pod.get("spec") or {}).get("containers") or []), {})
        vendor = next((e.get("value") or "" for e in main.get("env") or []
                       if e.get("name") == "GPUPORTAL_ACCELERATOR_VENDOR"), "")
        return cls(name=meta.get("name", ""), node=(pod.get("spec") or {}).get("nodeName", "") or "",
                   phase=status.get("phase", "Pending"), reason=status.get("reason", "") or "",
                   message=status.get("message", "") or "", index=int(index or 0), running="running" in state,
                   waiting_reason=waiting.get("reason", "") or "", waiting_message=waiting.get("message", "") or "",
                   exit_code=terminated.get("exitCode"), terminated_reason=terminated.get("reason", "") or "",
                   ready=bool(container.get("ready")) and ready_condition.get("status", "True") == "True",
                   restarts=int(container.get("restartCount") or 0), last_exit_code=last.get("exitCode"),
                   last_reason=last.get("reason", "") or "",
                   not_ready_message=(ready_condition.get("message") or "")
                   if ready_condition.get("status") == "False" else "", vendor=vendor)


@dataclass
class Diagnosis:
    category: str
    message: str
    advice: str
    node: str = ""
    exit_code: int | None = None
    evidence: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The diagnosis as stored with the job and its event. ``message`` and ``advice`` are their English text
        (a ``Phrase`` until stored); ``phrases`` keeps their message ids and parameters, from which a page reads
        them in its reader's language (``scheduling.executors.failures``)."""
        return {"category": self.category, "message": self.message, "advice": self.advice, "node": self.node,
                "exit_code": self.exit_code, "evidence": self.evidence,
                "phrases": {name: text.stored() for name, text in (("message", self.message), ("advice", self.advice))
                            if isinstance(text, Phrase)}}


def _tail(logs: dict[str, str], pod: str, lines: int = 50) -> list[str]:
    return (logs.get(pod) or "").splitlines()[-lines:]


def _grep(logs: dict[str, str], pattern: re.Pattern) -> tuple[str, str] | None:
    for pod, text in logs.items():
        for line in (text or "").splitlines():
            if pattern.search(line):
                return pod, line.strip()
    return None


def _grep_vendor(logs: dict[str, str], table, vendor: str = "") -> tuple[str, str, str] | None:
    """(vendor, pod, line) of the first log line any of ``table``'s patterns matches (a line matching several:
    the first pattern's vendor). HIP is AMD's unless ``vendor`` says Hygon; NVIDIA's generic words (a
    ``Connection reset by peer``, an ``OutOfMemoryError``) are the job's vendor's when ``vendor`` names one."""
    for pod, text in logs.items():
        for line in (text or "").splitlines():
            for found, pattern in table:
                if pattern.search(line):
                    return _vendor(found, vendor), pod, line.strip()
    return None


def _vendor(found: str, vendor: str) -> str:
    """Whose line it is: the job's vendor's when the line is the default's generic words, or words the job's
    vendor shares with the one whose they are (Hygon's HIP lines read as AMD's); else the vendor it names."""
    own = vendors.VENDORS.get(vendor)
    if own is None or found == vendor:
        return found
    if found == DEFAULT_VENDOR or vendors.VENDORS[found].words is own.words:
        return vendor
    return found


def _fault_vendor(agent_fault: dict, vendor: str) -> str:
    """The vendor of an agent's fault: as the agent said, else as its message reads, else the job's."""
    if agent_fault.get("vendor") in vendors.VENDORS:
        return agent_fault["vendor"]
    text = f"{agent_fault.get('message', '')} {agent_fault.get('evidence', '')}"
    for found, pattern in _table("device_fault"):
        if pattern.search(text):
            return _vendor(found, vendor)
    return vendors.vendor_or_default(vendor).name


def diagnose(pods: list[PodState], *, node_count: int = 1, conditions: list[dict] | None = None,
             not_ready_nodes: set[str] | frozenset = frozenset(), agent_fault: dict | None = None,
             logs: dict[str, str] | None = None, vendor: str = "") -> Diagnosis | None:
    """The failure of a job from what Kubernetes and the node agents say, or None if it has not failed.
    ``vendor``: the vendor of the devices the job ran on, when the caller knows it; else as its pods say."""
    logs = logs or {}
    vendor = vendor or next((p.vendor for p in pods if p.vendor), "")
    conditions = conditions or []
    failed_condition = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") == "True"), None)
    failed = [p for p in pods if p.phase == "Failed"]
    image = [p for p in pods if p.waiting_reason in IMAGE_REASONS]
    if not (failed or image or failed_condition):
        return None
    if failed_condition and failed_condition.get("reason") == "DeadlineExceeded":
        return Diagnosis("timeout", _p(gettext_noop("The job ran longer than its max runtime and was stopped.")),
                         _p(gettext_noop("Ask for a longer max runtime, or save checkpoints and resume in a new job.")),
                         evidence={"condition": failed_condition})
    if image:
        pod = image[0]
        return Diagnosis("image", _p(gettext_noop("The image could not be started (%(reason)s): %(msg)s"),
                                     reason=pod.waiting_reason, msg=pod.waiting_message), _p(gettext_noop(
            "Check the image name and tag, that the registry is reachable from the cluster, and its pull secret.")),
            node=pod.node, evidence={"pod": pod.name, "reason": pod.waiting_reason, "message": pod.waiting_message})
    missing = _grep_vendor(logs, _table("missing_libraries"), vendor)
    if missing:
        found, pod_name, line = missing
        record = vendors.vendor(found)
        return Diagnosis("image", _p(gettext_noop("The environment lacks the %(stack)s libraries of the %(device)s: "
                                                  "%(line)s"), stack=record.stack, device=_device(found), line=line),
                         _p(gettext_noop("Use an image built for the %(stack)s version of these nodes or install the "
                                         "libraries it names."), stack=record.stack),
                         evidence={"pod": pod_name, "log_line": line, "log_tail": _tail(logs, pod_name),
                                   "vendor": found})
    cuda = _grep(logs, vendors.default_vendor().words.missing_libraries)
    if cuda:
        return Diagnosis("image", _p(gettext_noop("The environment lacks CUDA libraries: %(line)s"), line=cuda[1]),
                         _p(gettext_noop("Use an image built for this CUDA version (e.g. a -cuda12 tag) or install the "
                                         "libraries it names.")),
                         evidence={"pod": cuda[0], "log_line": cuda[1], "log_tail": _tail(logs, cuda[0])})
    lost = [p for p in failed if p.reason in ("Evicted", "NodeLost", "Preempting") or p.node in not_ready_nodes]
    if lost:
        pod = lost[0]
        why = pod.message or _p(gettext_noop("node %(n)s is not ready"), n=pod.node)
        return Diagnosis("node_fault", _p(gettext_noop("Node %(node)s failed under the job: %(why)s"), node=pod.node,
                                          why=why), _retried_elsewhere(), node=pod.node,
                         evidence={"pod": pod.name, "reason": pod.reason or "NotReady", "message": pod.message,
                                   "node_not_ready": pod.node in not_ready_nodes})
    if agent_fault and agent_fault.get("category") == "gpu_fault":
        found = _fault_vendor(agent_fault, vendor)
        evidence = {"agent": agent_fault, **({"vendor": found} if found != DEFAULT_VENDOR else {})}
        node, msg = agent_fault.get("node", ""), agent_fault.get("message", "")
        if found == DEFAULT_VENDOR:
            return Diagnosis("gpu_fault", _p(gettext_noop("GPU fault on %(node)s: %(msg)s"), node=node, msg=msg),
                             _p(gettext_noop("Nothing to fix in the job: it is retried automatically without that "
                                             "node.")), node=node, evidence=evidence)
        return Diagnosis("gpu_fault", _p(gettext_noop("%(device)s fault on %(node)s: %(msg)s"), device=_device(found),
                                         node=node, msg=msg), _device_fault_advice(found), node=node,
                         evidence=evidence)
    if agent_fault and agent_fault.get("category") == "node_fault":
        node = agent_fault.get("node", "")
        return Diagnosis("node_fault", _p(gettext_noop("Node %(node)s failed under the job: %(why)s"), node=node,
                                          why=agent_fault.get("message", "")), _retried_elsewhere(), node=node,
                         evidence={"agent": agent_fault})
    fault = _grep_vendor(logs, _with_default("device_fault"), vendor)
    if fault:
        found, pod_name, line = fault
        pod = next((p for p in pods if p.name == pod_name), None)
        evidence = {"pod": pod_name, "log_line": line, "log_tail": _tail(logs, pod_name)}
        if found == DEFAULT_VENDOR:
            return Diagnosis("gpu_fault", _p(gettext_noop("The GPU failed under the job: %(line)s"), line=line),
                             _p(gettext_noop("Nothing to fix in the job: it is retried automatically without that "
                                             "node.")), node=pod.node if pod else "", evidence=evidence)
        return Diagnosis("gpu_fault", _p(gettext_noop("The %(device)s failed under the job: %(line)s"),
                                         device=_device(found), line=line), _device_fault_advice(found),
                         node=pod.node if pod else "", evidence={**evidence, "vendor": found})
    oom = [p for p in failed if p.terminated_reason == "OOMKilled"]
    if oom:
        pod = oom[0]
        return Diagnosis("out_of_memory", _p(gettext_noop("The container ran out of memory and was killed (OOMKilled, "
                                                          "exit 137).")),
                         _p(gettext_noop("Ask for more memory per node, or reduce the data loader workers and batch "
                                         "size.")), node=pod.node, exit_code=137,
                         evidence={"pod": pod.name, "reason": "OOMKilled", "log_tail": _tail(logs, pod.name)})
    device_oom = _grep_vendor(logs, _with_default("out_of_memory"), vendor)
    if device_oom:
        found, pod_name, line = device_oom
        pod = next((p for p in failed if p.name == pod_name), failed[0] if failed else None)
        evidence = {"pod": pod_name, "log_line": line, "log_tail": _tail(logs, pod_name)}
        where = {"node": pod.node if pod else "", "exit_code": pod.exit_code if pod else None}
        if found == DEFAULT_VENDOR:
            return Diagnosis("out_of_memory", _p(gettext_noop("The GPU ran out of memory: %(line)s"), line=line),
                             _p(gettext_noop("Reduce the batch size, use gradient checkpointing or mixed precision, or "
                                             "a GPU with more memory.")), evidence=evidence, **where)
        return Diagnosis("out_of_memory", _p(gettext_noop("The %(device)s ran out of memory: %(line)s"),
                                             device=_device(found), line=line), _p(gettext_noop(
            "Reduce the batch size, use gradient checkpointing or mixed precision, or a device with more memory; "
            "%(tool)s shows the memory each process holds on the device."), tool=vendors.vendor(found).memory_tool),
            evidence={**evidence, "vendor": found}, **where)
    if node_count > 1:
        comm = _grep_vendor(logs, _with_default("collective_failure"), vendor)
        hanging = [p for p in pods if p.running]
        if comm or (failed and hanging):
            # the rank that failed first is the one to avoid; with none failed, the one whose log tells
            pod = failed[0] if failed else next((p for p in pods if comm and p.name == comm[1]), pods[0])
            found = comm[0] if comm else vendors.vendor_or_default(vendor).name
            line = comm[2] if comm else _p(gettext_noop("rank %(r)d failed while %(n)d other rank(s) kept waiting "
                                                        "for it"), r=pod.index, n=len(hanging))
            evidence = {"failed_rank": pod.index, "hanging_ranks": [p.index for p in hanging],
                        "log_line": comm[2] if comm else "", "pod": comm[1] if comm else pod.name,
                        "log_tail": _tail(logs, comm[1] if comm else pod.name)}
            if found == DEFAULT_VENDOR:
                return Diagnosis("communication", _p(gettext_noop("Cross-node communication failed: %(line)s"),
                                                     line=line), _p(gettext_noop(
                    "Usually the network between nodes: the job is retried on other nodes. If it repeats, check "
                    "NCCL_SOCKET_IFNAME / NCCL_IB_HCA and the rendezvous settings.")), node=pod.node,
                    evidence=evidence)
            record = vendors.vendor(found)
            library = record.library
            return Diagnosis("communication", _p(gettext_noop("Cross-node communication (%(library)s) failed: "
                                                              "%(line)s"), library=library, line=line), _p(gettext_noop(
                "Usually the network between nodes: the job is retried on other nodes. If it repeats, check "
                "%(settings)s and the rendezvous settings, and the device links with %(tool)s."),
                settings=record.library_settings, tool=record.health_tool), node=pod.node,
                evidence={**evidence, "vendor": found, "library": library})
    return _program_failure(pods, failed, failed_condition, logs)


def _program_failure(pods: list[PodState], failed: list[PodState], failed_condition: dict | None,
                     logs: dict[str, str]) -> Diagnosis:
    """What is left: the program's own failure, named by the decisive line of its log (``signatures``), or,
    when no line is recognised, by its exit code (what a well-known one means)."""
    pod = failed[0] if failed else None
    code = pod.exit_code if pod else None
    condition = {"condition": failed_condition} if failed_condition else {}
    for candidate in [*failed, *(p for p in pods if p not in failed)]:
        found = signatures.recognise(_tail(logs, candidate.name))
        if found is not None:
            signature, code = found.signature, candidate.exit_code if candidate.exit_code is not None else code
            return Diagnosis(str(signature.category), Phrase(signature.cause, found.params),
                             Phrase(signature.advice, found.params), node=candidate.node, exit_code=code,
                             evidence={"pod": candidate.name, "reason": candidate.terminated_reason,
                                       "log_line": found.line, "signature": signature.key,
                                       "log_tail": _tail(logs, candidate.name), **condition})
    evidence = {"pod": pod.name if pod else "", "reason": pod.terminated_reason if pod else "",
                "log_tail": _tail(logs, pod.name) if pod else [], **condition}
    advice = _p(gettext_noop("Read the last lines of its log below; fix the program and submit again."))
    if code is None:
        why = (failed_condition or {}).get("message") or (pod.message if pod else "") or "-"
        return Diagnosis("exit_code", _p(gettext_noop("The job failed before its program reported an exit code: "
                                                      "%(why)s"), why=why), advice, node=pod.node if pod else "",
                         evidence=evidence)
    meaning = signatures.EXIT_CODES.get(code)
    message = (_p(gettext_noop("The program exited with code %(code)s: %(meaning)s."), code=code,
                  meaning=Phrase(meaning)) if meaning else
               _p(gettext_noop("The program exited with code %(code)s."), code=code))
    return Diagnosis("exit_code", message, advice, node=pod.node if pod else "", exit_code=code, evidence=evidence)


def _p(msgid: str, **params) -> Phrase:
    """A sentence stored as a phrase: its English text now, its message id and parameters for any reader."""
    return Phrase(msgid, params)


def _device(name: str) -> Phrase:
    """A vendor's device ("Ascend NPU") as a phrase, so that it reads in the reader's language inside another."""
    with override(None):  # no catalogue: the message id itself
        return Phrase(str(vendors.vendor(name).device))


def _retried_elsewhere() -> Phrase:
    return _p(gettext_noop("Nothing to fix in the job: it is retried automatically on another node."))


def _device_fault_advice(vendor: str) -> Phrase:
    return _p(gettext_noop("Nothing to fix in the job: it is retried automatically without that node. Platform "
                           "admins: %(tool)s on that node shows the device's health and alarms."),
              tool=vendors.vendor(vendor).health_tool)


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
