"""Writing what the pass says of every waiting job: its reason (a row per job, when it changes) and where it stands
and when it should start (one packed table per pass).

A reason changes for a few jobs per pass and each change is an event on the job's timeline, so reasons stay rows
(``JobQueueState``), compared with what this process last wrote (``KeptReasons``: two plain reads give every
stored row's fingerprint and every waiting job's status, and only the rows that differ are written; on the
embedded demo's SQLite the stored rows are read and compared, by the same rule).

Places and estimates change for nearly every job in a busy queue (one job ahead starts and every job behind moves
up; jobs that end early move every estimate), so they are written as one ``QueueTable`` row: ``PLACE_FIELDS``
per job, packed. The table is rewritten when a place changed or an estimate moved by more than
``SCHEDULER["ESTIMATE_TOLERANCE_SECONDS"]`` (60): pages show an estimate to the minute, while estimates that
depend on the clock drift by the seconds between two passes, and a queue at rest would otherwise be written
(and every kept page dropped) every pass. So a stored estimate is always within the tolerance of the engine's
latest one.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction

from gpuportal.storage.db import bulk_insert, bulk_set
from scheduling.models import (
    NO_TIME,
    PLACE_FIELDS,
    WAITING_STATUSES,
    Job,
    JobQueueState,
    QueuePlaces,
    QueueTable,
    keep_places,
    queue_places,
)
from scheduling.passes import snapshots

#: What a waiting job's reason row holds.
REASON_FIELDS = ["wait_reason", "wait_reason_params"]
#: Reasons by job id: (reason code, its numbers), as the engine gave them.
Reasons = dict[int, tuple[str, dict]]


def tolerance() -> float:
    """Seconds a stored estimate may lag the engine's before the table is written again."""
    return float(settings.SCHEDULER["ESTIMATE_TOLERANCE_SECONDS"])


def store(values: Reasons) -> tuple[dict[int, tuple[str, bool]], int]:
    """Write the reasons ``values`` ((reason, params) by job id) of the jobs that still wait; returns, for each of
    them, its status and whether its reason changed (or it had no state yet), and how many rows were written."""
    if connection.vendor != "postgresql":
        return _store_here(values)
    if not values:
        return {}, 0
    return KEPT.store(values)


#: A stored reason row's fingerprint (``q`` is the row): its version, the same in every query that reads or writes
#: it. Every write of a row makes a new version of it, with the writing transaction's id (``xmin``) and a place in
#: the table (``ctid``) that no version still visible to that transaction holds: so a row written again, even
#: twice in one transaction, has another mark. (A hash of the reason's text cost three times as much to read.)
MARK = 'hashtextextended(q."xmin"::text || q."ctid"::text, 0)'


