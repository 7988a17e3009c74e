"""Capacity planning: monthly demand per GPU model, the forecast and its backtest, and "add N by month M".

The expected figures are worked out by hand in each test, so a change of method shows up here."""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from metering.models import CapacityDaily
from metering.reports import capacity_plan, sizing
from metering.reports import monthly as reports
from metering.review import parts as review_parts

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
    # November (82.0) still fits in 83; December (92.4) is the first month over, but January is 19.8 over:
    # three nodes of 8 GPUs, to be in place before December.
    assert h100["capacity_gpus"] == 83 and h100["gpus_per_node"] == 8
    assert h100["add_by"] == "2026-12" and h100["add_gpus"] == 24
    assert "went from 40 to 70 GPUs over 4 months; trend +10.4 GPUs/month" in h100["why"]
    assert ("exceeds the 83 installed in 2026-12; 102.8 by 2027-01 → add 24 GPUs (3 nodes) before 2026-12"
            in h100["why"])
    # Backtest with the method of each point: August carried forward from July: 40 vs 50 (10, 20 %);
    # September carried forward from August: 50 vs 64 (14, 21.88 %); October on the line through July-September
    # (slope 12, intercept 39.33): 75.33 vs 70 (5.33, 7.62 %). Means: 9.78 GPUs, 16.5 %.
    assert h100["error"]["months_tested"] == 3
    assert h100["error"]["mae_gpus"] == 9.8 and h100["error"]["mape"] == 16.5
    assert "Replayed on 3 past months" in h100["error"]["text"]
    assert "off by 9.8 GPUs (16 %) on average (3 months tested)" in h100["why"]


def test_a_flat_demand_under_capacity_adds_nothing_and_says_the_headroom(rising):
    a100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["A100"]
    assert a100["trend_per_month"] == 0 and [f["demand_gpus"] for f in a100["forecast"]] == [10, 10, 10]
    assert a100["add_gpus"] == 0 and a100["add_by"] is None
    assert "stays under the 32 installed" in a100["why"] and "22 GPUs of headroom" in a100["why"]
    assert "went from 10 to 10 GPUs over 4 months; trend 0.0 GPUs/month" in a100["why"]
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


def test_the_backtest_replays_each_past_month_with_the_method_the_forecast_used_then():
    # 10, 20, 40, 40: month 1 carried forward -> 10 vs 20 (10, 50 %); month 2 carried forward (two earlier
    # months are too few for a line) -> 20 vs 40 (20, 50 %); month 3 on the line through (10, 20, 40): slope 15,
    # intercept 8.33 -> 53.33 vs 40 (13.33, 33.3 %). Means: 14.4 GPUs, 44.4 %.
    error = capacity_plan.backtest([(0, 10.0), (1, 20.0), (2, 40.0), (3, 40.0)])
    assert error["months_tested"] == 3 and error["mae_gpus"] == 14.4 and error["mape"] == 44.4
    assert "Replayed on 3 past months" in error["text"] and "14.4" in error["text"]
    # Three months: both tested months are carried forward (a 2-point line would have said 30 for month 2).
    error = capacity_plan.backtest([(0, 10.0), (1, 20.0), (2, 40.0)])
    assert (error["months_tested"], error["mae_gpus"], error["mape"]) == (2, 15, 50)
    error = capacity_plan.backtest([(0, 10.0), (1, 20.0)])
    assert (error["months_tested"], error["mae_gpus"], error["mape"]) == (1, 10, 50)
    assert "Replayed on 1 past month " in error["text"]
    assert capacity_plan.backtest([(0, 10.0)])["months_tested"] == 0


def test_a_falling_trend_is_never_forecast_below_zero(world):
    for month, demand in zip([date(2026, 8, 1), date(2026, 9, 1), OCTOBER], [30, 15, 0], strict=True):
        days("A100", month, [demand], capacity=32)
    a100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["A100"]
    assert a100["trend_per_month"] == -15 and [f["demand_gpus"] for f in a100["forecast"]] == [0, 0, 0]
    assert "went from 30 to 0 GPUs over 3 months; trend -15.0 GPUs/month" in a100["why"]
    assert a100["add_gpus"] == 0


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
    assert 'id="capacity-plan"' in html and "add 24 GPUs (3 nodes)" in html
    assert "2027-01" in html and "102.8" in html
    client.login(username="frank", password="demo")
    assert 'id="capacity-plan"' not in client.get("/reports/2026-10/nlp/").content.decode()


def test_the_platform_report_without_history_shows_the_empty_state(client, users):
    client.login(username="dave", password="demo")
    html = client.get("/reports/2026-10/").content.decode()
    assert 'id="capacity-plan"' in html and "No capacity history yet." in html


