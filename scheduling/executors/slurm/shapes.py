"""The typed data of a Slurm cluster as the portal uses it, the same whatever REST version answered.

The adapters (``adapters.py``) turn each version's JSON into these; the executor, the inventory and the
accounting import read only these, so a later Slurm version is one more adapter and nothing else."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_RANGE = re.compile(r"^(\d+)-(\d+)$")


def hostlist(expr: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist ("sx-h100-[1-2],sx-a100-1", "n[01-03,7]") into names, in order; zero padding is
    kept because Slurm names nodes by the padded string."""
    names: list[str] = []
    for part in split_top(expr):
        names.extend(_expand(part))
    return tuple(names)


def split_top(text: str, brackets: str = "[]") -> list[str]:
    """Split at the commas outside ``brackets`` (a hostlist's "[1-2,4]" or a GRES entry's "(IDX:0,2)" hold
    commas of their own); empty parts and Slurm's "(null)" are left out."""
    opening, closing = brackets
    parts, depth, current = [], 0, ""
    for char in (text or "").strip():
        depth += (char == opening) - (char == closing)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip() and part.strip() != "(null)"]


def _expand(part: str) -> list[str]:
    start = part.find("[")
    if start < 0:
        return [part]
    end = part.index("]", start)
    prefix, ranges, rest = part[:start], part[start + 1:end], part[end + 1:]
    tails = _expand(rest) if rest else [""]
    names = []
    for item in ranges.split(","):
        match = _RANGE.match(item.strip())
        if match:
            low, high = match.group(1), match.group(2)
            width = len(low) if low.startswith("0") else 0
            numbers = [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
        else:
            numbers = [item.strip()]
        names.extend(prefix + number + tail for number in numbers for tail in tails)
    return names


def gpu_indices(expr: str) -> tuple[int, ...]:
    """The GPU indices of "0-1,4" (the IDX part of a GRES string); "N/A" and "" are none."""
    indices: list[int] = []
    for item in (expr or "").split(","):
        item = item.strip()
        if not item or item == "N/A":
            continue
        match = _RANGE.match(item)
        if match:
            indices.extend(range(int(match.group(1)), int(match.group(2)) + 1))
        elif item.isdigit():
            indices.append(int(item))
    return tuple(indices)


@dataclass(frozen=True)
class SlurmProblem:
    """One entry of a slurmrestd answer's ``errors`` or ``warnings``: Slurm's number and its words."""

    number: int
    message: str


@dataclass(frozen=True)
class GresCount:
    """A node's GPUs of one GRES type ("gpu:h100:8" → type "h100", count 8; an untyped "gpu:4" → type "")."""

    type: str
    count: int


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # lower case, as Slurm says it: idle, mixed, allocated, down, ...
    flags: tuple[str, ...]  # upper case: DRAIN, FAIL, ... (a drained node is "idle" with DRAIN)
    reason: str
    gres: tuple[GresCount, ...]
    gres_used: dict[str, tuple[int, ...]]  # GRES type -> indices of its GPUs in use
    cpus: int
    alloc_cpus: int
    real_memory_mib: int
    partitions: tuple[str, ...]
    address: str
    slurmd_version: str

    @property
    def gpus(self) -> int:
        return sum(count.count for count in self.gres)

    @property
    def gpu_type(self) -> str:
        return self.gres[0].type if self.gres else ""


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    nodes: tuple[str, ...]
    state: str
    max_time_minutes: int | None  # None: no limit


@dataclass(frozen=True)
class SlurmJob:
    """A job as slurmctld knows it (until ``MinJobAge`` after its end)."""

    job_id: int
    name: str
    state: str  # upper case: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    reason: str
    raw_exit_code: int | None  # the raw wait status, as slurmctld keeps it
    user: str
    account: str
    partition: str
    nodes: tuple[str, ...]
    gpus_by_node: dict[str, tuple[int, ...]]  # while it runs: node -> GPU indices, in the order of ``nodes``
    comment: str
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    time_limit_minutes: int | None
    standard_output: str
    restarts: int = 0  # how often Slurm put it back in its queue (a requeue after a node failure or preemption)

    @property
    def exit_status(self) -> int | None:
        """The program's exit status, when it exited rather than being killed by a signal."""
        if self.raw_exit_code is None or self.raw_exit_code & 0x7F:
            return None
        return self.raw_exit_code >> 8

    @property
    def signal(self) -> int | None:
        """The signal that ended it, when one did."""
        if self.raw_exit_code is None:
            return None
        return (self.raw_exit_code & 0x7F) or None


@dataclass(frozen=True)
class AccountedJob:
    """A job as slurmdb recorded it (kept after slurmctld forgets it): what accounting and late following read."""

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    state: str
    reason: str
    return_code: int | None
    signal: int | None
    nodes: tuple[str, ...]
    gpus: int  # allocated gres/gpu, the whole job
    gpu_type: str  # "" when the accounting TRES is untyped
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    elapsed_seconds: int
    comment: str


@dataclass(frozen=True)
class SubmitResult:
    """What a submit answered. It succeeded when ``job_id`` is set, whatever ``errors`` says (a held job or a time
    limit over the partition's still gets an id and an error)."""

    job_id: int | None
    errors: tuple[SlurmProblem, ...] = ()
    warnings: tuple[SlurmProblem, ...] = ()

    @property
    def message(self) -> str:
        """Slurm's own words for what went wrong, for the job's failure message."""
        return "; ".join(problem.message for problem in self.errors if problem.message)

