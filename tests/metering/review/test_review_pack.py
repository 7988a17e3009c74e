"""The monthly review pack: the document's four groups and their conclusions computed from data,
the comparison with the previous month, coverage, tenant isolation, the command's PDF and spreadsheet read
back (pdftotext, openpyxl), the download views and their permissions, a bounded number of queries, and a
frozen month's pack rendered once and served from the stored bytes."""

import io
import json
import subprocess
from dataclasses import replace
from datetime import date, datetime, timedelta
from decimal import Decimal

import openpyxl
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from audit import log as audit
from audit.models import AuditAction
from gpuportal.text.dates import next_month
from metering.models import (
    CapacityDaily,
    GpuPrice,
    ImprovementAction,
    ImprovementDirection,
    ImprovementMetric,
    JobFact,
    MonthlyReport,
    StoredReviewPack,
)
from metering.reports import monthly as reports
from metering.review import stored
from metering.review.contract import ReviewDocument, Section, Table
from metering.review.document import GROUP_KEYS, build_review
from metering.review.render import formats as review_formats
from metering.usage.rollup import rollup
from scheduling.models import FailureCategory, JobArtifact, JobCheckpoint, JobStatus
from tenants.models import Quota, Tenant
from tests.metering.helpers import at, gpus_of, ran_job, readings

OTHER_TENANT_WORDS = ("nlp", "speech", "bob", "erin", "frank", "llm-pretrain", "chat-eval", "asr")


def _months() -> tuple[date, date]:
    """The last closed month and the one before it (the tests' clock is the real one, days in UTC)."""
    month = (timezone.now().date().replace(day=1) - timedelta(days=1)).replace(day=1)
    return month, (month - timedelta(days=1)).replace(day=1)


def _day(month: date, day: int, hour: int = 0) -> datetime:
    return at(f"{month.replace(day=day).isoformat()}T{hour:02d}:00")


def _audited(moment: datetime, monkeypatch, action, obj=None, **fields):
    """An audit record written as if at ``moment`` (the chain hashes the time it stores, so it still verifies)."""
    with monkeypatch.context() as patch:
        patch.setattr(timezone, "now", lambda: moment)
        return audit.record(action, obj, **fields)


