"""What-if runs over the API, on the page and from ``manage.py what_if``: the same options, the same refusals,
managers and platform admins only, the run kept and listed."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from fleet.models import Node
from metering.models import WhatIfRun
from tests.metering.helpers import at, gpus_of, ran_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def october(world, users):
    """Two H100 jobs of October 2025 on one node: the second waited three hours for the first."""
    Node.objects.update(created=at("2025-01-01"))
    h100 = gpus_of("dc1-r1-h100-01", 8)
    ran_job(users["bob"], "nlp/llm-pretrain", h100, at("2025-10-05T00:00"), at("2025-10-05T03:00"), task="training",
            wait=at("2025-10-05T00:00") - at("2025-10-04T23:59"))
    return users


def test_the_api_starts_lists_and_shows_a_run_with_its_figures(october, api):
    started = api("dave").post("/api/what-if/", {"month": "2025-10", "add": ["H100=8"]}, format="json")
    assert started.status_code == 202, started.content
    run_id = started.json()["id"]
    detail = api("dave").get(f"/api/what-if/{run_id}/").json()
    assert detail["status"] == "done" and detail["progress"] == 1.0
    result = detail["result"]
    assert result["month"] == "2025-10" and result["change"]["add"] == {"H100": 8}
    for side in ("baseline", "changed", "actual"):
        figures = result[side]["by_model"]["H100"]
        assert {"jobs", "median_wait_seconds", "p95_wait_seconds", "gpu_hours"} <= set(figures)
        assert figures["jobs"] == 1
        assert set(result[side]["by_tenant"]) == {"nlp"}
    assert result["baseline_error"]["by_model"]["H100"]["gpu_hours"]["actual"] == 24.0
    assert [row["id"] for row in api("admin").get("/api/what-if/").json()] == [run_id]


def test_the_api_refuses_bad_options_naming_the_field_and_non_managers(october, api):
    bad = api("dave").post("/api/what-if/", {"month": "2025-10", "add": ["H100=many"]}, format="json")
    assert bad.status_code == 422 and "H100=many" in json.dumps(bad.json())  # the service's refusal: the field's
    assert "add" in json.dumps(bad.json())
    open_month = api("dave").post("/api/what-if/", {"month": "2099-01"}, format="json")
    assert open_month.status_code == 422 and "still open" in json.dumps(open_month.json())
    assert api("dave").post("/api/what-if/", {"month": 202510}, format="json").status_code == 400
    assert api("alice").get("/api/what-if/").status_code == 403
    assert api("alice").post("/api/what-if/", {"month": "2025-10"}, format="json").status_code == 403
    assert api("dave").get("/api/what-if/999999/").status_code == 404
    assert not WhatIfRun.objects.exists()


def test_the_page_runs_a_change_shows_its_tables_and_keeps_what_was_typed_on_errors(october, client):
    client.login(username="dave", password="demo")
    empty = client.get("/reports/what-if/")
    assert empty.status_code == 200 and "No what-if run yet." in empty.content.decode()
    refused = client.post("/reports/what-if/", {"month": "2025-10", "add": "H100=eight", "quota": "vision:H100=8"})
    text = refused.content.decode()
    assert refused.status_code == 200 and 'value="H100=eight"' in text and 'id="error-add"' in text
    done = client.post("/reports/what-if/", {"month": "2025-10", "add": "H100=8"}, follow=True)
    page = done.content.decode()
    assert done.status_code == 200 and "By GPU model" in page and "By tenant" in page
    assert "nlp unchanged" in page or "for nlp" in page
    assert "/reports/what-if/" in page
    client.logout()
    client.login(username="alice", password="demo")
    assert client.get("/reports/what-if/").status_code == 403


def test_the_command_prints_one_json_object_and_refuses_bad_options(october):
    out = StringIO()
    call_command("what_if", "--month", "2025-10", "--add", "H100=8", "--half-life-hours", "24", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert {"month", "change", "baseline", "changed", "actual", "baseline_error"} <= set(data)
    assert data["change"]["half_life_hours"] == 24 and data["changed"]["by_tenant"]["nlp"]["jobs"] == 1
    assert WhatIfRun.objects.get(pk=data["id"]).status == WhatIfRun.Status.DONE
    with pytest.raises(CommandError, match="--add"):
        call_command("what_if", "--month", "2025-10", "--add", "B200=8")
    with pytest.raises(CommandError, match="--month"):
        call_command("what_if", "--month", "2099-01")
