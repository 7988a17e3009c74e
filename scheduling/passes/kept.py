"""The scheduler's kept view: the fleet and job rows a pass read, kept for the next pass in this process.

Reading 10,000 waiting and 4,000 running jobs, and every node with its GPUs, cost most of a pass's load step, though
few of those rows change between two passes. So each process keeps what its last pass read, and the next pass
asks the database only which rows changed: one query per kind returns every row's id with a fingerprint (hashed
where the rows are): of a waiting job, its row's version and the joined columns it is told (``RowVersion``); of a
running job, exactly the columns the engine is told (``snapshots.RUNNING_FIELDS``). Only new or changed rows are
read again. The check is level-triggered: it compares what the database holds now with what is kept, whoever
wrote it (another worker's pass, a cancel, an agent's poll, a bare ``update()``), so no change feed can be
missed. A row and its fingerprint come from one query, so a row that changes while it is read carries its new
fingerprint and is read again next time.

What stays trusted is bounded: the whole view is read again after ``SCHEDULER["FULL_REBUILD_SECONDS"]``, after a
failed pass (``discard``) and at process start; every ``SCHEDULER["SNAPSHOT_CHECK_PASSES"]`` passes the kept rows
are compared with a full read (``differences``: the same comparison the tests make), and a mismatch is logged,
counted (``gpuportal_scheduling_snapshot_mismatches_total``) and replaced by what the database says. Quotas,
reservations, tenants, outside work and history are small or change with the clock: ``load_snapshots`` reads
them every time. The fingerprints are PostgreSQL's (``hashtextextended``); on another database (the embedded
demo's SQLite, a few dozen rows) every pass reads everything.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import BigIntegerField, F, Func

from fleet.models import GPU, Node
from gpuportal.observability import telemetry
from scheduling.models import Job
from scheduling.passes import snapshots

logger = logging.getLogger(__name__)

#: What of a node and a GPU the snapshot and the apply step use: a change to any of these reads the fleet again
#: (an agent's poll stamps other columns every few seconds; they do not count).
NODE_FIELDS = ("id", "name", "gpu_model", "cluster_id", "datacenter", "rack", "network_domain", "health",
               "admin_state", "cpu_milli", "memory_mib")
GPU_FIELDS = ("id", "node_id", "index", "health")
#: Above this share of changed rows (and this many) one full read is cheaper than reading the changed ones by id.
REREAD_ALL_SHARE, REREAD_ALL_ROWS = 0.3, 1000


class Fingerprint(Func):
    """A 64-bit hash of some columns of a row, computed by PostgreSQL (``ROW(...)::text`` renders every type)."""

    template = "hashtextextended(ROW(%(expressions)s)::text, 0)"
    output_field = BigIntegerField()
    #: PostgreSQL hands the hash back as an int already: no converter to call on each of 23,000 rows a pass
    convert_value = staticmethod(Func._convert_value_noop)

    def __init__(self, *names: str):
        super().__init__(*(F(name) for name in names))


class RowVersion(Func):
    """A 64-bit hash of a job row's version and of the joined columns ``names`` (``tenant__name``...): every write of
    the row makes a new version, with the writing transaction's id (``xmin``) and a place in the table (``ctid``)
    that no version still visible to that transaction holds, so a row written again, even twice in one
    transaction, has another hash. Cheaper than hashing every column's text (18 against 29 ms at 10,000 rows), for
    the waiting jobs, whose rows are seldom written while they wait (a hold, a new priority); a write that changes
    nothing the engine is told only reads the row again. (Running jobs keep ``Fingerprint``: the status sync
    writes their rows as they run.)"""

    template = 'hashtextextended(ROW(%(table)s."xmin", %(table)s."ctid", %(expressions)s)::text, 0)'
    output_field = BigIntegerField()
    convert_value = staticmethod(Func._convert_value_noop)

    def __init__(self, model, *names: str):
        super().__init__(*(F(name) for name in names), table=connection.ops.quote_name(model._meta.db_table))


@dataclass
class KeptView:
    """One process's kept fleet and job rows, with the fingerprints they were read with."""

    fleet: snapshots.Fleet | None = None
    fleet_marks: list = field(default_factory=list)
    rows: snapshots.JobRows | None = None
    marks: dict[str, dict[int, int]] = field(default_factory=dict)
    built_at: float = 0.0
    passes: int = 0
    #: What the last refresh did, for the benchmark and the logs: "rebuilt" or "kept", and rows read again.
    last: dict = field(default_factory=dict)

    def discard(self) -> None:
        """Forget everything: the next pass reads the whole world (after a failed pass, in tests)."""
        self.fleet, self.rows, self.marks, self.fleet_marks, self.passes = None, None, {}, [], 0

    def refresh(self) -> tuple[snapshots.Fleet, snapshots.JobRows]:
        """The fleet and job rows as the database holds them now, reading only what changed when trusted."""
        bound = settings.SCHEDULER["FULL_REBUILD_SECONDS"]
        if self.rows is None or time.monotonic() - self.built_at > bound:
            self._rebuild()
            return self.fleet, self.rows
        self.passes += 1
        every = settings.SCHEDULER["SNAPSHOT_CHECK_PASSES"]
        self._refresh_fleet()
        waiting = self._refresh("waiting", snapshots.waiting_queryset(), self.rows.waiting)
        running = self._refresh("running", snapshots.running_queryset(), self.rows.running)
        self.rows.placements = snapshots.placements_of_running()  # few columns, and they change with any admission
        self.last = {"view": "kept", "waiting_read": waiting, "running_read": running}
        if every and self.passes % every == 0:
            self.check()
        return self.fleet, self.rows

    def check(self) -> list[str]:
        """Compare the kept rows with a full read (the periodic check): a mismatch is logged, counted and
        replaced by what the database says. Returns the differences."""
        fresh = snapshots.read_job_rows()
        found = differences(self.rows, fresh)
        if found:
            logger.warning("The scheduler's kept view differed from the database (%d rows: %s); rebuilt.",
                           len(found), "; ".join(found[:5]))
            telemetry.guarded(lambda: telemetry.increment("gpuportal_scheduling_snapshot_mismatches_total",
                                                          len(found)))
            self._rebuild()
        return found

    def _rebuild(self) -> None:
        self.fleet_marks = _fleet_marks()
        self.fleet = snapshots.read_fleet()
        self.rows = snapshots.JobRows(waiting={}, running={}, placements=snapshots.placements_of_running())
        self.marks = {}
        self.rows.waiting, self.marks["waiting"] = _read_marked(snapshots.waiting_queryset(), "waiting")
        self.rows.running, self.marks["running"] = _read_marked(snapshots.running_queryset(), "running")
        self.built_at, self.passes = time.monotonic(), 0
        self.last = {"view": "rebuilt", "waiting_read": len(self.rows.waiting), "running_read": len(self.rows.running)}

    def _refresh_fleet(self) -> None:
        marks = _fleet_marks()
        if marks != self.fleet_marks:
            self.fleet_marks, self.fleet = marks, snapshots.read_fleet()
        else:  # clusters are few and their policy may change without a node changing
            self.fleet = snapshots.Fleet(clusters=snapshots.read_fleet_clusters(), nodes=self.fleet.nodes,
                                         derived=self.fleet.derived)
            by_id = {cluster.pk: cluster for cluster in self.fleet.clusters}
            for node in self.fleet.nodes:
                node.cluster = by_id[node.cluster_id]

    def _refresh(self, kind: str, query, kept: dict[int, dict]) -> int:
        """Bring ``kept`` (rows of one kind, by id) to what ``query`` holds now; returns how many rows were read."""
        now = dict(query.values_list("id", _mark(kind)))
        known = self.marks[kind]
        for gone in known.keys() - now.keys():
            del kept[gone]
        changed = [pk for pk, mark in now.items() if known.get(pk) != mark]
        if len(changed) > max(REREAD_ALL_SHARE * len(now), REREAD_ALL_ROWS):
            read, marks = _read_marked(query, kind)
        else:
            read, marks = _read_marked(query.filter(pk__in=changed), kind) if changed else ({}, {})
        kept.update(read)
        for pk in changed:  # left the kind between the two queries: the next pass sees where it went
            if pk not in read:
                kept.pop(pk, None)
        self.marks[kind] = {pk: mark for pk, mark in now.items() if pk in kept} | marks
        return len(read)