@dataclass
class KeptReasons:
    """The reasons this process last read or wrote, each with the fingerprint of the row that holds it.

    Copying 10,000 reasons to the database each pass to compare them there cost more than the comparison saved,
    though a tenth of them change. So the pass reads every stored row's fingerprint and every waiting job's status
    (two plain queries); where a row's fingerprint is the one kept here, the stored reason is the kept one and is
    compared in Python, and only the rows that differ are sent. The check is level-triggered: a row someone else
    wrote or a write rolled back has another fingerprint and is read again, a row deleted has none and is written
    anew, so nothing kept is trusted without the database's word. What is kept is what the engine gave, so a
    reason read back from the database (lists where the engine had tuples) may be written once more, equal."""

    rows: dict[int, tuple[int, tuple[str, dict]]] = field(default_factory=dict)  # job id: (mark, (reason, params))
    last: dict[str, int] = field(default_factory=dict)  # what the last store did: rows read again, rows written

    def store(self, values: Reasons) -> tuple[dict[int, tuple[str, bool]], int]:
        """``queue_states.store`` on PostgreSQL, given every cluster's waiting jobs at once (what is kept of the jobs
        it is not given but that still wait is kept for the next pass)."""
        table = JobQueueState._meta.db_table
        with connection.cursor() as cursor:
            # Two plain reads rather than a join: a join's plan follows the statistics, and those of a table that
            # went from empty to 10,000 rows within a minute can make it a scan per job.
            cursor.execute(f'SELECT q."job_id", {MARK} FROM "{table}" q')  # noqa: S608
            marks = dict(cursor.fetchall())
            waiting = dict(snapshots.waiting_queryset().values_list("id", "status"))
            now, unknown, kept_rows, nothing = {}, [], self.rows, (None,)
            for job_id, status in waiting.items():  # one walk of 10,000 jobs: what waits, and which rows to read
                if job_id in values:
                    mark = marks.get(job_id)
                    now[job_id] = (status, mark)
                    if mark is not None and kept_rows.get(job_id, nothing)[0] != mark:
                        unknown.append(job_id)
            if unknown:  # written by someone else, or not by this process: read as stored
                cursor.execute(f'SELECT q."job_id", q."wait_reason", q."wait_reason_params", {MARK} '  # noqa: S608
                               f'FROM "{table}" q WHERE q."job_id" = ANY(%s)', [unknown])
                for job_id, reason, params, mark in cursor.fetchall():
                    self.rows[job_id] = (mark, (reason, json.loads(params) if isinstance(params, str) else params))
            found, new, changed = {}, [], []
            for job_id, (status, mark) in now.items():
                kept = kept_rows.get(job_id)
                if mark is None:  # no state yet
                    found[job_id] = (status, True)
                    new.append(job_id)
                elif kept is None or kept[0] != mark:  # written again since it was read a moment ago: overwritten
                    found[job_id] = (status, True)
                    changed.append(job_id)
                else:
                    stored, value = kept[1], values[job_id]
                    found[job_id] = (status, stored[0] != value[0])
                    if stored != value:  # a steady queue writes nothing
                        changed.append(job_id)
            written = self._write(cursor, changed, values, new=False) | self._write(cursor, new, values, new=True)
        # A job whose row was not written stopped waiting since its status was read (its row goes with it): no
        # event, no place. (A row inserted meanwhile by another writer is read by the next pass.)
        for job_id in {*changed, *new} - written:
            del found[job_id]
        for job_id in self.rows.keys() - waiting.keys():  # no longer waits: its row goes with it (``lifecycle``)
            del self.rows[job_id]
        self.last = {"read": len(unknown), "written": len(written)}
        return found, len(written)

    def _write(self, cursor, ids: list[int], values: Reasons, *, new: bool) -> set[int]:
        """Update (or insert, ``new``) the rows of ``ids`` whose job still waits, in one statement; keeps what was
        written with its fingerprint and returns the jobs written."""
        if not ids:
            return set()
        table, jobs = JobQueueState._meta.db_table, Job._meta.db_table
        # The rows travel as one JSON document: an array parameter of jsonb costs more to encode than to write.
        rows = (f'jsonb_to_recordset(%s::jsonb) t ("id" bigint, "reason" text, "params" jsonb) WHERE EXISTS '  # noqa: S608
                f'(SELECT 1 FROM "{jobs}" j WHERE j."id" = t."id" AND j."status" IN '
                f'({", ".join(["%s"] * len(WAITING_STATUSES))}))')
        if new:
            sql = (f'INSERT INTO "{table}" AS q ("job_id", "wait_reason", "wait_reason_params") '  # noqa: S608
                   f'SELECT t."id", t."reason", t."params" FROM {rows} ON CONFLICT ("job_id") DO NOTHING '
                   f'RETURNING q."job_id", {MARK}')
        else:
            sql = (f'UPDATE "{table}" AS q SET "wait_reason" = t."reason", '  # noqa: S608
                   f'"wait_reason_params" = t."params" FROM {rows} AND q."job_id" = t."id" '
                   f'RETURNING q."job_id", {MARK}')
        document = json.dumps([{"id": i, "reason": values[i][0], "params": jsonable(values[i][1])} for i in ids])
        cursor.execute(sql, [document, *WAITING_STATUSES])
        marks = cursor.fetchall()
        for job_id in ids:
            self.rows.pop(job_id, None)
        for job_id, mark in marks:
            self.rows[job_id] = (mark, values[job_id])
        return {job_id for job_id, _mark in marks}