@pytest.fixture
def two_months(users, monkeypatch):
    """The month before: vision ran 40 A100 GPU-hours. The month: vision 80 A100 GPU-hours (one retried job with a
    checkpoint and an artifact), nlp 8 H100 x 5 h plus a job that waited two days for all 32 H100 GPUs (demand
    above capacity on those days), three failures (out of memory, node fault, exit code), approvals and a quota
    change in the audit log, and an action from the month before that promised fewer H100 days over capacity."""
    month, previous = _months()
    GpuPrice.objects.create(gpu_model="A100", price_per_gpu_hour=Decimal("2"), effective_from=date(2020, 1, 1))
    GpuPrice.objects.create(gpu_model="H100", price_per_gpu_hour=Decimal("4"), effective_from=date(2020, 1, 1))
    a100, h100, l40s = gpus_of("dc1-r3-a100-01", 4), gpus_of("dc1-r1-h100-01", 8), gpus_of("dc2-r2-l40s-01", 2)
    ran_job(users["alice"], "vision/detection", a100, _day(previous, 3, 8), _day(previous, 3, 18))

    retried = ran_job(users["alice"], "vision/detection", a100, _day(month, 3, 8), _day(month, 3, 18))
    readings(a100, _day(month, 3, 8), _day(month, 3, 18), utilization=70, every=timedelta(hours=1))
    ran_job(users["alice"], "vision/segmentation", a100, _day(month, 4, 0), _day(month, 4, 10),
            status=JobStatus.FAILED, category=FailureCategory.EXIT_CODE)
    ran_job(users["bob"], "nlp/llm-pretrain", h100, _day(month, 10), _day(month, 10, 5), task="training")
    ran_job(users["bob"], "nlp/chat-eval", h100[:2], _day(month, 6), _day(month, 6, 1),
            status=JobStatus.FAILED, category=FailureCategory.OUT_OF_MEMORY, wait=timedelta(hours=3))
    ran_job(users["erin"], "speech/asr", l40s, _day(month, 7), _day(month, 7, 2),
            status=JobStatus.FAILED, category=FailureCategory.NODE_FAULT)
    every_h100 = [g for n in (1, 2, 3, 4) for g in gpus_of(f"dc1-r{1 if n < 3 else 2}-h100-{n:02d}", 8)]
    ran_job(users["bob"], "nlp/llm-pretrain", every_h100, _day(month, 11, 12), _day(month, 11, 13), nodes=4,
            task="training", wait=timedelta(days=2))
    retried.retry_count = 1
    retried.save(update_fields=["retry_count"])
    JobCheckpoint.objects.create(job=retried, path="/ckpt/step-100", step=100, at=_day(month, 3, 12))
    JobArtifact.objects.create(job=retried, name="model", uri="s3://models/detector", size_bytes=2 * 10**9,
                               at=_day(month, 3, 18))
    rollup(previous, next_month(month) - timedelta(days=1), force=True)

    vision, nlp = Tenant.objects.get(name="vision"), Tenant.objects.get(name="nlp")
    for action, tenant in ((AuditAction.REQUEST_APPROVE, vision), (AuditAction.REQUEST_APPROVE, nlp),
                           (AuditAction.REQUEST_DENY, nlp)):
        _audited(_day(month, 9, 9), monkeypatch, action, object_type="governance.request", object_id="1",
                 object_repr="request", tenant=tenant, actor=users["carol"])
    quota = Quota.objects.get(tenant=vision, gpu_model="A100")
    _audited(_day(month, 10, 9), monkeypatch, AuditAction.QUOTA_CHANGE, quota, actor=users["admin"],
             before={"limit_gpus": 16}, after={"limit_gpus": 20}, reason="more detection work")
    ImprovementAction.objects.create(
        month=previous, title="Spread H100 pretraining", owner=users["admin"], due_month=month,
        metric=ImprovementMetric.DAYS_OVER_CAPACITY, gpu_model="H100", direction=ImprovementDirection.DOWN,
        baseline=5, created_by=users["admin"])
    return {"month": month, "previous": previous, "users": users}


def _group(review: ReviewDocument, key: str) -> Section:
    return review.group(key)


def _table(group: Section, key: str) -> Table:
    return group.table(key)


def test_document_has_four_groups_in_order_with_conclusions_from_the_data(two_months):
    month = two_months["month"]
    review = build_review(month, language="en")
    report, _snapshot = reports.report_for(month)
    hours = str(report["gpu_hours_allocated"])
    assert json.loads(json.dumps(review.to_json())) == review.to_json()  # plain JSON-ready data
    assert ReviewDocument.from_json(review.to_json()) == review
    assert [g.key for g in review.groups] == list(GROUP_KEYS)
    assert [g.title for g in review.groups] == ["Resources", "Tasks", "Governance", "Improvements"]
    assert all(g.question and g.conclusions for g in review.groups)
    assert review.month == f"{month:%Y-%m}" and review.tenant is None and review.language == "en"
    assert review.site and review.title.endswith(f"{month:%Y-%m}")

    resources = _group(review, "resources")
    assert hours == "158.0" and f"{hours} GPU-hours allocated" in resources.conclusions[0]
    assert any(hours in line for line in review.summary)
    h100 = next(m for m in report["utilisation_by_gpu_model"] if m["gpu_model"] == "H100")
    assert h100["days_over_capacity"] >= 1
    assert (f"H100 demand exceeded capacity on {h100['days_over_capacity']} of {h100['days']} days"
            in " ".join(resources.conclusions))
    assert "L40S was 99.9 % idle." in resources.conclusions  # 4 of 23,808 GPU-hours: not quite all
    figures = {f.key: f for f in resources.figures}
    assert figures["gpus"].value == 96 and figures["nodes"].value == 12
    assert {c.key for c in resources.charts} == {"daily_allocated", "capacity_vs_demand"}
    demand = next(c for c in resources.charts if c.key == "capacity_vs_demand")
    assert demand.categories == ["A100", "H100", "L40S"] and demand.series[0].values == [32, 32, 32]

    tasks = _group(review, "tasks")
    assert "67 % of failures were resource-related" in " ".join(tasks.conclusions)  # OOM + node fault of 3
    reasons = _table(tasks, "failures")
    assert sorted(row[0] for row in reasons.rows) == ["Node fault", "Out of memory", "Program exit code"]
    assert _table(tasks, "checkpoints").rows[2] == ["Retried jobs with a checkpoint to resume from", 1]
    run = {f.key: f.value for f in tasks.figures}
    assert run["run_median"] == 3.5 and run["jobs_submitted"] == 6  # runs of 10, 10, 5, 1, 2 and 1 h

    governance = _group(review, "governance")
    assert {f.key: f.value for f in governance.figures}["approved"] == 2
    assert "2 requests approved, 1 denied and 0 expired" in governance.conclusions[0]
    assert any(line.startswith("The audit chain verifies") for line in governance.conclusions)
    admins = {tuple(row[:2]): row[2] for row in _table(governance, "responsibilities").rows}
    assert admins[("nlp", "administers the tenant")] == "frank"
    assert "No tenant admin for: speech, vision." in governance.conclusions

    improvements = _group(review, "improvements")
    actions = _table(improvements, "actions").rows
    assert [row[0] for row in actions] == ["Spread H100 pretraining"]
    assert "1 of 1 action moved its metric as expected." in improvements.conclusions
    changes = _table(improvements, "changes").rows
    assert [row[1] for row in changes] == ["Quota changed"] and changes[0][4] == "more detection work"
    assert "capacity_plan" in {t.key for t in improvements.tables}
    assert [a.key for a in review.appendix] == ["acceptance"]
    assert len(_table(review.appendix[0], "acceptance").rows) == 4


