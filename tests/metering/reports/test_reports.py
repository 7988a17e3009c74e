"""Monthly reports: isolation between tenants, managers seeing all, frozen snapshots, CSV, the command."""

import csv
import io
import json
from datetime import date, timedelta
from decimal import Decimal
from typing import get_args, get_origin, get_type_hints, is_typeddict

import pytest
from django.core.management import call_command

from gpuportal.text.formatting import duration_text
from metering.models import GpuPrice, MonthlyReport
from metering.reports import capacity_plan
from metering.reports import monthly as reports
from metering.reports.contract import CapacityPlan, MonthlyReportData
from metering.reports.presentation import advice_section, report_sections
from metering.usage.rollup import rollup
from scheduling.models import FailureCategory, JobStatus
from tenants.models import Tenant
from tests.metering.helpers import at, gpus_of, ran_job, readings

MONTH = date(2026, 10, 1)
REPORT_KEYS = {"gpu_hours_allocated", "gpu_hours_used", "efficiency", "by_tenant", "by_gpu_model",
               "wait_seconds_p95", "failures_by_category", "cost", "recommendations"}


@pytest.fixture
def october(users):
    """Vision and nlp both ran jobs in October 2026; one of nlp's failed out of memory."""
    GpuPrice.objects.create(gpu_model="A100", price_per_gpu_hour=Decimal("2"), effective_from=date(2026, 1, 1))
    GpuPrice.objects.create(gpu_model="H100", price_per_gpu_hour=Decimal("4"), effective_from=date(2026, 1, 1))
    a100 = gpus_of("dc1-r3-a100-01", 4)
    ran_job(users["alice"], "vision/detection", a100, at("2026-10-03T08:00"), at("2026-10-03T18:00"))
    readings(a100, at("2026-10-03T08:00"), at("2026-10-03T18:00"), utilization=70, every=timedelta(hours=1))
    h100 = gpus_of("dc1-r1-h100-01", 8)
    ran_job(users["bob"], "nlp/llm-pretrain", h100, at("2026-10-05T00:00"), at("2026-10-05T05:00"), task="training")
    ran_job(users["bob"], "nlp/chat-eval", h100[:2], at("2026-10-06T00:00"), at("2026-10-06T01:00"),
            status=JobStatus.FAILED, category=FailureCategory.OUT_OF_MEMORY, wait=timedelta(hours=3))
    rollup(MONTH, date(2026, 10, 31), force=True)
    return MONTH


def test_platform_report_has_the_figures_the_issue_names(october):
    data = reports.build_report(october)
    assert set(data) >= REPORT_KEYS
    assert data["gpu_hours_allocated"] == 4 * 10 + 8 * 5 + 2 * 1
    assert data["gpu_hours_used"] == pytest.approx(4 * 10 * 0.7)
    assert {row["name"]: row["gpu_hours_allocated"] for row in data["by_tenant"]} == {"vision": 40, "nlp": 42}
    assert data["failures_by_category"] == {"out_of_memory": 1}
    assert data["cost"] == 40 * 2 + 42 * 4
    assert data["jobs"]["submitted"] == 3 and data["jobs"]["failed"] == 1
    assert data["wait_seconds_p95"] > data["wait_seconds_median"] > 0
    assert {r["gpu_model"] for r in data["recommendations"]} == {"A100", "H100", "L40S"}
    assert all(r["action"] in {"add", "spread", "lend_or_move", "keep"} and r["evidence"]
               for r in data["recommendations"])


def test_tenant_report_carries_nothing_of_another_tenant(october):
    data = reports.build_report(october, Tenant.objects.get(name="vision"))
    text = json.dumps(data)
    assert "nlp" not in text and "bob" not in text and "llm-pretrain" not in text
    assert data["gpu_hours_allocated"] == 40 and data["failures_by_category"] == {}
    assert [row["name"] for row in data["by_project"]] == ["vision/detection"]
    assert {row["tenant"] for row in data["quota_vs_use"]} == {"vision"}
    assert "by_tenant" not in data and "recommendations" not in data


def test_manager_sees_all_tenants_and_a_researcher_only_their_own(october, api):
    dave = api("dave").get("/api/reports/monthly/2026-10/")
    assert dave.status_code == 200
    assert {row["name"] for row in dave.json()["by_tenant"]} == {"vision", "nlp"}
    alice = api("alice")
    assert alice.get("/api/reports/monthly/2026-10/").status_code == 403
    assert alice.get("/api/reports/monthly/2026-10/?tenant=nlp").status_code == 404
    mine = alice.get("/api/reports/monthly/2026-10/?tenant=vision")
    assert mine.status_code == 200 and mine.json()["tenant"] == "vision"
    bad = alice.get("/api/reports/monthly/2026-13/?tenant=vision")
    assert bad.status_code == 400 and "month" in bad.json()


