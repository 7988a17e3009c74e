"""One percentile rule: ``gpuportal.storage.db.percentile`` in Python, ``PercentileCont`` in the database — PostgreSQL's
``percentile_cont`` and, on the embedded demo's SQLite, the same rule registered as an aggregate."""

import sqlite3
from datetime import date, timedelta
from types import SimpleNamespace

import pytest

from gpuportal.storage.db import SQLITE_PERCENTILE, PercentileCont, percentile, register_sqlite_functions
from metering.models import CapacityDaily

VALUES = [3.0, 1.0, 10.0, 4.0, 7.5]


def test_sqlite_aggregate_interpolates_as_the_python_rule():
    raw = sqlite3.connect(":memory:")
    register_sqlite_functions(None, SimpleNamespace(vendor="sqlite", connection=raw))
    raw.execute("CREATE TABLE t (v REAL)")
    raw.executemany("INSERT INTO t VALUES (?)", [(v,) for v in [*VALUES, None]])
    for q in (0.0, 0.5, 0.95, 1.0):
        (value,) = raw.execute(f"SELECT {SQLITE_PERCENTILE}(v, ?) FROM t", (q,)).fetchone()
        assert value == pytest.approx(percentile(VALUES, q))
    assert percentile(VALUES, 0.5) == 4.0 and percentile([], 0.5) is None


@pytest.mark.django_db
def test_postgresql_percentile_cont_agrees():
    CapacityDaily.objects.bulk_create(CapacityDaily(day=date(2026, 10, 1) + timedelta(days=i), gpu_model="A100",
                                                    capacity_gpus=8, peak_demand_gpus=v) for i, v in enumerate(VALUES))
    for q in (0.5, 0.95):
        found = CapacityDaily.objects.aggregate(p=PercentileCont("peak_demand_gpus", q))["p"]
        assert found == pytest.approx(percentile(VALUES, q))