def test_add_is_sized_for_the_highest_month_of_the_horizon_and_due_by_the_first_over(world):
    # p95 1, 12, 23 in September-November: +11 a month -> 34, 45, 56 in December-February against 32 GPUs.
    for month, demand in zip([date(2026, 9, 1), OCTOBER, date(2026, 11, 1)], [1, 12, 23], strict=True):
        days("A100", month, [demand], capacity=32)
    a100 = by_model(capacity_plan.plan(date(2026, 11, 1), now=NOW + timedelta(days=20)))["A100"]  # closed
    assert [f["demand_gpus"] for f in a100["forecast"]] == [34, 45, 56]
    assert a100["add_by"] == "2026-12" and a100["add_gpus"] == 24  # 56 - 32 = 24: three nodes of 8
    assert ("exceeds the 32 installed in 2026-12; 56 by 2027-02 → add 24 GPUs (3 nodes) before 2026-12"
            in a100["why"])


def test_the_first_month_over_being_the_highest_names_it_once(world):
    days("H100", OCTOBER, [20, 40], capacity=32)  # carried forward: 39 in each month
    h100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["H100"]
    assert "exceeds the 32 installed in 2026-11 (39 GPUs) → add 8 GPUs (1 node) before 2026-11" in h100["why"]


def test_the_trend_sentence_cannot_contradict_the_first_and_last_months(world):
    # p95 20, 0, 30, 30, 15 in June-October: x 0..4, mean 2 and 19: slope (-2 + 19 + 0 + 11 - 8) / 10 = +2,
    # although October is below June.
    months = [date(2026, 6, 1), date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1), OCTOBER]
    for month, demand in zip(months, [20, 0, 30, 30, 15], strict=True):
        days("A100", month, [demand], capacity=64)
    why = by_model(capacity_plan.plan(OCTOBER, now=NOW))["A100"]["why"]
    assert "went from 20 to 15 GPUs over 5 months; trend +2.0 GPUs/month" in why
    assert "rose" not in why and "fell" not in why


def test_a_small_trend_keeps_one_decimal(world):
    # 10, 10, 10, 10, 10.2: slope 2 * 0.2 / 10 = +0.04 a month, shown as 0.0 rather than "+0".
    months = [date(2026, 6, 1), date(2026, 7, 1), date(2026, 8, 1), date(2026, 9, 1), OCTOBER]
    for month, demand in zip(months, [10, 10, 10, 10, 10.2], strict=True):
        days("A100", month, [demand], capacity=64)
    a100 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["A100"]
    assert a100["trend_per_month"] == 0.04
    assert "went from 10 to 10.2 GPUs over 5 months; trend 0.0 GPUs/month" in a100["why"]
    assert [capacity_plan._trend_text(t) for t in (0.44, -2, -0.04)] == ["+0.4", "-2.0", "0.0"]


def test_sentence_figures_and_the_default_node_size_come_from_one_place(world, monkeypatch):
    assert capacity_plan.whole is review_parts.whole and not hasattr(capacity_plan, "_num")
    assert not hasattr(capacity_plan, "DEFAULT_GPUS_PER_NODE")
    assert not hasattr(reports, "DEFAULT_GPUS_PER_NODE") and reports.whole_nodes is sizing.whole_nodes
    monkeypatch.setattr(sizing, "DEFAULT_GPUS_PER_NODE", 4)
    days("B200", OCTOBER, [13], capacity=8)  # no B200 node in the catalogue: the default node size applies
    b200 = by_model(capacity_plan.plan(OCTOBER, now=NOW))["B200"]
    assert b200["gpus_per_node"] == 4 and b200["add_gpus"] == 8  # 5 over: two nodes of 4
    capacity = reports._capacity(OCTOBER, date(2026, 11, 1), NOW)
    assert {m["gpu_model"]: m["gpus_per_node"] for m in capacity["models"]}["B200"] == 4


