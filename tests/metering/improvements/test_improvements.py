"""Improvement actions: the metric rule, audited writes by platform admins only, the follow-up of
the next month's pack, and the pages."""

import re
from datetime import date, timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from audit.models import AuditAction, AuditRecord
from gpuportal.text.dates import day_start, local_day, month_start
from metering.improvements import services as improvements
from metering.improvements.queries import actions_for_review, metric_value
from metering.models import CapacityDaily, ImprovementAction, ImprovementStatus
from metering.reports import monthly as reports
from metering.usage.rollup import rollup
from scheduling.models import FailureCategory, JobStatus
from tenants.models import Tenant
from tests.metering.helpers import at, gpus_of, ran_job

SEP, OCT, NOV = date(2026, 9, 1), date(2026, 10, 1), date(2026, 11, 1)


@pytest.fixture
def two_months(users):
    """September: one A100 job that waited 5 h, A100 demand above capacity on 6 days. October: two jobs that
    waited 1 h (one failed out of memory), demand above capacity on 2 days."""
    a100 = gpus_of("dc1-r3-a100-01", 4)
    ran_job(users["alice"], "vision/detection", a100, at("2026-09-03T08:00"), at("2026-09-03T18:00"),
            wait=timedelta(hours=5))
    ran_job(users["alice"], "vision/detection", a100, at("2026-10-03T08:00"), at("2026-10-03T18:00"),
            wait=timedelta(hours=1))
    ran_job(users["bob"], "nlp/chat-eval", gpus_of("dc1-r3-a100-02", 2), at("2026-10-04T08:00"),
            at("2026-10-04T09:00"), status=JobStatus.FAILED, category=FailureCategory.OUT_OF_MEMORY,
            wait=timedelta(hours=1))
    rollup(SEP, date(2026, 10, 31), force=True)
    over = [date(2026, 9, d) for d in range(1, 7)] + [date(2026, 10, 1), date(2026, 10, 2)]
    assert CapacityDaily.objects.filter(gpu_model="A100", day__in=over).update(peak_demand_gpus=100) == 8
    return users


def _create(user, **overrides):
    fields = {"month": SEP, "tenant": None, "title": "Spread the A100 peaks", "owner": None, "due_month": OCT,
              "metric": "days_over_capacity", "direction": "down", "gpu_model": "A100"}
    fields.update(overrides)
    return improvements.create_action(user, **fields)


def _records(action_name):
    return list(AuditRecord.objects.filter(action=action_name).order_by("seq"))


def test_metric_value_reads_platform_and_per_model_figures(two_months):
    september, october = reports.build_report(SEP), reports.build_report(OCT)
    assert metric_value(september, "days_over_capacity", "A100") == 6
    assert metric_value(october, "days_over_capacity", "A100") == 2
    assert metric_value(september, "days_over_capacity") == 6  # distinct days any model was over
    assert metric_value(september, "wait_seconds_p95") == 5 * 3600
    assert metric_value(september, "wait_seconds_p95", "A100") == 5 * 3600
    assert metric_value(september, "gpu_hours_allocated") == september["gpu_hours_allocated"] == 40
    assert metric_value(september, "gpu_hours_allocated", "A100") == 40
    assert metric_value(october, "failed_share") == 0.5
    assert metric_value(october, "resource_failure_share") == 1.0
    assert metric_value(september, "resource_failure_share") == 0.0  # jobs ran, none failed
    rate = metric_value(september, "allocation_rate", "A100")
    assert rate == pytest.approx(40 / (32 * 24 * 30), abs=1e-4)
    assert metric_value(september, "idle_share", "A100") == pytest.approx(1 - rate, abs=1e-4)
    # What the report lacks is None, never a guess.
    tenant_report = reports.build_report(SEP, Tenant.objects.get(name="vision"))
    assert metric_value(tenant_report, "days_over_capacity", "A100") is None
    assert metric_value(september, "days_over_capacity", "B200") is None
    assert metric_value(september, "failed_share", "A100") is None
    assert metric_value({}, "efficiency") is None


def test_create_reads_the_baseline_from_the_month_and_records_it(two_months):
    admin = two_months["admin"]
    action = _create(admin, owner=two_months["carol"], target=2, recommendation="A100: spread the peaks")
    assert action.baseline == 6 and action.created_by == admin and action.status == ImprovementStatus.PLANNED
    [record] = _records(AuditAction.IMPROVEMENT_CREATE)
    assert record.object_id == str(action.pk) and record.actor == admin
    assert record.after["baseline"] == 6 and record.after["owner"] == "carol" and record.after["due_month"] == "2026-10"
    assert record.reason == "A100: spread the peaks"


