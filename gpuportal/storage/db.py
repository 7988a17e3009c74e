"""Bulk-write helpers shared by the apps (no domain rules here).

Django's ``bulk_update`` sends one ``CASE WHEN id = … THEN …`` per field, which PostgreSQL evaluates row by
row against every branch: 10,000 rows took 20 s. ``bulk_set`` sends ``UPDATE … FROM (VALUES …)``, one
join; ``update_grouped`` sends one plain UPDATE per distinct set of values.
"""

from __future__ import annotations

import math

from django.db import connection, connections
from django.db.models import Aggregate, FloatField


def percentile(values, q: float):
    """Linear-interpolated percentile (``q`` in 0..1) of ``values``; None for no values."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class PercentileCont(Aggregate):
    """The ``q`` percentile of a column computed where the rows are, with ``percentile``'s interpolation:
    PostgreSQL's ``percentile_cont``, and on SQLite (the embedded demo) the same rule as a Python aggregate
    registered on every connection (``register_sqlite_functions``)."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, function=SQLITE_PERCENTILE,
                           template="%(function)s(%(expressions)s, %(fraction)s)", **extra_context)


SQLITE_PERCENTILE = "gpuportal_percentile"


class _SqlitePercentile:
    def __init__(self):
        self.values, self.fraction = [], 0.5

    def step(self, value, fraction):
        self.fraction = fraction
        if value is not None:
            self.values.append(value)

    def finalize(self):
        return percentile(self.values, self.fraction)


def register_sqlite_functions(sender, connection, **kwargs) -> None:
    """``connection_created`` receiver (``GpuPortalConfig.ready``): SQLite learns ``PercentileCont``."""
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate(SQLITE_PERCENTILE, 2, _SqlitePercentile)


def database_url() -> str:
    """This process's PostgreSQL database as a ``DATABASE_URL`` (trust authentication, no password): for the
    processes a benchmark or a test starts on the same database (gunicorn, Celery workers and beat)."""
    db = connection.settings_dict
    return (f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
            f"{db['NAME']}")


def _rows(objects, columns):
    real = connections[connection.alias]  # the proxy would look the thread's connection up for every value
    return ([c.get_db_prep_save(getattr(obj, c.attname), real) for c in columns] for obj in objects)


def bulk_set(model, objects, fields: list[str]) -> int:
    """Write ``fields`` of ``objects`` (same model, saved rows): on PostgreSQL, COPY into a temporary table
    and one ``UPDATE … FROM`` it."""
    objects = list(objects)
    if not objects:
        return 0
    if connection.vendor != "postgresql" or len(objects) < 50:
        model.objects.bulk_update(objects, fields, batch_size=500)
        return len(objects)
    table = model._meta.db_table
    pk = model._meta.pk
    columns = [pk] + [model._meta.get_field(f) for f in fields]
    definitions = ", ".join(f'"{c.column}" {c.db_type(connection)}' for c in columns)
    names = ", ".join(f'"{c.column}"' for c in columns)
    assignments = ", ".join(f'"{c.column}" = v."{c.column}"' for c in columns[1:])
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE TEMPORARY TABLE "bulk_set_tmp" ({definitions}) ON COMMIT DROP')
        with cursor.cursor.copy(f'COPY "bulk_set_tmp" ({names}) FROM STDIN') as copy:
            for row in _rows(objects, columns):
                copy.write_row(row)
        cursor.execute(f'UPDATE "{table}" AS t SET {assignments} FROM "bulk_set_tmp" AS v '  # noqa: S608
                       f'WHERE t."{pk.column}" = v."{pk.column}"')
        cursor.execute('DROP TABLE "bulk_set_tmp"')
    return len(objects)


def bulk_insert(model, objects, batch_size: int = 2000) -> None:
    """Insert rows whose ids nobody needs back (event logs): COPY on PostgreSQL, bulk_create elsewhere."""
    objects = list(objects)
    if connection.vendor != "postgresql" or len(objects) < 50:
        model.objects.bulk_create(objects, batch_size=batch_size)
        return
    columns = [f for f in model._meta.concrete_fields if not (f.primary_key and f.auto_created)]
    for obj in objects:
        for field in columns:  # auto_now_add and similar defaults
            if getattr(obj, field.attname) is None and field.has_default():
                setattr(obj, field.attname, field.get_default())
    names = ", ".join(f'"{c.column}"' for c in columns)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f'COPY "{model._meta.db_table}" ({names}) FROM STDIN') as copy:
        for row in _rows(objects, columns):
            copy.write_row(row)


def bulk_insert_with_ids(model, objects, batch_size: int = 2000) -> list:
    """Insert new rows and give each object its id (what ``bulk_create`` does): on PostgreSQL the ids are taken
    from the table's sequence in one query and the rows COPYed, several times faster than ``bulk_create``'s
    INSERT for thousands of rows (a 10,000-task array); ``bulk_create`` elsewhere and for a few rows."""
    objects = list(objects)
    if connection.vendor != "postgresql" or len(objects) < 50:
        return model.objects.bulk_create(objects, batch_size=batch_size)
    pk = model._meta.pk
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [model._meta.db_table, pk.column, len(objects)])
        for obj, (value,) in zip(objects, cursor.fetchall(), strict=True):
            setattr(obj, pk.attname, value)
    columns = list(model._meta.concrete_fields)  # the id too: taken above
    for obj in objects:
        for field in columns:  # auto_now(_add) stamps and the defaults bulk_create would apply
            setattr(obj, field.attname, field.pre_save(obj, add=True))
        obj._state.adding, obj._state.db = False, connection.alias
    names = ", ".join(f'"{c.column}"' for c in columns)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f'COPY "{model._meta.db_table}" ({names}) FROM STDIN') as copy:
        for row in _rows(objects, columns):
            copy.write_row(row)
    return objects


def update_grouped(model, objects, fields: list[str]) -> int:
    """Save ``fields`` of many rows with one UPDATE per distinct set of values.

    After a poll most nodes carry the same values (healthy, no missed poll, same time and versions), so this
    is a handful of statements where ``bulk_update`` would send one huge CASE per field.
    """
    groups: dict[tuple, list[int]] = {}
    for obj in objects:
        groups.setdefault(tuple(getattr(obj, f) for f in fields), []).append(obj.pk)
    for values, ids in groups.items():
        for start in range(0, len(ids), 5000):
            model.objects.filter(pk__in=ids[start:start + 5000]).update(**dict(zip(fields, values, strict=True)))
    return len(groups)