def test_a_different_add_in_the_months_advice_is_told_apart_from_the_plans(rising):
    """Two "add N" in one document (advice frozen before it quoted the plan): the sentence says which covers
    what (the advice the month that was, the plan the months to come) and which to act on; an equal number or
    advice that adds nothing gets no sentence."""
    plan = capacity_plan.plan(OCTOBER, now=NOW)
    advice = [{"gpu_model": "H100", "action": "add", "figures": {"add_gpus": 16}},
              {"gpu_model": "A100", "action": "add", "figures": {"add_gpus": 8}}]
    models = by_model(capacity_plan.with_advice(plan, advice))
    assert models["H100"]["beside_advice"] == (
        "H100: 2026-10's advice (add 16) covers 75 % of that month's days over capacity; this plan (add 24) covers "
        "the highest forecast peak of the next 3 months: act on the plan.")
    assert models["A100"]["beside_advice"] == (
        "A100: 2026-10's advice (add 8) covers 75 % of that month's days over capacity; the forecast of the next 3 "
        "months stays within the installed GPUs: act on the plan.")
    again = by_model(capacity_plan.with_advice(capacity_plan.plan(OCTOBER, now=NOW), [
        {"gpu_model": "H100", "action": "add", "figures": {"add_gpus": 24}},
        {"gpu_model": "A100", "action": "keep", "figures": {}}]))
    assert "beside_advice" not in again["H100"] and "beside_advice" not in again["A100"]


def test_an_open_month_is_forecast_not_history(rising):
    """Mid-November, a few November days would read as demand collapsing: the plan stops at October, forecasts
    November and says so."""
    days("H100", date(2026, 11, 1), [1, 1], capacity=83)  # two quiet days so far
    plan = capacity_plan.plan(date(2026, 11, 1), now=NOW)
    assert plan["month"] == "2026-10" and plan["report_month"] == "2026-11"
    assert plan["months"][-1] == "2026-10" and plan["note"] == (
        "2026-11 is still open: the plan uses the closed months up to 2026-10 and forecasts 2026-11.")
    h100 = by_model(plan)["H100"]
    assert [f["month"] for f in h100["forecast"]] == ["2026-11", "2026-12", "2027-01"]
    assert h100["forecast"][0]["demand_gpus"] == 82.0 and h100["add_gpus"] == 24  # as planned from October
    assert capacity_plan.plan(OCTOBER, now=NOW)["note"] == ""


def _month_figures(model: str, over: int, capacity: int, step: int = 8) -> dict:
    """One model's month as ``monthly._capacity`` gives it: 31 days, ``over`` of them above capacity, 90 %
    allocated (enough for the advice "add")."""
    return {"gpu_model": model, "days": 31, "days_over_capacity": over, "allocation_rate": 0.9,
            "capacity_gpus": capacity, "peak_demand_gpus": capacity + 20.0, "excess": [5.0] * over,
            "gpus_per_node": step}


def test_the_months_advice_quotes_the_plans_number_so_the_report_says_one(rising):
    """The advice decides whether to add from the month; how many is the plan's figure (whole nodes, by the
    plan's month), so the page and the pack never say "add 8" beside "add 24"."""
    from metering.models import JobFact

    plan = capacity_plan.plan(OCTOBER, now=NOW)
    advice = {a["gpu_model"]: a for a in reports.recommendations(
        [_month_figures("H100", 10, 83), _month_figures("A100", 10, 32), _month_figures("B200", 10, 16)], [],
        JobFact.objects.none(), plan)}
    h100 = by_model(plan)["H100"]
    assert advice["H100"]["action"] == "add" and advice["H100"]["figures"]["add_gpus"] == h100["add_gpus"] == 24
    assert advice["H100"]["evidence"].endswith("-> add 24 H100 GPUs (nodes of 8) before 2026-12, as the capacity "
                                               "plan sizes it")
    # Over capacity in the month, but the plan forecasts no shortfall: spread the peaks, do not buy.
    assert advice["A100"]["action"] == "spread" and "add_gpus" not in advice["A100"]["figures"]
    assert "forecasts no shortfall through 2027-01" in advice["A100"]["evidence"]
    # A model without history in the plan is sized from the month's own excesses (one node here).
    assert advice["B200"]["figures"]["add_gpus"] == 8
    shown = by_model(capacity_plan.with_advice(plan, list(advice.values())))
    assert "beside_advice" not in shown["H100"] and "beside_advice" not in shown["A100"]


def test_an_open_months_advice_says_how_many_of_its_days_have_passed(world):
    """On the first of December the advice rests on one day: it says "1 of its 31 days have passed", not a
    bare "1 of 1 days" that reads like a whole month."""
    advice = [{"gpu_model": "H100", "action": "keep", "evidence": "H100: 40 % idle -> keep", "figures": {},
               "phrase": {"msgid": "%(model)s: %(idle).0f %% idle -> lend or move",
                          "params": {"model": "H100", "idle": 40.0}}}]
    (entry,) = reports.so_far(advice, date(2026, 12, 1), datetime(2026, 12, 1, 9, tzinfo=ZoneInfo("UTC")))
    assert entry["evidence"] == "H100: 40 % idle -> lend or move (2026-12 is still open: 1 of its 31 days have passed)"
    assert reports.advice_text(entry) == entry["evidence"]  # read back from the stored phrase