def test_closed_month_is_frozen_and_regenerating_is_explicit_and_recorded(october, users):
    assert reports.report_for(october)[1] is None and MonthlyReport.objects.count() == 0  # reading never freezes
    frozen = reports.freeze(october)
    first, snapshot = reports.report_for(october)
    assert snapshot == frozen and snapshot.generated_by is None
    assert reports.freeze(october) == frozen and MonthlyReport.objects.count() == 1
    ran_job(users["alice"], "vision/segmentation", gpus_of("dc2-r1-a100-03", 8), at("2026-10-20T00:00"),
            at("2026-10-20T10:00"))
    rollup(MONTH, date(2026, 10, 31), force=True)  # late data: the frozen report does not move
    assert reports.report_for(october)[0] == first
    with pytest.raises(ValueError, match="reason"):
        reports.regenerate(october, None, users["admin"], "  ")
    regenerated = reports.regenerate(october, None, users["admin"], "late job records imported", force=True)
    assert regenerated.data["gpu_hours_allocated"] == first["gpu_hours_allocated"] + 80
    assert reports.report_for(october)[0]["gpu_hours_allocated"] == regenerated.data["gpu_hours_allocated"]
    history = list(MonthlyReport.objects.filter(month=october, tenant=None).order_by("generated_at"))
    assert [h.superseded_at is not None for h in history] == [True, False]
    assert history[1].generated_by == users["admin"] and history[1].reason == "late job records imported"


def test_only_platform_admins_regenerate_from_the_page(client, october):
    reports.freeze(october)
    client.login(username="dave", password="demo")
    assert client.post("/reports/2026-10/regenerate/", {"reason": "x"}).status_code == 403
    assert MonthlyReport.objects.count() == 1


def test_open_month_is_live_not_frozen(users):
    today = date.today()
    data, snapshot = reports.report_for(today.replace(day=1))
    assert snapshot is None and data["closed"] is False


