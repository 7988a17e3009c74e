"""The demo's seeded months, made once per test session and shared by the tests that read them.

Seeding two months of history and metering takes half a minute; several tests read the same seed and none of
them may see another's changes. So the first of them seeds, and the rows of every table are kept (``COPY … TO``);
each later one gets the same rows back (``COPY … FROM``, triggers and constraints set aside as the suite's
teardown does for its ``DELETE``, sequences moved past the ids) after the previous test's rows are gone. The
rows are the seed's to the byte, so a test reads what it would have seeded itself. Where the copy cannot be
trusted to come back the same (another database, a session that may not set triggers aside, the content types
made again by a flush since), it seeds again.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management.color import no_style
from django.db import connection, transaction

from demo.metering import seed_metering
from demo.world import history_start, seed_history, seed_structure
from fleet.agents import polling
from tests.conftest import STATIC_TABLES, _static_rows

#: table -> its rows as COPY wrote them, and the digest of the kept tables they refer to (content types...)
_SEEDED: dict = {}


def _tables() -> list[str]:
    return [t for t in connection.introspection.django_table_names(only_existing=True, include_views=False)
            if t not in STATIC_TABLES]


def _can_copy(cursor) -> bool:
    if connection.vendor != "postgresql":
        return False
    cursor.execute("SELECT current_setting('is_superuser') = 'on'")
    return bool(cursor.fetchone()[0])


def _keep() -> None:
    rows = {}
    with connection.cursor() as cursor:
        if not _can_copy(cursor):
            return
        for table in _tables():
            name = connection.ops.quote_name(table)
            with cursor.cursor.copy(f"COPY {name} TO STDOUT") as copy:
                data = b"".join(bytes(block) for block in copy)
            if data:
                rows[table] = data
        _SEEDED.update(rows=rows, static=_static_rows(cursor))


def _restore() -> bool:
    """The kept rows back, when they can be trusted to be the seed's; False when the caller must seed."""
    with transaction.atomic(), connection.cursor() as cursor:
        if not _SEEDED or not _can_copy(cursor) or _static_rows(cursor) != _SEEDED["static"]:
            return False
        cursor.execute("SET LOCAL session_replication_role = replica")
        for table, data in _SEEDED["rows"].items():
            with cursor.cursor.copy(f"COPY {connection.ops.quote_name(table)} FROM STDIN") as copy:
                copy.write(data)
        for statement in connection.ops.sequence_reset_sql(no_style(), apps.get_models()):
            cursor.execute(statement)
    polling._SIMULATED.clear()  # the same node ids again: no simulated agent of an earlier test answers for them
    return True


@pytest.fixture
def demo_months(transactional_db):
    """The demo's structure, its history from the first day of the month two months back (``history_start``)
    and the metering of those months, as ``seed_demo`` seeds them."""
    if _restore():
        return
    world = seed_structure()
    start = history_start()
    seed_history(world["users"], start)
    seed_metering(start)
    _keep()