def test_gpu_hours_match_the_frozen_report_and_the_snapshot_is_named(two_months):
    month = two_months["month"]
    snapshot = reports.freeze(month)
    review = build_review(month)
    figure = next(f for f in _group(review, "resources").figures if f.key == "gpu_hours_allocated")
    assert figure.value == snapshot.data["gpu_hours_allocated"] == reports.report_for(month)[0][
        "gpu_hours_allocated"]
    assert review.snapshot_id == snapshot.pk


def test_comparison_with_the_previous_month(two_months):
    month, previous = two_months["month"], two_months["previous"]
    review = build_review(month)
    assert review.comparison.previous_month == f"{previous:%Y-%m}"
    rows = {row.label: row for row in review.comparison.rows}
    allocated = rows["GPU-hours allocated"]
    assert (allocated.value, allocated.previous) == (158.0, 40.0) == (
        reports.report_for(month)[0]["gpu_hours_allocated"], reports.report_for(previous)[0]["gpu_hours_allocated"])
    assert allocated.change == "+295.0 %"
    assert (rows["Jobs submitted"].value, rows["Jobs submitted"].previous) == (6, 1)
    assert rows["Jobs failed"].change == "new"  # none failed the month before
    assert rows["Cost"].unit and rows["Efficiency (used / allocated)"].unit == "%"
    assert "+295.0 % against 40.0 GPU-hours" in review.summary[0]