def test_only_platform_admins_write(two_months, client):
    with pytest.raises(PermissionDenied):
        _create(two_months["dave"])  # a manager reads, does not write
    action = _create(two_months["admin"])
    with pytest.raises(PermissionDenied):
        improvements.update_action(two_months["frank"], action, "why", status="done")
    with pytest.raises(PermissionDenied):
        improvements.delete_action(two_months["dave"], action, "why")
    assert ImprovementAction.objects.get().status == ImprovementStatus.PLANNED
    client.force_login(two_months["dave"])
    assert client.get(reverse("metering:action-create")).status_code == 403
    assert client.post(reverse("metering:action-edit", args=[action.pk]), {"reason": "x"}).status_code == 403
    page = client.get(reverse("metering:action-list"))
    assert page.status_code == 200 and "Spread the A100 peaks" in page.content.decode()
    assert reverse("metering:action-edit", args=[action.pk]) not in page.content.decode()
    client.force_login(two_months["alice"])
    assert client.get(reverse("metering:action-list")).status_code == 403


def test_validation_names_the_field(two_months):
    admin = two_months["admin"]
    with pytest.raises(ValidationError) as caught:
        _create(admin, due_month=date(2026, 8, 1), title="", target=-1)
    assert {"due_month", "title", "target"} <= set(caught.value.message_dict)
    with pytest.raises(ValidationError) as caught:
        _create(admin, metric="failed_share")  # no per-model figure
    assert "metric" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        _create(admin, metric="idle_share", target=1.5)  # a share above 100 %
    assert "target" in caught.value.message_dict
    assert not ImprovementAction.objects.exists() and not _records(AuditAction.IMPROVEMENT_CREATE)


def test_update_and_delete_are_audited_with_their_reason(two_months):
    admin = two_months["admin"]
    action = _create(admin)
    with pytest.raises(ValidationError) as caught:
        improvements.update_action(admin, action, "  ", status="in_progress")
    assert "reason" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        improvements.update_action(admin, action, "typo", metric="efficiency")
    assert "metric" in caught.value.message_dict
    improvements.update_action(admin, action, "Work started", status="in_progress", owner=two_months["carol"],
                               notes="")
    [change] = _records(AuditAction.IMPROVEMENT_CHANGE)
    assert change.reason == "Work started"
    assert change.before == {"status": "planned", "owner": None}
    assert change.after == {"status": "in_progress", "owner": "carol"}
    improvements.update_action(admin, action, "again", status="in_progress")  # nothing changed: nothing recorded
    assert len(_records(AuditAction.IMPROVEMENT_CHANGE)) == 1
    improvements.delete_action(admin, action, "Made twice by mistake")
    [removal] = _records(AuditAction.IMPROVEMENT_DELETE)
    assert removal.reason == "Made twice by mistake" and removal.before["title"] == "Spread the A100 peaks"
    assert removal.before["status"] == "in_progress" and not ImprovementAction.objects.exists()


def test_the_next_months_pack_shows_state_current_value_and_whether_it_moved(two_months):
    admin = two_months["admin"]
    spread = _create(admin, owner=two_months["carol"])
    wait = _create(admin, title="Shorter waits", metric="wait_seconds_p95", gpu_model="", due_month=SEP,
                   target=2 * 3600)
    failures = _create(admin, title="Fewer failures", metric="failed_share", gpu_model="", due_month=NOV)
    improvements.update_action(admin, failures, "started", status="in_progress")
    closed = _create(admin, title="Closed in September", due_month=SEP)
    improvements.update_action(admin, closed, "done", status="done")
    ImprovementAction.objects.filter(pk=closed.pk).update(last_updated=day_start(SEP) + timedelta(days=20))
    later = _create(admin, title="From October, due November", month=OCT, due_month=NOV)
    due_now = _create(admin, title="From October, due October", month=OCT, due_month=OCT)

    rows = {row["id"]: row for row in actions_for_review(OCT)}
    assert set(rows) == {spread.pk, wait.pk, failures.pk, due_now.pk, later.pk}  # October's own plans too
    assert closed.pk not in rows and rows[later.pk]["moved"] is None  # planned from October: nothing to judge yet
    assert [row["id"] for row in actions_for_review(NOV)] == [wait.pk, spread.pk, failures.pk, due_now.pk, later.pk]

    assert rows[spread.pk]["baseline"] == 6 and rows[spread.pk]["current"] == 2 and rows[spread.pk]["moved"] is True
    assert rows[spread.pk]["owner"] == "carol" and rows[spread.pk]["status"] == "planned"
    assert rows[spread.pk]["due_month"] == "2026-10" and rows[spread.pk]["month_from"] == "2026-09"
    assert rows[spread.pk]["overdue"] is False and rows[spread.pk]["status_text"] == "Planned"

    assert rows[wait.pk]["moved"] is True and rows[wait.pk]["overdue"] is True  # due in September, still planned
    assert rows[wait.pk]["moved_text"] == ("95th percentile wait: 5.0 h → 1.0 h, moved as expected "
                                           "(target 2.0 h)")

    assert rows[failures.pk]["baseline"] == 0.0 and rows[failures.pk]["current"] == 0.5
    assert rows[failures.pk]["moved"] is False and rows[failures.pk]["status"] == "in_progress"
    assert "0.0 % → 50.0 %, moved the wrong way" in rows[failures.pk]["moved_text"]
    assert actions_for_review(OCT, Tenant.objects.get(name="vision")) == []  # platform actions only above


