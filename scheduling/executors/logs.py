"""A job's log as the portal shows it: the last lines of one attempt, from whichever executor ran it.

Executors answer ``read_log(job, tail)`` with a :class:`LogTail`. Kubernetes reads the pods' logs while
the pods exist; the simulated executor makes up the lines of its plan. Once the cluster no longer has
them (a failed attempt's pods are deleted), the tail kept with the failure's diagnosis is what is left,
which is why the same diagnosis evidence is stored for both executors.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable
from dataclasses import dataclass

from scheduling.models import ACTIVE_STATUSES, JobAttempt, JobStatus

#: Lines a reader gets when it names no number, and the most it may ask for (the API checks the bounds).
DEFAULT_TAIL = 200
MAX_TAIL = 5000
#: Statuses in which the current attempt has not started (so it has written nothing yet).
NOT_STARTED = (JobStatus.PENDING, JobStatus.QUEUED, JobStatus.ADMITTED)
_KUBE_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z (.*)$", re.S)


@dataclass(frozen=True)
class LogTail:
    """The last lines of one attempt (``attempt`` 1 is the first run; each retry or requeue adds one).

    ``gone``: the attempt ran but its log can no longer be read (its pods were deleted and nothing was
    kept); ``error``: the cluster could not be asked (the reader shows it instead of lines)."""

    attempt: int
    lines: tuple[str, ...] = ()
    gone: bool = False
    error: str = ""


def has_run(job) -> bool:
    """Did the job's latest attempt start its program (so a log was written)?"""
    return job.started_at is not None and job.status not in (*NOT_STARTED, JobStatus.DISPATCHING)


def stored_tail(job, tail: int) -> LogTail:
    """What the portal kept: the log tail of the current attempt's diagnosis, or, while a retried job
    waits for its next attempt, that of the attempt that failed."""
    state = job.executor_state or {}
    kept = ((state.get("diagnosis") or {}).get("evidence") or {}).get("log_tail")
    if kept:
        return LogTail(job.retry_count + 1, tuple(kept[-tail:]))
    attempts = state.get("attempts") or []
    if job.status in NOT_STARTED and attempts:
        last = attempts[-1]
        kept = (last.get("evidence") or {}).get("log_tail")
        if kept:
            return LogTail(int(last.get("attempt", job.retry_count - 1)) + 1, tuple(kept[-tail:]))
    return LogTail(job.retry_count + 1, gone=has_run(job) and job.status not in ACTIVE_STATUSES)


def kept_log(job, number: int, tail: int) -> LogTail | None:
    """The lines the portal kept of attempt ``number`` once it ended (its diagnosis' tail): ``gone`` when it kept
    none; None when the job has no such attempt. The current attempt is the executor's to read
    (``read_job_log``)."""
    attempt = JobAttempt.objects.filter(job=job, number=number).first()
    if attempt is None:
        return None
    kept = list(attempt.log_tail or [])
    if not kept:  # what a retry kept beside the job before attempts had rows of their own
        for earlier in (job.executor_state or {}).get("attempts") or []:
            if int(earlier.get("attempt", -1)) + 1 == number:
                kept = list((earlier.get("evidence") or {}).get("log_tail") or [])
    return LogTail(number, tuple(kept[-tail:]), gone=not kept and attempt.started_at is not None)


def kube_timestamped(text: str) -> list[tuple[str, str]]:
    """``(sort key, line)`` for the lines of a pod log read with ``timestamps=true``: the RFC 3339 stamp
    Kubernetes puts first (fraction padded, so the keys sort as times) is the key and is taken off the
    line; a line without one (a server that does not stamp, a continuation) keeps the key before it."""
    out, key = [], ""
    for line in text.splitlines():
        match = _KUBE_TIMESTAMP.match(line)
        if match:
            key = f"{match[1]}.{(match[2] or '').ljust(9, '0')}"
            line = match[3]
        out.append((key, line))
    return out


def merge_streams(streams: dict[int, Iterable[tuple]], tail: int) -> tuple[str, ...]:
    """One log from the pods of a gang: each pod's ``(key, line)`` pairs (in order) merged by key, equal
    keys in pod order, ``[pod i]`` before each line when there is more than one pod; the last ``tail``."""
    tagged = len(streams) > 1

    def lines_of(index, pairs):
        for key, line in pairs:
            yield key, f"[pod {index}] {line}" if tagged else line

    merged = heapq.merge(*(lines_of(i, pairs) for i, pairs in sorted(streams.items())), key=lambda pair: pair[0])
    return tuple(line for _key, line in merged)[-tail:]
