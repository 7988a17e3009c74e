"""Writing every waiting job's queue state in a few statements, comparing where the rows are.

Each pass gives every waiting job a reason, positions and an estimate, and most of them change a little every pass
(an estimate moves with the clock, a position when a job ahead starts). Reading ten thousand stored states back
into Python to compare them cost more than writing them: here the new values are copied into a temporary table
once (COPY), one query says which jobs still wait and whose reason changed (those get an event), one update
writes the rows whose values differ and leaves the others alone, and one insert adds the new ones. PostgreSQL
only: the caller compares in Python elsewhere (the embedded demo's few dozen jobs), by the same rule (``differs``).

A row differs when what a reader sees changed: the reason or its numbers, a position, an estimate that appeared or
vanished, or one that moved by more than ``SCHEDULER["ESTIMATE_TOLERANCE_SECONDS"]`` (60). The pages show an
estimate to the minute (``Y-m-d H:i``) and the API is read by people and scripts at the same precision, while every
estimate drifts with the clock by the seconds between two passes: without the tolerance nearly every waiting row
was written every pass. So a stored estimate is always within the tolerance of the engine's latest one.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.conf import settings
from django.db import connection

from scheduling.models import WAITING_STATUSES, Job, JobQueueState

#: Columns of the temporary table, in the order of the rows ``store`` is given (the job id first).
COLUMNS = ("job_id", "wait_reason", "wait_reason_params", "queue_position", "tenant_queue_position",
           "estimated_start", "earliest_start", "latest_start")
#: The columns compared exactly; the others (the times) within the tolerance.
EXACT = COLUMNS[1:5]
TIMES = COLUMNS[5:]


def tolerance() -> float:
    """Seconds a stored estimate may lag the engine's before the row is written again."""
    return float(settings.SCHEDULER["ESTIMATE_TOLERANCE_SECONDS"])


def differs(stored: tuple, new: tuple, seconds: float) -> bool:
    """Whether a stored queue state (``COLUMNS[1:]``, the job id left out) must be replaced by ``new``: the rule
    the update below says in SQL, for the callers that compare in Python."""
    exact = len(EXACT)
    return stored[:exact] != new[:exact] or any(_moved(a, b, seconds) for a, b in zip(
        stored[exact:], new[exact:], strict=True))


def _moved(stored: datetime | None, new: datetime | None, seconds: float) -> bool:
    if stored is None or new is None:
        return (stored is None) != (new is None)
    return abs((stored - new).total_seconds()) > seconds


def _differs_sql() -> str:
    """``differs`` as a condition on the stored row ``q`` and the new one ``t`` (the tolerance a parameter, once per
    time column)."""
    old = ", ".join(f'q."{name}"' for name in EXACT)
    new = ", ".join(f't."{name}"' for name in EXACT)
    exact = f"({old}) IS DISTINCT FROM ({new})"
    times = [f'(q."{n}" IS NULL) <> (t."{n}" IS NULL) OR abs(extract(epoch FROM q."{n}" - t."{n}")) > %s'
             for n in TIMES]
    return " OR ".join([exact, *times])


def store(rows: list[tuple]) -> tuple[dict[int, tuple[str, bool]], int]:
    """Write the queue states of ``rows`` ((job id, reason, params, position, position in tenant, estimate,
    earliest, latest)) for the jobs that still wait; returns, for each of them, its status and whether its
    reason changed (or it had no state yet), and how many rows were written."""
    if not rows:
        return {}, 0
    table, jobs = JobQueueState._meta.db_table, Job._meta.db_table
    fields = [JobQueueState._meta.get_field(name) for name in COLUMNS]
    definitions = ", ".join(f'"{f.column}" {f.db_type(connection)}' for f in fields)
    names = ", ".join(f'"{name}"' for name in COLUMNS)
    updates = ", ".join(f'"{name}" = t."{name}"' for name in COLUMNS[1:])
    waiting = ", ".join(["%s"] * len(WAITING_STATUSES))
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE TEMPORARY TABLE "queue_states_tmp" ({definitions}) ON COMMIT DROP')
        with cursor.cursor.copy(f'COPY "queue_states_tmp" ({names}) FROM STDIN') as copy:
            for job_id, reason, params, *rest in rows:
                copy.write_row((job_id, reason, json.dumps(params), *rest))
        cursor.execute(
            f'SELECT t."job_id", j."status", q."job_id" IS NULL, q."wait_reason" <> t."wait_reason" '  # noqa: S608
            f'FROM "queue_states_tmp" t JOIN "{jobs}" j ON j."id" = t."job_id" '
            f'LEFT JOIN "{table}" q ON q."job_id" = t."job_id" WHERE j."status" IN ({waiting})',
            list(WAITING_STATUSES))
        found, new = {}, []
        for job_id, status, first, changed in cursor.fetchall():
            found[job_id] = (status, bool(first or changed))
            if first:
                new.append(job_id)
        # An update of the rows that differ, not an upsert: ``ON CONFLICT DO UPDATE ... WHERE`` locks (and so
        # writes) every row it skips, and a queue whose only change is the clock skips them all.
        cursor.execute(
            f'UPDATE "{table}" AS q SET {updates} FROM "queue_states_tmp" t '  # noqa: S608
            f'JOIN "{jobs}" j ON j."id" = t."job_id" '
            f'WHERE q."job_id" = t."job_id" AND j."status" IN ({waiting}) AND ({_differs_sql()})',
            [*WAITING_STATUSES, *[tolerance()] * len(TIMES)])
        written = cursor.rowcount
        if new:  # the jobs without a state yet (the query above found them still waiting)
            cursor.execute(
                f'INSERT INTO "{table}" ({names}) SELECT {", ".join(f"t.{n}" for n in COLUMNS)} '  # noqa: S608
                f'FROM "queue_states_tmp" t JOIN unnest(%s::bigint[]) n ("id") ON n."id" = t."job_id" '  # a hash join
                f'ON CONFLICT ("job_id") DO NOTHING', [new])
            written += cursor.rowcount
        cursor.execute('DROP TABLE "queue_states_tmp"')
    return found, written
