"""The executor interface: dispatch a job, report what became of it, stop it, read its log."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from scheduling.executors.logs import LogTail, stored_tail
from scheduling.models import NamedPort


@dataclass(frozen=True)
class ExecutorUpdate:
    """What the executor observed for one job since the last sync: a new status, why, and evidence.

    ``diagnosis`` (a ``Diagnosis.as_dict()``: category, message, advice, node, evidence) goes into the job's
    executor state and the event, as the Kubernetes sync stores it, so the job page and the API show the
    evidence and the next step whichever executor ran the job."""

    status: str
    reason: str
    failure_category: str = ""
    failure_message: str = ""
    exit_code: int | None = None
    diagnosis: dict | None = None
    state: dict | None = None  # executor state to keep with the change (where a started server listens)

    def saved_fields(self, job) -> dict:
        """The job's fields to save with the transition."""
        fields = {"failure_category": self.failure_category, "failure_message": self.failure_message,
                  "exit_code": self.exit_code}
        if self.diagnosis or self.state:
            fields["executor_state"] = {**(job.executor_state or {}), **(self.state or {})}
            if self.diagnosis:
                fields["executor_state"]["diagnosis"] = self.diagnosis
        return fields


@dataclass(frozen=True)
class LiveState:
    """What a notebook or a service replica shows while it runs, asked of the executor when read (never stored:
    it changes by the second).

    ``upstream`` is where the portal's proxy reaches it (``http://host:port``; inside the cluster on
    Kubernetes), never shown to users. ``ready``: answers its readiness check (None: unknown). ``restarts``:
    how often its container restarted. ``last_activity``: a notebook's last kernel or client activity.
    ``problem``: why it is not ready (crash loop, failing readiness), in words, with ``evidence``.
    """

    upstream: str = ""
    ready: bool | None = None
    restarts: int = 0
    last_activity: datetime | None = None
    problem: str = ""
    evidence: dict = field(default_factory=dict)


def port_environment(ports: list[NamedPort]) -> dict[str, str]:
    """What a program learns of the ports it declared, whichever executor runs it: ``GPUPORTAL_PORT_<NAME>`` (the
    name upper-cased, hyphens as underscores) is the number to listen on, on every address of its node or pod."""
    return {f"GPUPORTAL_PORT_{p['name'].upper().replace('-', '_')}": str(p["port"]) for p in ports}


class Executor:
    def __init__(self, cluster):
        self.cluster = cluster

    def dispatch(self, job) -> dict:
        """Start the job on its allocated GPUs; returns executor state to keep on the job."""
        raise NotImplementedError

    def observe(self, job, now) -> ExecutorUpdate | None:
        """What changed for a dispatched or running job, or None when nothing did."""
        raise NotImplementedError

    def stop(self, job, reason: str = "") -> None:
        """Stop a job that was cancelled, preempted or reclaimed (or an attempt that failed)."""
        raise NotImplementedError

    def probe(self, job) -> LiveState:
        """The live state of a running notebook or service replica (batch jobs: nothing to tell)."""
        return LiveState()

    def port_upstream(self, job, port: NamedPort) -> str:
        """Where the portal's proxy reaches one of a running job's named ports (``http://host:port``, never shown
        to users); "" when it cannot be reached (not running, nothing listens yet)."""
        return ""

    def port_refusal(self, job, port: NamedPort) -> str:
        """Why the proxy must not reach this port now, in the reader's language; "" when it may. Where the
        address is the job's own (a pod, a Service selecting its pods, the demo's stand-in), nothing else can
        answer there: nothing to refuse."""
        return ""

    def release_group(self, group) -> None:
        """Remove what a stopped service's replicas shared (its cluster Service and Ingress); nothing by default."""

    def read_log(self, job, tail: int) -> LogTail:
        """The last ``tail`` lines of the job's current (or last) attempt. By default what the portal kept
        with the failure's diagnosis; executors that can read the cluster do better."""
        return stored_tail(job, tail)

    def stopped_log(self, job, tail: int) -> tuple[str, ...]:
        """The last lines of an attempt stopped now (a preemption), when they can be had without asking the
        cluster: the scheduling pass that stops it holds its transaction meanwhile. None by default (the cluster
        deletes the attempt's pods and their log with them: the page says the log is gone)."""
        return ()
