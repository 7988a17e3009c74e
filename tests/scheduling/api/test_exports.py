"""``GET /api/jobs/export/``: the job list as shown (the same jobs, order and columns as the page), as CSV and
JSON; every order is the order of the values exported; refused parameters are 400s naming them."""

import csv
import io
import json
import re

import pytest

from scheduling.jobs.columns import COLUMNS
from tests.scheduling.jobs.test_listing import login, row_ids

pytestmark = pytest.mark.django_db


def export(client, query: str):
    response = client.get(f"/api/jobs/export/?{query}")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body.decode()


def test_the_export_is_what_the_page_shows(client, shaped_world):
    query = "status=succeeded&status=failed&status=running&columns=name,exit_code,elapsed,end&sort=exit_code"
    page = login(client).get(f"/jobs/?shape=1&{query.replace(',', '&columns=')}").content.decode()
    response, text = export(client, f"{query}&format=json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = json.loads(text)
    assert data["columns"] == ["id", "name", "end", "elapsed", "exit_code"]  # the table's order
    assert [row["id"] for row in data["jobs"]] == row_ids(page)
    jobs = shaped_world["jobs"]
    alpha, bravo, charlie = data["jobs"]
    assert [alpha["id"], bravo["id"], charlie["id"]] == [jobs["alpha"].pk, jobs["bravo"].pk, jobs["charlie"].pk]
    assert alpha["exit_code"] == 0 and bravo["exit_code"] == 137 and charlie["exit_code"] is None
    assert alpha["elapsed"] == 7200 and alpha["end"] == jobs["alpha"].finished_at.isoformat()
    assert 1190 <= charlie["elapsed"] <= 1300 and charlie["end"] is None  # running: until now


def test_csv_cells_are_made_safe_and_the_header_names_the_columns(client, shaped_world):
    response, text = export(login(client), "columns=name,gpus,status&status=queued&format=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="jobs.csv"'
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["id", "name", "gpus", "status"]
    assert rows[1] == [str(shaped_world["jobs"]["formula"].pk), "'=HYPERLINK(\"x\")", "1", "queued"]
    assert rows[2][1] == "delta" and len(rows) == 3


def test_without_columns_or_order_the_remembered_ones(client, shaped_world):
    login(client).get("/jobs/?shape=1&columns=wait&columns=model&sort=model")
    data = json.loads(export(client, "format=json")[1])
    assert data["columns"] == ["id", "model", "wait"]
    models = [row["model"] for row in data["jobs"]]
    assert models == sorted(models) and shaped_world["jobs"]["hidden"].pk not in [r["id"] for r in data["jobs"]]


@pytest.mark.parametrize("key", sorted(set(COLUMNS) - {"project", "task_type", "position", "reason"}))
@pytest.mark.parametrize("descending", [False, True])
def test_every_order_is_the_order_of_its_values(client, shaped_world, key, descending):
    """Ascending or descending by the values exported, empty ones last either way, the newest job first among
    equals (the columns left out show one value for all these jobs)."""
    sort = f"-{key}" if descending else key
    data = json.loads(export(login(client), f"columns={key}&sort={sort}&format=json")[1])
    got = [(row[key], row["id"]) for row in data["jobs"]]
    if key in ("elapsed", "wait"):  # follow the clock: the order, not the second, is compared
        got = [(round(value / 60) if value is not None else None, job) for value, job in got]
    newest_first = sorted(got, key=lambda pair: -pair[1])
    given = sorted((pair for pair in newest_first if pair[0] not in (None, "")), key=lambda pair: pair[0],
                   reverse=descending)
    assert got == given + [pair for pair in newest_first if pair[0] in (None, "")]
    assert len(got) == 5


@pytest.mark.parametrize(("query", "field", "words"), [
    ("format=xml", "format", "Give csv or json"),
    ("", "format", "Give csv or json"),
    ("format=csv&columns=name,nope", "columns", "Unknown column nope"),
    ("format=json&sort=-nope", "sort", "Unknown order -nope"),
    ("format=json&sort=name&sort=end", "sort", "Give sort once"),
    ("format=csv&mine=on", "mine", "Give true or false"),
])
def test_refused_parameters_are_400s_naming_them(client, shaped_world, query, field, words):
    response = login(client).get(f"/api/jobs/export/?{query}")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert list(response.json()) == [field] and words in response.json()[field][0]


def test_the_api_job_list_orders_by_a_column(client, shaped_world):
    jobs = shaped_world["jobs"]
    login(client)
    listed = client.get("/api/jobs/?sort=-exit_code&status=succeeded&status=failed").json()["results"]
    assert [job["id"] for job in listed] == [jobs["bravo"].pk, jobs["alpha"].pk]
    refused = client.get("/api/jobs/?sort=upwards")
    assert refused.status_code == 400 and re.search("Unknown order upwards", refused.json()["sort"][0])