def test_an_open_month_compares_nothing_until_it_closes(two_months):
    """Ten days into a month, its totals are not "−70 %" against the whole month before, nor are the medians of
    its first few jobs a trend: each figure keeps the previous month's beside it and says how much of the month
    there is; the action due this month gets no verdict yet; its advice is not concluded from."""
    month, previous = two_months["month"], two_months["previous"]
    days = (next_month(month) - month).days
    review = build_review(month, now=_day(month, 10, 12))
    assert (review.coverage.days_expected, review.coverage.days_in_month) == (10, days)
    open_change = f"month open: 10 of {days} days"
    rows = {row.key: row for row in review.comparison.rows}
    assert {key for key, row in rows.items() if row.change == open_change} == {
        "gpu_hours_allocated", "gpu_hours_used", "efficiency", "jobs_submitted", "jobs_failed", "wait_p95", "cost"}
    assert rows["gpu_hours_allocated"].previous == 40.0  # the previous month stays beside it
    figures = [f for group in review.groups for f in group.figures]
    assert all(f.change in (open_change, "—") for f in figures)
    assert {f.key for f in figures if f.change == open_change} >= {"retries", "wait_median", "approved"}
    assert f"so far (10 of {days} days; 40.0 GPU-hours in the whole of {previous:%Y-%m})" in review.summary[0]
    improvements = _group(review, "improvements")
    assert "1 action is followed without a verdict yet (its table row says why)." in improvements.conclusions
    assert not any("moved its metric" in line for line in improvements.conclusions)
    assert {f.key: f.value for f in improvements.figures}["actions_moved"] is None
    assert review.coverage.text == (f"The data covers every day of {month:%Y-%m} so far; the month is still "
                                          f"open (10 of {days} days).")
    assert (f"The advice of {month:%Y-%m} so far rests on 10 of {days} days; it is final only once the month "
            "closes.") in improvements.conclusions
    assert not any(" -> " in line for line in improvements.conclusions)  # no advice concluded from 10 days
    title = _table(improvements, "recommendations").title
    assert title == f"Recommendations of the month so far (10 of {days} days)"
    closed = build_review(month)  # once closed, the same figures compare in per cent
    assert {row.key: row for row in closed.comparison.rows}["gpu_hours_allocated"].change == "+295.0 %"


def test_actions_planned_from_the_months_own_advice_are_its_next_steps(two_months):
    month, users = two_months["month"], two_months["users"]
    ImprovementAction.objects.create(
        month=month, title="Lend idle L40S", owner=users["admin"], due_month=next_month(month),
        metric=ImprovementMetric.DAYS_OVER_CAPACITY, gpu_model="L40S", direction=ImprovementDirection.DOWN,
        baseline=0, created_by=users["admin"])
    improvements = _group(build_review(month), "improvements")
    assert f"1 action was planned from {month:%Y-%m}'s recommendations." in improvements.conclusions
    assert "1 of 1 action moved its metric as expected." in improvements.conclusions  # the earlier one
    assert not any("without a verdict" in line for line in improvements.conclusions)
    rows = _table(improvements, "actions").rows
    assert [row[0] for row in rows] == ["Spread H100 pretraining", "Lend idle L40S"]
    checklist = build_review(month).appendix[0]
    assert any(line.startswith("The checklist is read live, as of ") and f"not only {month:%Y-%m}" in line
               for line in checklist.conclusions)


def test_a_previous_month_without_data_is_compared_with_nothing(two_months):
    """The month before the fixture's first has no data at all: "—" beside each figure, not zeros that make
    everything "new"."""
    review = build_review(two_months["previous"])
    assert all(row.previous is None and row.change == "—" for row in review.comparison.rows)
    assert all(f.previous is None for group in review.groups for f in group.figures)  # audit counts too
    assert "no usage in" in review.summary[0]


def test_the_summary_quotes_the_model_most_often_over_capacity(two_months):
    month = two_months["month"]
    CapacityDaily.objects.filter(day=month + timedelta(days=20), gpu_model="A100").update(peak_demand_gpus=99)
    resources = _group(build_review(month), "resources").conclusions
    over = [line for line in resources if "exceeded capacity" in line]
    assert over[0].startswith("H100 demand exceeded capacity on 2 of") and over[1].startswith("A100 ")
    assert over[0] in build_review(month).summary


def test_coverage_is_complete_only_when_every_day_has_data(two_months):
    month = two_months["month"]
    review = build_review(month)
    days = next_month(month) - month
    assert review.coverage == replace(review.coverage, complete=True, days_with_data=days.days,
                                      days_expected=days.days, days_in_month=days.days)
    CapacityDaily.objects.filter(day__in=[month, month + timedelta(days=1), month + timedelta(days=9)]).delete()
    coverage = build_review(month).coverage
    assert not coverage.complete and coverage.days_with_data == days.days - 3
    second, tenth = month + timedelta(days=1), month + timedelta(days=9)
    assert f"{month.isoformat()} to {second.isoformat()}, {tenth.isoformat()}" in coverage.text
    assert f"first day with data {(month + timedelta(days=2)).isoformat()}" in coverage.text
    assert coverage.text in build_review(month).summary
    # A tenant's pack counts the days the rollup ran, not the days the tenant used GPUs (an idle day is no gap).
    vision = build_review(month, Tenant.objects.get(name="vision")).coverage
    assert vision == replace(coverage, text=vision.text)
    assert build_review(next_month(next_month(month))).coverage.complete is False  # not started yet


