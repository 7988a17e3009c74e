"""Capacity planning: monthly demand per GPU model, the forecast and its backtest, and "add N by month M".

The expected figures are worked out by hand in each test, so a change of method shows up here."""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from metering import capacity_plan
from metering.models import CapacityDaily

NOW = datetime(2026, 11, 15, 12, tzinfo=ZoneInfo("UTC"))
OCTOBER = date(2026, 10, 1)


def days(model: str, month: date, demands, capacity: int, held=None, first_day: int = 1):
    """One CapacityDaily row per entry of ``demands``, from ``first_day`` of ``month`` on."""
    CapacityDaily.objects.bulk_create(
        CapacityDaily(day=month + timedelta(days=first_day - 1 + i), gpu_model=model, capacity_gpus=capacity,
                      peak_demand_gpus=demand, peak_allocated_gpus=held if held is not None else min(demand, capacity))
        for i, demand in enumerate(demands))


def by_model(result: dict) -> dict:
    return {m["gpu_model"]: m for m in result["models"]}


@pytest.fixture
def rising(world):
    """H100 p95 demand 40, 50, 64, 70 over July-October with 83 GPUs; A100 flat at 10 of 32."""
    for month, demand in zip([date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1), OCTOBER], [40, 50, 64, 70],
                             strict=True):
        days("H100", month, [demand] * 3, capacity=83, held=30)
        days("A100", month, [10] * 3, capacity=32)


def test_a_rising_demand_gives_the_hand_computed_trend_and_the_first_month_over_capacity(rising,
                                                                                         django_assert_max_num_queries):
    with django_assert_max_num_queries(3):  # the catalogue (nodes, models) and one aggregate over the window
        result = capacity_plan.plan(OCTOBER, now=NOW)
    assert result["month"] == "2026-10"
    assert result["months"] == ["2026-07", "2026-08", "2026-09", "2026-10"]
    h100 = by_model(result)["H100"]
    assert [h["demand_p95_gpus"] for h in h100["history"]] == [40, 50, 64, 70]
    assert h100["history"][0] == {"month": "2026-07", "demand_mean_gpus": 40, "demand_p95_gpus": 40,
                                  "held_mean_gpus": 30, "capacity_gpus": 83, "days": 3}
    # x = 0..3, mean x 1.5, mean y 56: slope = (24 + 3 + 4 + 21) / 5 = 10.4, intercept 56 - 15.6 = 40.4.
    assert h100["method"] == "linear" and h100["trend_per_month"] == 10.4
    assert h100["forecast"] == [{"month": "2026-11", "demand_gpus": 82.0}, {"month": "2026-12", "demand_gpus": 92.4},
                                {"month": "2027-01", "demand_gpus": 102.8}]
    # November (82.0) still fits in 83; December is 9.4 over: two nodes of 8 GPUs.
    assert h100["capacity_gpus"] == 83 and h100["gpus_per_node"] == 8
    assert h100["add_by"] == "2026-12" and h100["add_gpus"] == 16
    assert "rose from 40 to 70 GPUs over 4 months (+10.4/month)" in h100["why"]
    assert "2026-12" in h100["why"] and "add 16 GPUs (2 nodes)" in h100["why"]
    # Backtest: September from July-August: 60 vs 64 (4, 6.25 %); October from July-September: slope 12,
    # intercept 39.33 -> 75.33 vs 70 (5.33, 7.62 %). Means: 4.67 GPUs, 6.9 %.
    assert h100["error"]["months_tested"] == 2
    assert h100["error"]["mae_gpus"] == 4.7 and h100["error"]["mape"] == 6.9
    assert "off by 4.7 GPUs (7 %)" in h100["why"]


def test_a_flat_demand_under_capacity_adds_nothing_and_says_the_headroom(rising):
    a100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["A100"]
    assert a100["trend_per_month"] == 0 and [f["demand_gpus"] for f in a100["forecast"]] == [10, 10, 10]
    assert a100["add_gpus"] == 0 and a100["add_by"] is None
    assert "stays under the 32 installed" in a100["why"] and "22 GPUs of headroom" in a100["why"]
    assert a100["error"]["mae_gpus"] == 0


