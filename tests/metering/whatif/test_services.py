"""What-if runs on a month built here: the replay against what really happened, a change's effect, the sizing the
capacity advice cites, and the run stored with its progress."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from fleet.models import Node
from metering.models import WhatIfRun
from metering.reports import monthly as reports
from metering.review.document import build_review
from metering.tasks import freeze_last_month
from metering.usage.rollup import rollup
from metering.whatif import services
from metering.whatif.change import Change, QuotaChange, parse_change
from tenants.models import Quota
from tests.metering.helpers import at, gpus_of, ran_job

pytestmark = pytest.mark.django_db

MONTH = at("2025-10-01").date()


@pytest.fixture
def crunch(world, users, settings):
    """October 2025 on the lab's four H100 nodes: every day at 09:00 six 8-GPU training jobs arrive at once and
    run 4 hours; the two that find no node wait for the first four to end. The nodes were there before."""
    settings.METERING = {**settings.METERING, "WHAT_IF_TARGET_P95_HOURS": 1.0,
                         "WHAT_IF_PRODUCTION_TASK_TYPES": ("training", "inference")}
    Node.objects.update(created=at("2025-01-01"))
    Quota.objects.filter(gpu_model="H100").update(limit_gpus=32)  # the quotas are not what holds them back
    nodes = ["dc1-r1-h100-01", "dc1-r1-h100-02", "dc1-r2-h100-03", "dc1-r2-h100-04"]
    for day in range(1, 11):
        nine = at(f"2025-10-{day:02d}T09:00")
        for k in range(6):
            start = nine if k < 4 else nine + timedelta(hours=4)
            ran_job(users["bob"] if k % 2 else users["alice"], "nlp/llm-pretrain" if k % 2 else "vision/detection",
                    gpus_of(nodes[k % 4], 8), start, start + timedelta(hours=4), task="training",
                    wait=start - nine)
    return users


def test_the_baseline_replay_matches_the_real_month_and_an_added_node_shortens_the_waits(crunch):
    result = services.run_month(MONTH, Change(add={"H100": 8}))
    actual, baseline, changed = (result[k]["by_model"]["H100"] for k in ("actual", "baseline", "changed"))
    assert actual["jobs"] == baseline["jobs"] == changed["jobs"] == 60
    assert actual["p95_wait_seconds"] == pytest.approx(4 * 3600, rel=0.01)
    # the engine does what really happened: two jobs a day wait for a node, about four hours
    assert baseline["p95_wait_seconds"] == pytest.approx(actual["p95_wait_seconds"], abs=300)
    assert baseline["gpu_hours"] == pytest.approx(actual["gpu_hours"], rel=0.01)
    error = result["baseline_error"]["by_model"]["H100"]["p95_wait_seconds"]
    assert abs(error["error"]) <= 300 and error["actual"] == actual["p95_wait_seconds"]
    # one more node of 8 runs a fifth job at once; the sixth still waits
    assert result["changed_capacity_gpus"]["H100"] == result["capacity_gpus"]["H100"] + 8
    assert changed["median_wait_seconds"] <= baseline["median_wait_seconds"]
    assert changed["gpu_hours"] == pytest.approx(baseline["gpu_hours"], rel=0.01)
    two_nodes = services.run_month(MONTH, Change(add={"H100": 16}))
    assert two_nodes["changed"]["by_model"]["H100"]["p95_wait_seconds"] <= 120
    texts = [e["text"] for e in two_nodes["effects"]]
    assert any(t.startswith("p95 H100 wait 4.0 h → 0.0 h for") for t in texts), texts


def test_a_quota_change_holds_a_tenant_back(crunch):
    result = services.run_month(MONTH, Change(quotas=(QuotaChange("vision", "H100", 8),)))
    vision = result["changed"]["by_tenant"]["vision"]
    assert vision["p95_wait_seconds"] > result["baseline"]["by_tenant"]["vision"]["p95_wait_seconds"]


def test_the_sizing_finds_the_fewest_whole_nodes_under_the_target_and_the_advice_cites_it(crunch):
    run = services.size_month(MONTH)
    assert run.status == WhatIfRun.Status.DONE, run.error
    h100 = run.result["models"]["H100"]
    assert h100["add_gpus"] == 16 and h100["add_nodes"] == 2  # one node leaves the sixth job waiting 4 hours
    assert h100["p95_wait_seconds_after"] <= 3600
    rollup(MONTH, date(2025, 10, 31), now=at("2025-12-01"), force=True)
    data = reports.build_report(MONTH, now=at("2025-12-01"))
    (advice,) = [a for a in data["recommendations"] if a["gpu_model"] == "H100"]
    assert advice["action"] == "add" and advice["figures"]["add_gpus"] == 16
    assert advice["figures"]["what_if"] == run.pk
    assert f"what-if #{run.pk}" in advice["evidence"] and "add 16 H100 GPUs (2 nodes of 8)" in advice["evidence"]
    # the review pack quotes the same advice and shows the run it cites
    pack = build_review(MONTH, now=at("2025-12-01"))
    improvements = next(g for g in pack.groups if g.key == "improvements")
    evidence = [row[2] for row in improvements.table("recommendations").rows if row[0] == "H100"]
    assert evidence and f"what-if #{run.pk}" in evidence[0]
    what_if = improvements.table("what_if")
    assert f"#{run.pk}" in what_if.title
    (row,) = [r for r in what_if.rows if r[0] == "H100"]
    assert row[4] == 16 and row[1] == pytest.approx(h100["p95_wait_seconds"] / 3600, abs=0.01)


def test_options_are_refused_naming_the_option_and_only_managers_start_runs(crunch):
    with pytest.raises(ValidationError) as refused:
        parse_change(add=["H100=lots"], quota=["nobody:H100=8"], half_life_hours="-1")
    assert set(refused.value.message_dict) == {"add", "quota", "half_life_hours"}
    with pytest.raises(ValidationError) as unknown:
        parse_change(add=["B200=8"])
    assert "B200" in unknown.value.message_dict["add"][0]
    with pytest.raises(PermissionDenied):
        services.start(crunch["alice"], MONTH, Change())
    with pytest.raises(ValidationError):
        services.start(crunch["dave"], reports.last_closed_month() + timedelta(days=40), Change())


def test_a_started_run_is_stored_runs_to_done_and_keeps_its_figures(crunch, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = services.start(crunch["dave"], MONTH, parse_change(add=["H100=8"]))
    run.refresh_from_db()
    assert run.status == WhatIfRun.Status.DONE and run.progress == 1.0
    assert run.result["month"] == "2025-10" and run.result["change"]["add"] == {"H100": 8}
    assert run.created_by == crunch["dave"] and run.finished_at >= run.started_at


def test_freezing_the_month_that_closed_sizes_it_first_once(world):
    month = reports.last_closed_month()
    freeze_last_month()
    sized = WhatIfRun.objects.filter(month=month, kind=WhatIfRun.Kind.SIZING)
    assert [run.status for run in sized] == [WhatIfRun.Status.DONE]
    assert sized.get().result["month"] == f"{month:%Y-%m}"
    freeze_last_month()  # frozen already: no second sizing
    assert sized.count() == 1
