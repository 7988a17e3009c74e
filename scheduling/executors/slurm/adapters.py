"""Each slurmrestd REST version's JSON mapped to the shapes of ``shapes.py``: one class per version.

22.05 serves v0.0.36 to v0.0.38 with the same fields except where a class below says otherwise; a later
version is one more class here and one more entry in ``ADAPTERS``."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from scheduling.executors.slurm.shapes import (
    AccountedJob,
    GresCount,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmProblem,
    gpu_indices,
    hostlist,
    split_top,
)

# "gpu:h100:8", "gpu:8", "gpu:h100:3(IDX:0-2)", "gpu:h100:8(S:0-1)"
_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)(?:\((?:S:[^)]*|IDX:(?P<idx>[^)]*))\))?")


def _gres_items(text: str) -> list[str]:
    """The GPU entries of a GRES list, split at the commas that separate entries (not those inside "(IDX:0,2)")."""
    return [item for item in split_top(text, "()") if item.startswith("gpu")]


def parse_gres(text: str) -> tuple[GresCount, ...]:
    counts = []
    for item in _gres_items(text):
        match = _GRES.match(item)
        if match:
            counts.append(GresCount(type=match.group("type") or "", count=int(match.group("count"))))
    return tuple(counts)


def parse_gres_used(text: str) -> dict[str, tuple[int, ...]]:
    used: dict[str, tuple[int, ...]] = {}
    for item in _gres_items(text):
        match = _GRES.match(item)
        if match:
            kind = match.group("type") or ""
            used[kind] = used.get(kind, ()) + gpu_indices(match.group("idx") or "")
    return used


def moment(epoch) -> datetime | None:
    """An epoch of Slurm's as an aware UTC moment; 0 (not yet) and nothing are None."""
    if not epoch:
        return None
    return datetime.fromtimestamp(int(epoch), tz=UTC)


def minutes(value) -> int | None:
    """A time limit in minutes; Slurm says "no limit" with -1, a very large number or nothing."""
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= 0xFFFFFFFE:
        return None
    return value


def problems(answer: dict, key: str = "errors") -> tuple[SlurmProblem, ...]:
    """The errors (or warnings) of an answer; their number is ``error_number``, ``error_code`` or ``errno`` by
    endpoint (a refused token: ``errno`` -1, "Unspecified error")."""
    found = []
    for entry in answer.get(key) or ():
        if not isinstance(entry, dict):
            continue
        number = entry.get("error_number", entry.get("error_code", entry.get("errno", 0))) or 0
        words = entry.get("description") or entry.get("error") or ""
        if entry.get("description") and entry.get("error") and entry["error"] not in entry["description"]:
            words = f"{entry['error']}: {entry['description']}"
        found.append(SlurmProblem(number=int(number), message=str(words)))
    return tuple(found)