#: This process's kept reasons (a worker runs one pass at a time).
KEPT = KeptReasons()


def _store_here(values: Reasons) -> tuple[dict[int, tuple[str, bool]], int]:
    """``store`` for a database without PostgreSQL's fingerprints (the embedded demo's SQLite): the stored rows of
    the jobs are read and compared in Python, with the same answer."""
    found, new, changed = {}, [], []
    for job_id, status, *state in Job.objects.filter(pk__in=values, status__in=WAITING_STATUSES).values_list(
            "id", "status", *(f"queue_state__{name}" for name in REASON_FIELDS), "queue_state__job_id"):
        stored = tuple(state[:-1]) if state[-1] is not None else None
        found[job_id] = (status, stored is None or stored[0] != values[job_id][0])
        row = JobQueueState(job_id, values[job_id][0], jsonable(values[job_id][1]))
        if stored is None:
            new.append(row)
        elif stored != (row.wait_reason, row.wait_reason_params):  # a steady queue writes nothing
            changed.append(row)
    bulk_insert(JobQueueState, new)
    bulk_set(JobQueueState, changed, REASON_FIELDS)
    return found, len(new) + len(changed)


def jsonable(params: dict) -> dict:
    """A reason's numbers as JSON stores them: an infinite estimate or count (none known) is null. Done only for
    the rows written: the kept reasons compare what the engine gave."""
    return {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in params.items()}


def place_rows(places: list[tuple[int, int, int, float | None, float | None, float | None]],
               models: dict[int, str]) -> list[tuple[int, ...]]:
    """``PLACE_FIELDS`` rows from the pass's ``places`` ((job id, position, position in tenant, estimate, earliest,
    latest) of every cluster) and each job's GPU model (``models``): a job's place among the jobs waiting for its
    model is counted over every cluster, in the order each cluster's pass considers them (position, then the
    job's id: positions tie only across clusters)."""
    ranked = sorted(places, key=lambda p: (models[p[0]], p[1], p[0]))
    by_model, previous, rows = 0, None, []
    append = rows.append
    for job_id, position, tenant_position, estimate, earliest, latest in ranked:  # unpacked: 10,000 rows a pass
        model = models[job_id]
        by_model = by_model + 1 if model == previous else 1
        previous = model
        append((job_id, position, tenant_position, by_model, _ms(estimate), _ms(earliest), _ms(latest)))
    return rows


def _ms(timestamp: float | None) -> int:
    return round(timestamp * 1000) if timestamp is not None and math.isfinite(timestamp) else NO_TIME


def write_table(rows: list[tuple[int, ...]], now: datetime) -> bool:
    """Write the pass's ``rows`` as the queue table unless every place is the same and every estimate within
    the tolerance of the stored one; says whether it wrote."""
    stored = queue_places(fresh=True)  # decoded when this process wrote or read it last
    if stored.token and not _moved(stored, rows, tolerance() * 1000):
        return False
    data = QueuePlaces.encode(rows)
    token = uuid.uuid4().hex
    values = {"token": token, "computed_at": now, "jobs": len(rows), "places": data}
    if not QueueTable.objects.filter(pk=1).update(**values):
        QueueTable.objects.create(pk=1, **values)
    written = QueuePlaces(token, data)
    transaction.on_commit(lambda: keep_places(written))  # a pass rolled back leaves no places behind
    return True


def _moved(stored: QueuePlaces, rows: list[tuple[int, ...]], milliseconds: float) -> bool:
    if len(stored) != len(rows):
        return True
    width, numbers, places = len(PLACE_FIELDS), stored.numbers, 4  # job id and the three places
    for row in rows:
        at = stored.index.get(row[0])
        if at is None or tuple(numbers[at + 1:at + places]) != row[1:places]:
            return True
        for old, new in zip(numbers[at + places:at + width], row[places:], strict=True):
            if (old == NO_TIME) != (new == NO_TIME) or abs(old - new) > milliseconds:
                return True
    return False