def test_tenant_pack_has_only_that_tenants_figures(two_months):
    month = two_months["month"]
    vision = Tenant.objects.get(name="vision")
    review = build_review(month, vision)
    text = json.dumps(review.to_json())
    assert [word for word in OTHER_TENANT_WORDS if word in text] == []
    assert review.tenant == "vision" and review.appendix == []
    assert "vision" in review.title
    hours = reports.report_for(month, vision)[0]["gpu_hours_allocated"]
    assert hours == 80.0  # two jobs of 4 A100 GPUs for 10 h
    assert f"{hours} GPU-hours allocated" in _group(review, "resources").conclusions[0]
    assert {row[0] for row in _table(_group(review, "resources"), "quotas").rows} == {"vision"}
    assert {row[0] for row in _table(_group(review, "governance"), "permissions").rows} == {"vision"}
    assert "1 request approved, 0 denied" in text  # its own only
    assert any(line.startswith("The platform's shared fleet has ")
               for line in _group(review, "resources").conclusions)  # the fleet is said to be shared
    assert "Every tenant has a tenant admin." not in text  # a tenant's pack speaks of that tenant only
    assert [row[1] for row in _table(_group(review, "improvements"), "changes").rows] == ["Quota changed"]
    improvements = _group(review, "improvements")
    assert {t.key for t in improvements.tables} == {"actions", "changes"}  # no plan, no empty advice table
    assert improvements.conclusions[0].startswith("Capacity advice is made for the whole platform")


def test_bounded_queries_whatever_the_jobs(two_months, django_assert_max_num_queries):
    month = two_months["month"]
    users = two_months["users"]
    a100 = gpus_of("dc1-r3-a100-02", 1)
    for number in range(40):
        start = _day(month, 12 + number % 10, number % 20)
        ran_job(users["alice"], "vision/detection", a100, start, start + timedelta(minutes=30),
                status=JobStatus.FAILED if number % 4 == 0 else JobStatus.SUCCEEDED,
                category=FailureCategory.OUT_OF_MEMORY if number % 4 == 0 else "")
    rollup(month, month + timedelta(days=27), force=True)
    assert JobFact.objects.count() > 45
    # two reports (the month and the one before), a few queries each; the least efficient large jobs two of them and
    # two per large job of the month measured (the small jobs added here are none of them; at most 50 are measured);
    # each closed month's what-if sizing that its capacity advice cites, one each
    with django_assert_max_num_queries(107):
        build_review(month)


def test_language_is_the_one_asked_for_and_the_active_one_stays(two_months):
    review = build_review(two_months["month"], language="zh-hans")
    assert review.language == "zh-hans"
    assert timezone.get_current_timezone_name() and build_review(two_months["month"]).language == "en"


# --- the command ----------------------------------------------------------------------------------------


