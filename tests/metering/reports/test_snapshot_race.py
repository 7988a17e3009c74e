"""Ten first reads of a closed month at once: none freezes, and ten parallel freezes make one snapshot."""

from concurrent.futures import ThreadPoolExecutor
from datetime import date

import pytest
from django.db import connection

from metering.models import MonthlyReport
from metering.reports import monthly as reports
from tests.factories import build_world

OCTOBER = date(2026, 10, 1)


@pytest.fixture
def world(transactional_db, settings):
    """Threads need their own connections and must see committed rows: a transactional database."""
    settings.TIME_ZONE = "UTC"
    return build_world()


def in_threads(function, count=10) -> list:
    def run(_index):
        try:
            return function()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def test_parallel_first_reads_write_nothing_and_parallel_freezes_make_one_current_snapshot(world):
    vision = world["tenants"]["vision"]
    reads = in_threads(lambda: reports.report_for(OCTOBER, vision))
    assert all(snapshot is None and data["closed"] for data, snapshot in reads)
    assert MonthlyReport.objects.count() == 0
    frozen = in_threads(lambda: reports.freeze(OCTOBER, vision).pk)
    assert len(set(frozen)) == 1
    assert MonthlyReport.objects.filter(month=OCTOBER, tenant=vision, superseded_at__isnull=True).count() == 1
    platform = in_threads(lambda: reports.freeze(OCTOBER).pk)
    assert len(set(platform)) == 1 and MonthlyReport.objects.filter(tenant=None).count() == 1


def test_the_database_refuses_a_second_current_snapshot_even_for_the_platform_report(world):
    from django.db import IntegrityError, transaction
    from django.utils import timezone

    now = timezone.now()
    MonthlyReport.objects.create(month=OCTOBER, tenant=None, data={}, generated_at=now, reason="first")
    with pytest.raises(IntegrityError), transaction.atomic():
        MonthlyReport.objects.create(month=OCTOBER, tenant=None, data={}, generated_at=now, reason="second")
    MonthlyReport.objects.create(month=OCTOBER, tenant=None, data={}, generated_at=now, reason="old",
                                 superseded_at=now)  # superseded snapshots are history, as many as there were
    assert MonthlyReport.objects.filter(month=OCTOBER, tenant=None).count() == 2