def test_list_page_with_and_without_actions(two_months, client):
    client.force_login(two_months["admin"])
    empty = client.get(reverse("metering:action-list")).content.decode()
    assert "No improvement action yet" in empty
    action = _create(two_months["admin"])
    page = client.get(reverse("metering:action-list")).content.decode()
    assert "Spread the A100 peaks" in page and reverse("metering:action-edit", args=[action.pk]) in page
    listed = reverse("metering:action-list")
    assert "Spread the A100 peaks" not in client.get(listed, {"status": "done"}).content.decode()
    assert "No action matches these filters" in client.get(listed, {"due": "2027-01"}).content.decode()
    assert "Spread the A100 peaks" in client.get(listed, {"due": "2026-10"}).content.decode()
    bad = client.get(reverse("metering:action-list"), {"due": "October"})
    assert bad.status_code == 400 and 'id="error-due"' in bad.content.decode()


def test_report_advice_links_to_a_prefilled_action(two_months, client):
    client.force_login(two_months["admin"])
    report = client.get(reverse("metering:platform-report", args=["2026-09"])).content.decode()
    assert "Turn into an action" in report
    advice = next(r for r in reports.build_report(SEP)["recommendations"] if r["gpu_model"] == "A100")
    assert advice["action"] == "spread"
    page = client.get(reverse("metering:action-create"), {"month": "2026-09", "gpu_model": "A100",
                                                           "recommendation": "spread"})
    form = page.context["form"]
    assert page.status_code == 200
    assert form.initial["metric"] == "days_over_capacity" and form.initial["direction"] == "down"
    assert form.initial["recommendation"] == advice["evidence"] and "A100" in form.initial["title"]
    assert escape(advice["evidence"]) in page.content.decode()
    blank = client.get(reverse("metering:action-create"))
    assert blank.status_code == 200 and not blank.context["form"].initial.get("title")
    client.force_login(two_months["dave"])
    assert "Turn into an action" not in client.get(reverse("metering:platform-report", args=["2026-09"])
                                                   ).content.decode()


def _form(**overrides):
    data = {"title": "Spread the A100 peaks", "month": "2026-09", "tenant": "", "gpu_model": "A100",
            "recommendation": "", "metric": "days_over_capacity", "direction": "down", "target": "2",
            "owner": "carol", "due_month": "2026-10", "notes": ""}
    data.update(overrides)
    return data


def test_create_page_refuses_a_bad_due_month_and_keeps_the_input(two_months, client):
    client.force_login(two_months["admin"])
    for due in ("2026-13", "2026-08"):
        page = client.post(reverse("metering:action-create"), _form(due_month=due, title="Keep what I typed"))
        body = page.content.decode()
        assert page.status_code == 400 and 'id="error-due_month"' in body
        assert 'value="Keep what I typed"' in body and f'value="{due}"' in body
    assert not ImprovementAction.objects.exists()
    created = client.post(reverse("metering:action-create"), _form(metric="wait_seconds_p95", target="1.5"))
    assert created.status_code == 302
    action = ImprovementAction.objects.get()
    assert action.target == 1.5 * 3600 and action.owner == two_months["carol"] and action.baseline == 5 * 3600


