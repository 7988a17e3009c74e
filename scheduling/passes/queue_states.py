"""Writing what the pass says of every waiting job: its reason (a row per job, when it changes) and where it stands
and when it should start (one packed table per pass).

A reason changes for a few jobs per pass and each change is an event on the job's timeline, so reasons stay rows
(``JobQueueState``) compared where they are: the new values are copied into a temporary table (COPY), one query
says which jobs still wait and whose reason changed, one update writes the rows that differ and one insert adds
the new ones (PostgreSQL; compared in Python on the embedded demo's SQLite, by the same rule).

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

#: Columns of the temporary table, in the order of the rows ``store`` is given (the job id first).
COLUMNS = ("job_id", "wait_reason", "wait_reason_params")
#: What a waiting job's reason row holds.
REASON_FIELDS = list(COLUMNS[1:])


def tolerance() -> float:
    """Seconds a stored estimate may lag the engine's before the table is written again."""
    return float(settings.SCHEDULER["ESTIMATE_TOLERANCE_SECONDS"])


def store(values: dict[int, tuple[str, dict]]) -> tuple[dict[int, tuple[str, bool]], int]:
    """Write the reasons ``values`` ((reason, params) by job id) of the jobs that still wait; returns, for each of
    them, its status and whether its reason changed (or it had no state yet), and how many rows were written."""
    if connection.vendor != "postgresql":
        return _store_here(values)
    if not values:
        return {}, 0
    table, jobs = JobQueueState._meta.db_table, Job._meta.db_table
    fields = [JobQueueState._meta.get_field(name) for name in COLUMNS]
    definitions = ", ".join(f'"{f.column}" {f.db_type(connection)}' for f in fields)
    names = ", ".join(f'"{name}"' for name in COLUMNS)
    waiting = ", ".join(["%s"] * len(WAITING_STATUSES))
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE TEMPORARY TABLE "queue_states_tmp" ({definitions}) ON COMMIT DROP')
        with cursor.cursor.copy(f'COPY "queue_states_tmp" ({names}) FROM STDIN') as copy:
            for job_id, (reason, params) in values.items():
                copy.write_row((job_id, reason, json.dumps(params)))
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
        # writes) every row it skips, and a steady queue skips them all.
        cursor.execute(
            f'UPDATE "{table}" AS q SET "wait_reason" = t."wait_reason", '  # noqa: S608
            f'"wait_reason_params" = t."wait_reason_params" FROM "queue_states_tmp" t '
            f'JOIN "{jobs}" j ON j."id" = t."job_id" WHERE q."job_id" = t."job_id" AND j."status" IN ({waiting}) '
            f'AND (q."wait_reason", q."wait_reason_params") IS DISTINCT FROM (t."wait_reason", t."wait_reason_params")',
            list(WAITING_STATUSES))
        written = cursor.rowcount
        if new:  # the jobs without a state yet (the query above found them still waiting)
            cursor.execute(
                f'INSERT INTO "{table}" ({names}) SELECT {", ".join(f"t.{n}" for n in COLUMNS)} '  # noqa: S608
                f'FROM "queue_states_tmp" t JOIN unnest(%s::bigint[]) n ("id") ON n."id" = t."job_id" '  # a hash join
                f'ON CONFLICT ("job_id") DO NOTHING', [new])
            written += cursor.rowcount
        cursor.execute('DROP TABLE "queue_states_tmp"')
    return found, written


def _store_here(values: dict[int, tuple[str, dict]]) -> tuple[dict[int, tuple[str, bool]], int]:
    """``store`` compared in Python, for a database without COPY (the embedded demo's SQLite): the same answer."""
    found, new, changed = {}, [], []
    for job_id, status, *state in Job.objects.filter(pk__in=values, status__in=WAITING_STATUSES).values_list(
            "id", "status", *(f"queue_state__{name}" for name in REASON_FIELDS), "queue_state__job_id"):
        stored = tuple(state[:-1]) if state[-1] is not None else None
        found[job_id] = (status, stored is None or stored[0] != values[job_id][0])
        row = JobQueueState(job_id, *values[job_id])
        if stored is None:
            new.append(row)
        elif stored != values[job_id]:  # a steady queue writes nothing
            changed.append(row)
    bulk_insert(JobQueueState, new)
    bulk_set(JobQueueState, changed, REASON_FIELDS)
    return found, len(new) + len(changed)


def place_rows(places: list[tuple[int, int, int, float | None, float | None, float | None]],
               models: dict[int, str]) -> list[tuple[int, ...]]:
    """``PLACE_FIELDS`` rows from the pass's ``places`` ((job id, position, position in tenant, estimate, earliest,
    latest) of every cluster) and each job's GPU model (``models``): a job's place among the jobs waiting for its
    model is counted over every cluster, in the order each cluster's pass considers them (position, then the
    job's id: positions tie only across clusters)."""
    ranked = sorted(places, key=lambda p: (models[p[0]], p[1], p[0]))
    by_model, previous, rows = 0, None, []
    for job_id, position, tenant_position, *times in ranked:
        model = models[job_id]
        by_model = by_model + 1 if model == previous else 1
        previous = model
        rows.append((job_id, position, tenant_position, by_model, *(_ms(t) for t in times)))
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