class V0038:
    """slurmrestd ``v0.0.38`` (22.05): the newest of 22.05."""

    version = "v0.0.38"

    def slurm_path(self, path: str) -> str:
        return f"/slurm/{self.version}/{path}"

    def db_path(self, path: str) -> str:
        return f"/slurmdb/{self.version}/{path}"

    def node(self, raw: dict) -> SlurmNode:
        return SlurmNode(
            name=raw.get("name", ""), state=str(raw.get("state", "")).lower(), flags=self.node_flags(raw),
            reason=raw.get("reason") or "", gres=parse_gres(raw.get("gres") or ""),
            gres_used=parse_gres_used(raw.get("gres_used") or ""), cpus=int(raw.get("cpus") or 0),
            alloc_cpus=int(raw.get("alloc_cpus") or 0), real_memory_mib=int(raw.get("real_memory") or 0),
            partitions=tuple(raw.get("partitions") or ()), address=raw.get("address") or "",
            slurmd_version=raw.get("slurmd_version") or "")

    def node_flags(self, raw: dict) -> tuple[str, ...]:
        return tuple(str(flag).upper() for flag in raw.get("state_flags") or ())

    def partition(self, raw: dict) -> SlurmPartition:
        return SlurmPartition(name=raw.get("name", ""), nodes=hostlist(raw.get("nodes") or ""),
                              state=str(raw.get("state", "")), max_time_minutes=minutes(raw.get("max_time_limit")))

    def job(self, raw: dict) -> SlurmJob:
        nodes = hostlist(raw.get("nodes") or "")
        return SlurmJob(
            job_id=int(raw["job_id"]), name=raw.get("name") or "", state=str(raw.get("job_state", "")).upper(),
            reason=raw.get("state_reason") or "", raw_exit_code=raw.get("exit_code"),
            user=raw.get("user_name") or "", account=raw.get("account") or "", partition=raw.get("partition") or "",
            nodes=nodes, gpus_by_node=self.gpus_by_node(nodes, raw.get("gres_detail") or ()),
            comment=raw.get("comment") or "", submit_time=moment(raw.get("submit_time")),
            start_time=moment(raw.get("start_time")), end_time=moment(raw.get("end_time")),
            time_limit_minutes=minutes(raw.get("time_limit")), standard_output=raw.get("standard_output") or "",
            restarts=int(raw.get("restart_cnt") or 0))

    @staticmethod
    def gpus_by_node(nodes: tuple[str, ...], detail) -> dict[str, tuple[int, ...]]:
        """``gres_detail`` has one entry per node of the job, in the order of its node list."""
        found = {}
        for node, entry in zip(nodes, detail, strict=False):
            indices: tuple[int, ...] = ()
            for item in _gres_items(entry):
                match = _GRES.match(item)
                if match:
                    indices += gpu_indices(match.group("idx") or "")
            found[node] = indices
        return found

    def accounted(self, raw: dict) -> AccountedJob:
        # A site that lists typed TRES (``AccountingStorageTRES=gres/gpu,gres/gpu:h100``) gets both the untyped
        # ``gpu`` total and a ``gpu:h100`` entry for the same GPUs: the untyped count is the job's when present,
        # else the typed ones add up; the type comes from a typed entry either way.
        untyped, typed, gpu_type = None, 0, ""
        for tres in (raw.get("tres") or {}).get("allocated") or ():
            name = tres.get("name") or ""
            if tres.get("type") != "gres":
                continue
            if name == "gpu":
                untyped = (untyped or 0) + int(tres.get("count") or 0)
            elif name.startswith("gpu:"):
                typed += int(tres.get("count") or 0)
                gpu_type = gpu_type or name.partition(":")[2]
        gpus = typed if untyped is None else untyped
        times = raw.get("time") or {}
        exit_code = raw.get("exit_code") or {}
        signal = ((exit_code.get("signal") or {}).get("signal_id")
                  if isinstance(exit_code.get("signal"), dict) else None)
        comment = raw.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job")
        state = raw.get("state") or {}
        return AccountedJob(
            job_id=int(raw["job_id"]), name=raw.get("name") or "", user=raw.get("user") or "",
            account=raw.get("account") or "", partition=raw.get("partition") or "",
            state=str(state.get("current", "")).upper(), reason=state.get("reason") or "",
            return_code=exit_code.get("return_code"), signal=signal or None, nodes=hostlist(raw.get("nodes") or ""),
            gpus=gpus, gpu_type=gpu_type, submit_time=moment(times.get("submission")),
            start_time=moment(times.get("start")), end_time=moment(times.get("end")),
            elapsed_seconds=int(times.get("elapsed") or 0), comment=comment or "")


class V0037(V0038):
    """``v0.0.37``: the fields the portal reads are those of v0.0.38."""

    version = "v0.0.37"


class V0036(V0038):
    """``v0.0.36``: nodes carry neither ``partitions`` nor ``state_flags``. A node Slurm keeps a reason for
    while it says idle, mixed or allocated is drained (a reason is set with a drain and cleared on resume), so
    that is read as DRAIN; down nodes say so in their state."""

    version = "v0.0.36"

    def node_flags(self, raw: dict) -> tuple[str, ...]:
        if "state_flags" in raw:
            return super().node_flags(raw)
        state = str(raw.get("state", "")).lower()
        return ("DRAIN",) if raw.get("reason") and state in {"idle", "mixed", "allocated"} else ()


#: Newest first: the client takes the first one the cluster offers.
ADAPTERS = {adapter.version: adapter for adapter in (V0038(), V0037(), V0036())}
SUPPORTED_VERSIONS = tuple(ADAPTERS)
