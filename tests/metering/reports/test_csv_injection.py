"""Report and operations CSV downloads: a tenant named like a formula is written as text."""

import csv
import io
from datetime import date, timedelta

from django.utils import timezone

from metering.usage.rollup import rollup
from tests.factories import make_tenant
from tests.metering.helpers import at, gpus_of, ran_job

FORMULA = "=HYPERLINK(\"https:evil.example\";\"x\")"


def formula_tenant():
    return make_tenant(FORMULA, ["p"], {"A100": (0, 8)})


def rows_of(response) -> list[dict]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_report_csv_escapes_formula_cells(client, users):
    formula_tenant()
    ran_job(users["alice"], f"{FORMULA}/p", gpus_of("dc1-r3-a100-01", 2), at("2026-10-03T08:00"),
            at("2026-10-03T10:00"))
    rollup(date(2026, 10, 1), date(2026, 10, 31), force=True)
    client.login(username="dave", password="demo")
    names = {row["name"] for row in rows_of(client.get("/reports/2026-10/csv/by_tenant/"))}
    assert names == {"'" + FORMULA}


def test_operations_csv_escapes_formula_cells(client, users):
    formula_tenant()
    now = timezone.now()
    ran_job(users["alice"], f"{FORMULA}/p", gpus_of("dc1-r3-a100-01", 2), now - timedelta(days=2, hours=3),
            now - timedelta(days=2))
    rollup(date.today() - timedelta(days=3), date.today())
    client.login(username="dave", password="demo")
    rows = rows_of(client.get("/reports/operations/?days=7&csv=tenant_usage"))
    assert rows and {row["tenant"] for row in rows} == {"'" + FORMULA}
    cost = rows_of(client.get("/reports/operations/?days=7&csv=cost"))
    assert {row["tenant"] for row in cost} == {"'" + FORMULA}