def _pdf_text(path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def test_command_writes_a_pdf_with_the_four_groups_and_the_gpu_hours(two_months, tmp_path):
    month = two_months["month"]
    path = tmp_path / "pack.pdf"
    err = io.StringIO()
    call_command("review_pack", "--month", f"{month:%Y-%m}", "--format", "pdf", "--output", str(path), stderr=err)
    assert path.read_bytes().startswith(b"%PDF")
    text = _pdf_text(path)
    for heading in ("Resources", "Tasks", "Governance", "Improvements", "Acceptance checklist"):
        assert heading in text
    assert str(reports.report_for(month)[0]["gpu_hours_allocated"]) in text
    assert err.getvalue().startswith(f"wrote {path} (") and " pages, " in err.getvalue()


def test_command_writes_a_spreadsheet_with_a_sheet_per_group_and_numbers(two_months, tmp_path):
    month = two_months["month"]
    vision = Tenant.objects.get(name="vision")
    path = tmp_path / "pack.xlsx"
    call_command("review_pack", "--month", f"{month:%Y-%m}", "--tenant", "vision", "--format", "xlsx",
                 "--output", str(path), stderr=io.StringIO())
    book = openpyxl.load_workbook(path)
    for title in ("Resources", "Tasks", "Governance", "Improvements"):
        assert any(title in name for name in book.sheetnames), book.sheetnames
    sheet = book[next(name for name in book.sheetnames if "Resources" in name)]
    hours = reports.report_for(month, vision)[0]["gpu_hours_allocated"]
    numbers = [cell.value for row in sheet.iter_rows() for cell in row if isinstance(cell.value, int | float)]
    assert hours in numbers
    assert not any(cell.value == str(hours) for row in sheet.iter_rows() for cell in row)


@pytest.mark.parametrize(("args", "option"), [
    (["--month", "2026-13"], "--month"), (["--tenant", "nobody"], "--tenant"), (["--format", "docx"], "--format"),
    (["--language", "fr"], "--language")])
def test_command_names_the_bad_option(world, tmp_path, args, option):
    base = {"--month": "2026-10", "--format": "pdf", "--output": str(tmp_path / "x")}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    with pytest.raises(CommandError) as error:
        call_command("review_pack", *[part for pair in base.items() for part in pair])
    assert str(error.value).startswith(option)
    if option == "--tenant":
        assert "nlp, speech, vision" in str(error.value)
    assert not (tmp_path / "x").exists()


# --- the views -------------------------------------------------------------------------------------------


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admin_downloads_both_formats(two_months):
    month = f"{two_months['month']:%Y-%m}"
    admin = _client(two_months["users"]["admin"])
    pdf = admin.get(f"/reports/{month}/pack.pdf")
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF")
    assert pdf["Content-Disposition"] == f'attachment; filename="gpuportal-review-{month}-platform.pdf"'
    assert "private" in pdf["Cache-Control"]
    xlsx = admin.get(f"/reports/{month}/vision/pack.xlsx")
    assert xlsx.status_code == 200 and xlsx["Content-Type"].startswith("application/vnd.openxmlformats")
    assert xlsx["Content-Disposition"] == f'attachment; filename="gpuportal-review-{month}-vision.xlsx"'
    assert openpyxl.load_workbook(io.BytesIO(xlsx.content)).sheetnames


def test_report_pages_link_the_packs(two_months):
    month = f"{two_months['month']:%Y-%m}"
    dave = _client(two_months["users"]["dave"])
    page = dave.get(f"/reports/{month}/").content.decode()
    assert f'href="/reports/{month}/pack.pdf"' in page and f'href="/reports/{month}/pack.xlsx"' in page
    assert "Review pack (PDF)" in page and "Review pack (spreadsheet)" in page
    mine = _client(two_months["users"]["alice"]).get(f"/reports/{month}/vision/").content.decode()
    assert f'href="/reports/{month}/vision/pack.pdf"' in mine
    index = _client(two_months["users"]["alice"]).get("/reports/").content.decode()
    assert f'href="/reports/{month}/vision/pack.xlsx"' in index and f"/reports/{month}/pack.pdf" not in index


def test_who_may_download_follows_the_report_page(two_months):
    month = f"{two_months['month']:%Y-%m}"
    alice = _client(two_months["users"]["alice"])
    assert alice.get(f"/reports/{month}/pack.pdf").status_code == 403  # the platform pack: managers and admins
    assert alice.get(f"/reports/{month}/nlp/pack.pdf").status_code == 404  # another tenant's
    mine = alice.get(f"/reports/{month}/vision/pack.xlsx")
    assert mine.status_code == 200
    assert alice.get(f"/reports/{month}/vision/pack.docx").status_code == 404
    assert alice.get("/reports/2026-13/vision/pack.pdf").status_code == 404
    assert Client().get(f"/reports/{month}/vision/pack.pdf").status_code == 302  # to the sign-in page


# --- a frozen month's pack, stored ------------------------------------------------------------------------


@pytest.fixture
def rendered(monkeypatch):
    """Counts the renderings (the expensive step a stored pack skips)."""
    calls = []
    real = review_formats.render

    def counting(review, fmt):
        calls.append((review.language, fmt))
        return real(review, fmt)

    monkeypatch.setattr(review_formats, "render", counting)
    return calls


def test_the_second_download_of_a_frozen_pack_renders_nothing_and_sends_the_same_bytes(two_months, rendered):
    month = two_months["month"]
    reports.freeze(month)
    admin = _client(two_months["users"]["admin"])
    first = admin.get(f"/reports/{month:%Y-%m}/pack.pdf")
    first_zone = StoredReviewPack.objects.get().time_zone
    second = admin.get(f"/reports/{month:%Y-%m}/pack.pdf")
    assert first.status_code == second.status_code == 200 and first.content.startswith(b"%PDF")
    assert second.content == first.content and len(rendered) == 1
    assert second["Content-Disposition"] == first["Content-Disposition"]
    # Another language and another format are renderings of their own, each once.
    chinese = admin.get(f"/reports/{month:%Y-%m}/pack.pdf", HTTP_ACCEPT_LANGUAGE="zh-hans")
    admin.get(f"/reports/{month:%Y-%m}/pack.xlsx")
    admin.get(f"/reports/{month:%Y-%m}/pack.xlsx")
    assert chinese.content != first.content and len(rendered) == 3
    assert StoredReviewPack.objects.count() == 3
    # A reader in another time zone gets the moments of the pack in theirs: a rendering of its own.
    assert admin.post("/account/preferences/", {"time_zone": "Asia/Shanghai"}).status_code in (200, 302)
    admin.get(f"/reports/{month:%Y-%m}/pack.xlsx")
    assert len(rendered) == 4 and set(StoredReviewPack.objects.values_list("time_zone", flat=True)) == {
        "Asia/Shanghai", first_zone}


def test_an_unfrozen_month_is_rendered_for_each_download(two_months, rendered):
    alice = _client(two_months["users"]["alice"])
    for _ in range(2):
        assert alice.get(f"/reports/{two_months['month']:%Y-%m}/vision/pack.xlsx").status_code == 200
    assert len(rendered) == 2 and not StoredReviewPack.objects.exists()


def test_a_regenerated_report_is_a_new_snapshot_rendered_anew(two_months, rendered):
    month, users = two_months["month"], two_months["users"]
    reports.freeze(month)
    first = stored.pack_file(month, None, "pdf", "en")
    assert stored.pack_file(month, None, "pdf", "en").stored and len(rendered) == 1
    reports.regenerate(month, None, users["admin"], "late readings")
    again = stored.pack_file(month, None, "pdf", "en")
    assert again.stored and len(rendered) == 2 and again.content.startswith(b"%PDF")
    assert first.filename == again.filename == f"gpuportal-review-{month:%Y-%m}-platform.pdf"


def test_a_regenerated_previous_month_replaces_the_stored_rendering(two_months, rendered):
    """The pack compares with the month before: new figures there change the digest, so the pack is rendered
    anew and the rendering of the old digest is dropped, not kept beside it. (Regenerating with the same
    figures keeps the digest: the stored pack is still right.)"""
    month, before = two_months["month"], two_months["previous"]
    old = reports.freeze(before)
    reports.freeze(month)
    stored.pack_file(month, None, "xlsx", "en")
    assert stored.pack_file(month, None, "xlsx", "en").stored and len(rendered) == 1
    # A regeneration that found late readings: the old snapshot superseded, a new one with other figures.
    MonthlyReport.objects.filter(pk=old.pk).update(superseded_at=timezone.now())
    MonthlyReport.objects.create(month=old.month, tenant=None, generated_at=timezone.now(), reason="late readings",
                                 data={**old.data, "gpu_hours_allocated": old.data["gpu_hours_allocated"] + 1})
    assert stored.pack_file(month, None, "xlsx", "en").stored and len(rendered) == 2
    assert StoredReviewPack.objects.filter(fmt="xlsx", language="en").count() == 1