def test_edit_page_needs_a_reason_and_records_changes_and_removal(two_months, client):
    client.force_login(two_months["admin"])
    action = _create(two_months["admin"], target=2)
    url = reverse("metering:action-edit", args=[action.pk])
    page = client.get(url)
    assert page.status_code == 200 and page.context["form"].initial["target"] == 2
    data = {"title": action.title, "status": "done", "owner": "", "due_month": "2026-10", "target": "1",
            "notes": "Backfill on", "reason": ""}
    refused = client.post(url, data)
    assert refused.status_code == 400 and 'id="error-reason"' in refused.content.decode()
    assert 'Backfill on' in refused.content.decode()
    assert client.post(url, {**data, "reason": "Backfill switched on"}).status_code == 302
    action.refresh_from_db()
    assert action.status == "done" and action.target == 1 and action.notes == "Backfill on"
    [change] = _records(AuditAction.IMPROVEMENT_CHANGE)
    assert change.reason == "Backfill switched on" and change.before["status"] == "planned"
    assert client.post(url, {"delete-reason": ""}).status_code == 400
    assert client.post(url, {"delete-reason": "Duplicate"}).status_code == 302
    assert not ImprovementAction.objects.exists()
    assert _records(AuditAction.IMPROVEMENT_DELETE)[0].reason == "Duplicate"


def test_the_baseline_month_must_be_closed(two_months):
    admin = two_months["admin"]
    mid_november = at("2026-11-20T12:00")
    for month in (NOV, date(2027, 3, 1)):  # open, future
        with pytest.raises(ValidationError) as caught:
            _create(admin, month=month, due_month=month, now=mid_november)
        assert caught.value.message_dict["month"] == [
            f"month: only a closed month's report can be the baseline: {month:%Y-%m} is still open."]
    assert not ImprovementAction.objects.exists() and not _records(AuditAction.IMPROVEMENT_CREATE)
    assert _create(admin, month=OCT, due_month=NOV, now=mid_november).baseline == 2  # October had closed


def test_create_page_refuses_an_open_month_and_keeps_the_input(two_months, client):
    client.force_login(two_months["admin"])
    this_month = f"{month_start(local_day(timezone.now())):%Y-%m}"
    page = client.post(reverse("metering:action-create"),
                       _form(month=this_month, due_month=this_month, title="Keep what I typed"))
    body = page.content.decode()
    assert page.status_code == 400 and 'id="error-month"' in body
    assert escape(f"{this_month} is still open") in body
    assert 'value="Keep what I typed"' in body and f'value="{this_month}"' in body
    assert not ImprovementAction.objects.exists()


def test_an_open_months_pack_gives_no_verdict_on_partial_figures(two_months):
    spread = _create(two_months["admin"])  # September: 6 days over capacity
    [row] = actions_for_review(OCT, now=at("2026-10-20T12:00"))
    assert row["id"] == spread.pk and row["current"] == 2 and row["moved"] is None
    assert row["moved_text"] == ("Days with demand above capacity (A100): 6 d → 2 d so far in 2026-10 (the month "
                                 "is still open)")
    [closed] = actions_for_review(OCT, now=at("2026-11-20T12:00"))
    assert closed["moved"] is True and "moved as expected" in closed["moved_text"]


def test_an_action_from_the_packs_own_month_is_not_compared_with_itself(two_months):
    due_now = _create(two_months["admin"], title="From October, due October", month=OCT, due_month=OCT, target=1)
    [row] = actions_for_review(OCT, now=at("2026-11-20T12:00"))
    assert row["id"] == due_now.pk and row["baseline"] == row["current"] == 2
    assert row["moved"] is None and "did not move" not in row["moved_text"]
    assert row["moved_text"] == ("Days with demand above capacity (A100): 2 d in 2026-10, the baseline month; "
                                 "the following months are compared with it (target 1 d)")


def test_saving_the_edit_form_unchanged_records_no_target_change(two_months, client):
    client.force_login(two_months["admin"])
    action = _create(two_months["admin"], metric="wait_seconds_p95", gpu_model="", target=5000)  # 1.3889 h
    url = reverse("metering:action-edit", args=[action.pk])
    page = client.get(url)
    shown = re.search(r'<input[^>]*name="target"[^>]*value="([^"]*)"', page.content.decode()).group(1)
    assert shown == "1.39"
    data = {**page.context["form"].initial, "target": shown, "reason": "Reviewed, nothing to change"}
    assert client.post(url, data).status_code == 302
    action.refresh_from_db()
    assert action.target == 5000 and not _records(AuditAction.IMPROVEMENT_CHANGE)
    assert client.post(url, {**data, "target": "1.5", "notes": "Tighter"}).status_code == 302
    [change] = _records(AuditAction.IMPROVEMENT_CHANGE)
    assert change.before["target"] == 5000 and change.after["target"] == 1.5 * 3600
