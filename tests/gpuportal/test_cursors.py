"""The portal's PostgreSQL cursor (gpuportal/storage/cursors.py): repeated statements are prepared, and a
statement with more parameters than the protocol carries still runs."""

import pytest
from django.db import connection

from gpuportal.storage.cursors import MAX_BOUND_PARAMETERS, BoundCursor
from scheduling.models import Job

pytestmark = pytest.mark.django_db


def _prepared() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return cursor.fetchone()[0]


def test_a_query_run_again_and_again_is_prepared_once(settings):
    threshold = settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"]
    connection.ensure_connection()
    assert isinstance(connection.connection.cursor(), BoundCursor)
    before = _prepared()
    for n in range(threshold + 3):
        assert not Job.objects.filter(pk=-n, status="queued").exists()
    assert _prepared() == before + 1  # one statement, whatever the values


def test_a_statement_with_more_parameters_than_the_protocol_carries_is_merged_on_the_client():
    ids = list(range(1, 70_001))
    assert len(ids) > 65_535 > MAX_BOUND_PARAMETERS
    assert Job.objects.filter(pk__in=ids).count() == 0
    with connection.cursor() as cursor:  # text with a percent sign survives the merge
        cursor.execute("SELECT %s || '%%' FROM generate_series(1, 1) WHERE 1 <> ALL(ARRAY[" +
                       ",".join(["%s"] * len(ids)) + "])", ["100", *(-n for n in ids)])
        assert cursor.fetchone() == ("100%",)