def test_csv_export_matches_the_chart_table(client, october):
    client.login(username="dave", password="demo")
    response = client.get("/reports/2026-10/csv/by_tenant/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {(r["name"], float(r["gpu_hours_allocated"])) for r in rows} == {("vision", 40.0), ("nlp", 42.0)}
    assert client.get("/reports/2026-10/csv/no-such-table/").status_code == 404


def test_every_chart_has_its_data_as_a_table(october):
    for section in report_sections(reports.build_report(october)):
        if section.figure:
            assert section.rows, section.name
            assert section.csv().splitlines()[0].split(",") == [key for key, _label in section.columns]


def test_report_page_renders_charts_from_the_portals_own_plotly(client, october):
    client.login(username="dave", password="demo")
    html = client.get("/reports/2026-10/").content.decode()
    assert "/static/plotly/plotly-basic.min.js" in html and "cdn" not in html.lower()
    assert 'data-figure="figure-by_tenant"' in html and 'id="figure-by_tenant"' in html
    waits = reports.build_report(october)
    assert f">{duration_text(waits['wait_seconds_median'])}</span>" in html  # "2 h 5 min", not "7500.0 s"
    from django.contrib.staticfiles import finders

    assert finders.find("plotly/plotly-basic.min.js")  # kept in static/ (no CDN)


def test_monthly_report_command_prints_json(october, capsys):
    call_command("monthly_report", "--month", "2026-10", "--format", "json")
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= REPORT_KEYS and data["month"] == "2026-10"
    call_command("monthly_report", "--month", "2026-10", "--tenant", "vision", "--format", "json")
    assert json.loads(capsys.readouterr().out)["gpu_hours_allocated"] == 40


def test_recommendations_follow_the_documented_rules():
    def model(name, rate, over, excess=()):
        return {"gpu_model": name, "allocation_rate": rate, "days": 30, "days_over_capacity": over,
                "capacity_gpus": 32, "peak_demand_gpus": 40, "gpus_per_node": 8, "excess": list(excess)}

    waits = [{"gpu_model": "A100", "wait": 6.2 * 3600}] * 5
    from metering.models import JobFact

    advice = {a["gpu_model"]: a for a in reports.recommendations(
        [model("A100", 0.9, 9, [10, 12, 14]), model("T4", 0.29, 0), model("H100", 0.3, 9, [4]),
         model("L40S", 0.6, 1)], waits, JobFact.objects.none())}
    assert advice["A100"]["action"] == "add" and advice["A100"]["figures"]["add_gpus"] == 16
    assert "9 of 30 days, p95 wait 6.2 h" in advice["A100"]["evidence"]
    assert advice["A100"]["evidence"].endswith("-> add 16 A100 GPUs")  # a number with its unit
    assert advice["T4"]["action"] == "lend_or_move" and "71 % idle" in advice["T4"]["evidence"]
    assert advice["H100"]["action"] == "spread"
    assert advice["L40S"]["action"] == "keep"
    table = advice_section("recommendations", "Advice", list(advice.values())).table()
    assert [row[1] for row in table] == ["Add GPUs", "Lend or move", "Spread the peaks", "Keep"]  # labels, not codes


def test_an_unfrozen_closed_month_shows_live_figures_with_a_note_and_the_beat_task_freezes_it(client, october,
                                                                                           monkeypatch):
    from django.utils import timezone

    from metering.tasks import freeze_last_month

    client.login(username="dave", password="demo")
    html = client.get("/reports/2026-10/").content.decode()
    assert 'class="not-frozen"' in html and 'name="reason"' not in html
    assert client.get("/reports/2026-10/csv/by_tenant/").status_code == 200
    assert MonthlyReport.objects.count() == 0  # neither the page nor its CSV froze anything
    client.login(username="admin", password="demo")
    assert 'name="reason"' in client.get("/reports/2026-10/").content.decode()  # an admin may freeze it now
    assert client.post("/reports/2026-10/regenerate/", {"reason": "month closed"}).status_code == 302
    assert MonthlyReport.objects.get(tenant=None).reason == "month closed"
    monkeypatch.setattr(timezone, "now", lambda: at("2026-11-02T03:00"))
    assert set(freeze_last_month()) == {"vision", "nlp", "speech"}  # the platform report was frozen above
    assert freeze_last_month() == []
    assert MonthlyReport.objects.filter(superseded_at__isnull=True).count() == 4


def test_frozen_advice_is_read_in_the_readers_language(october):
    """The beat task freezes in the site's language; a Chinese reader of the snapshot reads Chinese advice."""
    from django.utils import translation

    snapshot = reports.freeze(october, now=at("2026-11-02T03:00"))
    stored = {entry["gpu_model"]: entry for entry in snapshot.data["recommendations"]}
    english = {entry["gpu_model"]: entry["evidence"] for entry in reports.report_for(october)[0]["recommendations"]}
    assert english == {model: entry["evidence"] for model, entry in stored.items()}
    assert english["A100"].startswith("A100: ") and stored["A100"]["phrase"]["params"]["model"] == "A100"
    with translation.override("zh-hans"):
        data, frozen = reports.report_for(october)
        chinese = {entry["gpu_model"]: entry["evidence"] for entry in data["recommendations"]}
        expected = {model: translation.gettext(entry["phrase"]["msgid"]) % entry["phrase"]["params"]
                    for model, entry in stored.items()}
    assert frozen == snapshot and chinese == expected
    assert all(chinese[model] != english[model] for model in english)  # each piece of advice is translated
    assert all("phrase" not in entry for entry in data["recommendations"])  # the report's shape is unchanged


def _conforms(value, shape, where: str = "report") -> list[str]:
    """Where ``value`` differs from the TypedDict ``shape`` (its keys, and those of the TypedDicts nested in it,
    in lists too): the contract must say what the report holds, no more and no less."""
    if not is_typeddict(shape):
        if get_origin(shape) is list and value:
            return [problem for i, item in enumerate(value) for problem in
                    _conforms(item, get_args(shape)[0], f"{where}[{i}]")]
        return []
    keys = set(value)
    problems = [f"{where}: {sorted(shape.__required_keys__ - keys)} missing"] if shape.__required_keys__ - keys else []
    if keys - shape.__required_keys__ - shape.__optional_keys__:
        problems.append(f"{where}: {sorted(keys - shape.__required_keys__ - shape.__optional_keys__)} undocumented")
    hints = get_type_hints(shape)
    return problems + [problem for key in keys & set(hints) for problem in
                       _conforms(value[key], hints[key], f"{where}.{key}")]


def test_the_report_and_the_plan_hold_what_their_contract_documents(october):
    """``metering.reports.contract`` types the JSON the reports are frozen, served and read as."""
    platform = reports.build_report(october)
    assert _conforms(platform, MonthlyReportData) == []
    assert set(platform) == MonthlyReportData.__required_keys__ | MonthlyReportData.__optional_keys__
    assert all("phrase" in advice for advice in platform["recommendations"])  # stored with its phrase
    tenant = reports.build_report(october, Tenant.objects.get(name="vision"))
    assert _conforms(tenant, MonthlyReportData) == [] and set(tenant) == MonthlyReportData.__required_keys__
    assert _conforms(reports.report_for(october)[0], MonthlyReportData) == []
    plan = capacity_plan.plan(october, now=at("2026-11-02T03:00"))
    assert plan["models"] and _conforms(plan, CapacityPlan) == []
