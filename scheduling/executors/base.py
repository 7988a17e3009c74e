"""The executor interface: dispatch a job, report what became of it, stop it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecutorUpdate:
    """What the executor observed for one job since the last sync: a new status, why, and evidence."""

    status: str
    reason: str
    failure_category: str = ""
    failure_message: str = ""
    exit_code: int | None = None


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