def test_monthly_figures_are_the_mean_and_the_95th_percentile_of_the_daily_peaks(world):
    days("L40S", OCTOBER, range(11), capacity=16, held=2)  # demand 0..10 on 11 days
    days("L40S", OCTOBER, [4], capacity=24, held=6, first_day=12)
    (row,) = by_model(capacity_plan.plan(OCTOBER, now=NOW))["L40S"]["history"]
    # 12 values 0..10 and 4, sorted: position 11 * 0.95 = 10.45 between 9 and 10 -> 9.45 (shown 9.4 or 9.5).
    assert row["days"] == 12 and row["capacity_gpus"] == 24
    assert row["demand_mean_gpus"] == round(59 / 12, 1)
    assert row["demand_p95_gpus"] == pytest.approx(9.45, abs=0.051)
    assert row["held_mean_gpus"] == round((2 * 11 + 6) / 12, 1)


def test_the_window_keeps_the_months_asked_for_and_never_days_after_now(world):
    days("H100", date(2026, 4, 1), [99], capacity=8)  # seven months before October: outside a 6-month window
    days("H100", date(2026, 5, 1), [5], capacity=8)
    days("H100", OCTOBER, [7], capacity=8)
    days("H100", date(2026, 11, 1), [1], capacity=8, first_day=20)  # after NOW and after the report month
    result = capacity_plan.plan(OCTOBER, months_back=6, now=NOW)
    assert result["months"] == ["2026-05", "2026-10"]
    assert capacity_plan.plan(date(2026, 11, 1), now=NOW)["models"][0]["history"][-1]["month"] == "2026-10"


def test_the_backtest_replays_the_method_on_each_past_month():
    # 10, 20, 40, 40: month 2 from (10, 20) -> 30 vs 40 (10, 25 %); month 3 from (10, 20, 40): slope 15,
    # intercept 8.33 -> 53.33 vs 40 (13.33, 33.3 %). Means: 11.7 GPUs, 29.2 %.
    error = capacity_plan.backtest([(0, 10.0), (1, 20.0), (2, 40.0), (3, 40.0)], "linear")
    assert error["months_tested"] == 2 and error["mae_gpus"] == 11.7 and error["mape"] == 29.2
    assert "11.7" in error["text"]
    # Carrying forward: month 1 from month 0 -> 10 vs 20 (10, 50 %).
    error = capacity_plan.backtest([(0, 10.0), (1, 20.0)], "carry_forward")
    assert (error["months_tested"], error["mae_gpus"], error["mape"]) == (1, 10, 50)


def test_a_falling_trend_is_never_forecast_below_zero(world):
    for month, demand in zip([date(2026, 8, 1), date(2026, 9, 1), OCTOBER], [30, 15, 0], strict=True):
        days("A100", month, [demand], capacity=32)
    a100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["A100"]
    assert a100["trend_per_month"] == -15 and [f["demand_gpus"] for f in a100["forecast"]] == [0, 0, 0]
    assert "fell from 30 to 0 GPUs" in a100["why"] and a100["add_gpus"] == 0


def test_one_month_only_carries_it_forward_and_says_no_error_can_be_measured(world):
    days("H100", OCTOBER, [20, 40], capacity=32)
    h100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["H100"]
    assert h100["method"] == "carry_forward" and h100["trend_per_month"] is None
    assert "carried forward" in h100["method_text"]
    assert [f["demand_gpus"] for f in h100["forecast"]] == [39.0] * 3  # p95 of 20 and 40
    assert h100["add_by"] == "2026-11" and h100["add_gpus"] == 8  # 7 over the 32 installed: one node
    assert h100["error"] == {"months_tested": 0, "mae_gpus": None, "mape": None, "text": h100["error"]["text"]}
    assert "No past month can be checked yet" in h100["error"]["text"]
    assert "no past forecast could be checked yet" in h100["why"]


def test_no_data_gives_no_models_and_says_so(world):
    result = capacity_plan.plan(OCTOBER, now=NOW)
    assert result["models"] == [] and result["months"] == [] and result["text"]


def test_the_platform_report_shows_the_plan_and_a_tenant_report_does_not(client, users, rising):
    client.login(username="dave", password="demo")
    html = client.get("/reports/2026-10/").content.decode()
    assert 'id="capacity-plan"' in html and "add 16 GPUs (2 nodes)" in html
    assert "2027-01" in html and "102.8" in html
    client.login(username="frank", password="demo")
    assert 'id="capacity-plan"' not in client.get("/reports/2026-10/nlp/").content.decode()


def test_the_platform_report_without_history_shows_the_empty_state(client, users):
    client.login(username="dave", password="demo")
    html = client.get("/reports/2026-10/").content.decode()
    assert 'id="capacity-plan"' in html and "No capacity history yet." in html
