"""Queries of one shape whatever their values, compiled to SQL once per process and database.

Why: with the cluster moving, Django compiling querysets into SQL held 29 % of the web processes' Python time
(py-spy under ``bench_portal --churn``), and the queries every signed-in request runs (the reader's platform
roles and memberships, ``tenants.access``) are the same SQL for every reader.

``PlannedRows(build, samples)`` compiles ``build(*values)`` for two sets of sample values the first time it is
asked on a database, finds where each value went among the statement's parameters, and from then on binds the
values it is asked for there. It refuses, when it plans (so that a test or the first request names the query,
never a wrong answer):

* a query whose SQL depends on its values (the two samples' SQL differ: a list whose length varies, a value
  written into the SQL);
* a parameter that is neither one of the values nor the same in both samples, or a value found in no parameter;
* a column that Django converts as it reads it (a JSON field, a count, dates on SQLite): the rows are handed back
  as the database driver reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

#: Samples for a query of one id: numbers no other parameter of such a query holds.
ONE_ID = ((987654321,), (987654322,))


@dataclass(frozen=True)
class _Plan:
    sql: str
    #: per parameter: (True, the index of the value bound there) or (False, the constant the query always sends)
    slots: tuple[tuple[bool, object], ...]


class PlannedRows:
    """The rows of ``build(*values)`` (a ``values_list`` queryset), from SQL compiled once per process."""

    def __init__(self, build: Callable[..., QuerySet], samples: tuple[Sequence, Sequence]):
        self._build, self._samples = build, samples
        self._name = getattr(build, "__qualname__", repr(build))  # what a refusal names
        self._plans: dict[str, _Plan] = {}  # by the database's vendor: the SQL is its dialect

    def __call__(self, *values) -> list[tuple]:
        connection = connections[DEFAULT_DB_ALIAS]
        plan = self._plans.get(connection.vendor)
        if plan is None:  # two threads may both plan: the same plan, the last one kept
            plan = self._plans[connection.vendor] = self.plan(connection)
        params = [values[ref] if is_value else ref for is_value, ref in plan.slots]
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, params)
            return cursor.fetchall()

    def plan(self, connection) -> _Plan:
        (sql, first), (other_sql, second) = (self._compiled(values, connection) for values in self._samples)
        if sql != other_sql or len(first) != len(second):
            raise ImproperlyConfigured(f"{self._name}: its SQL depends on its values; it cannot be planned")
        slots, found = [], set()
        for a, b in zip(first, second, strict=True):
            if a == b:
                slots.append((False, a))
                continue
            index = [i for i, (x, y) in enumerate(zip(*self._samples, strict=True)) if x == a and y == b]
            if len(index) != 1:
                raise ImproperlyConfigured(f"{self._name}: a parameter ({a!r}, then {b!r}) is none of its values")
            slots.append((True, index[0]))
            found.add(index[0])
        if len(found) != len(self._samples[0]):
            raise ImproperlyConfigured(f"{self._name}: a value reaches no parameter")
        return _Plan(sql, tuple(slots))

    def _compiled(self, values: Sequence, connection) -> tuple[str, list]:
        compiler = self._build(*values).query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        if compiler.get_converters([column for column, _sql, _alias in compiler.select]):
            raise ImproperlyConfigured(f"{self._name}: Django converts a column it reads; it cannot be planned")
        return sql, list(params)