#: The columns read of each kind of job row: exactly what the engine is told of it.
FIELDS = {"waiting": snapshots.WAITING_FIELDS, "running": snapshots.RUNNING_FIELDS}


def _mark(kind: str) -> Func:
    """The fingerprint the kept view compares for a row of ``kind``: a waiting row's version and joined columns
    (``RowVersion``), a running row's columns (``Fingerprint``)."""
    if kind == "waiting":
        return RowVersion(Job, *(name for name in FIELDS[kind] if "__" in name))
    return Fingerprint(*FIELDS[kind])


def _read_marked(query, kind: str) -> tuple[dict[int, dict], dict[int, int]]:
    """Rows of ``kind`` by id, with each row's fingerprint from the same query."""
    rows, marks = {}, {}
    for row in query.values(*FIELDS[kind], kept_mark=_mark(kind)):
        marks[row["id"]] = row.pop("kept_mark")
        rows[row["id"]] = row
    return rows, marks


def _fleet_marks() -> list:
    """Each node's and GPU's fingerprint, in id order: equal lists, an unchanged fleet."""
    return [list(Node.objects.order_by("id").values_list("id", Fingerprint(*NODE_FIELDS))),
            list(GPU.objects.order_by("id").values_list("id", Fingerprint(*GPU_FIELDS)))]


def differences(kept: snapshots.JobRows, fresh: snapshots.JobRows) -> list[str]:
    """What differs between two sets of job rows, in words for a log line (empty: the same)."""
    found = []
    for kind in ("waiting", "running", "placements"):
        mine, theirs = getattr(kept, kind), getattr(fresh, kind)
        for pk in sorted(mine.keys() | theirs.keys()):
            a, b = mine.get(pk), theirs.get(pk)
            if kind == "placements":
                a, b = sorted(a or ()), sorted(b or ())
            if a != b:
                found.append(f"{kind} job {pk}: kept {a!r}, database {b!r}")
    return found


#: This process's view (a Celery worker runs one pass at a time).
VIEW = KeptView()


def load_snapshots(now=None):
    """``snapshots.load_snapshots`` from this process's kept view (from a full read where fingerprints are not
    available)."""
    if connection.vendor != "postgresql":
        return snapshots.load_snapshots(now)
    fleet, rows = VIEW.refresh()
    return snapshots.load_snapshots(now, fleet=fleet, rows=rows)
