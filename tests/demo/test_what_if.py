"""The demo's history answers what-if questions: its last closed month with one more H100 node, and the backtest
of the fleet change its history holds (two H100 nodes that joined in the middle of the last closed month): the
weeks before replayed with those nodes added, beside the weeks after as they really were."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from demo.world import ADDED_MID_MONTH, fleet_change
from fleet.models import Node
from metering.models import WhatIfRun
from metering.reports import monthly as reports
from metering.whatif import services
from scheduling.models import JobAllocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_last_closed_month_answers_add_8_h100_with_figures(demo_months):
    month = reports.last_closed_month()
    out = StringIO()
    call_command("what_if", "--month", f"{month:%Y-%m}", "--add", "H100=8", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["month"] == f"{month:%Y-%m}" and data["change"]["add"] == {"H100": 8}
    assert data["changed_capacity_gpus"]["H100"] == data["capacity_gpus"]["H100"] + 8
    for side in ("actual", "baseline", "changed"):
        h100 = data[side]["by_model"]["H100"]
        assert h100["jobs"] > 50 and h100["p95_wait_seconds"] is not None, (side, h100)
        assert set(data[side]["by_tenant"]) >= {"nlp", "vision"}
    # the replay ran every job the month had, for the GPU-hours they really held
    assert data["baseline"]["total"]["jobs"] == data["actual"]["total"]["jobs"]
    assert data["baseline"]["total"]["gpu_hours"] == pytest.approx(data["actual"]["total"]["gpu_hours"], rel=0.02)
    error = data["baseline_error"]["by_model"]["H100"]["p95_wait_seconds"]
    assert error["error"] == pytest.approx(error["simulated"] - error["actual"], abs=0.1)
    # more GPUs never make the replayed waits longer
    assert data["changed"]["by_model"]["H100"]["median_wait_seconds"] <= data["baseline"]["by_model"]["H100"][
        "median_wait_seconds"]
    assert data["effects"] and all(effect["text"] for effect in data["effects"])


def test_the_backtest_of_the_mid_month_fleet_change_compares_the_prediction_with_the_weeks_after(demo_months, client):
    joined, cordoned = fleet_change()
    added = Node.objects.filter(name__in=ADDED_MID_MONTH)
    assert {node.created for node in added} == {joined}
    # the history really used them after they joined, never before
    used = JobAllocation.objects.filter(gpu__node__in=added)
    assert used.exists() and not used.filter(allocated_at__lt=joined).exists()
    assert not used.filter(allocated_at__gte=cordoned).exists()

    (run,) = services.start_backtests(reports.last_closed_month())
    assert run.status == WhatIfRun.Status.DONE, run.error
    result = run.result
    assert result["change"]["add"] == {"H100": 16}
    before, predicted, after = (result[k]["by_model"]["H100"] for k in ("before", "predicted", "after"))
    assert before["jobs"] == predicted["jobs"] and after["jobs"] > 0
    # the prediction: the weeks before on 16 more GPUs hold a smaller share of a bigger fleet
    assert predicted["allocation"] < before["allocation"]
    assert predicted["gpu_hours"] == pytest.approx(before["gpu_hours"], rel=0.02)
    # and its error against what really happened after the change, per figure
    error = result["prediction_error"]["by_model"]["H100"]
    for figure in ("median_wait_seconds", "p95_wait_seconds", "allocation"):
        assert error[figure]["simulated"] == predicted[figure] and error[figure]["actual"] == after[figure]
        assert error[figure]["error"] == pytest.approx(predicted[figure] - after[figure], abs=0.01)
    # the replay of the weeks after, as they were, measures the method's own error on the same weeks
    assert result["replay_error_after"]["by_model"]["H100"]["p95_wait_seconds"]["actual"] == after["p95_wait_seconds"]
    # its page shows the three sides per model
    client.login(username="dave", password="demo")
    page = client.get(f"/reports/what-if/{run.pk}/").content.decode()
    assert "before, replayed with the change" in page and "<th>H100</th>" in page
