"""The acceptance checklist: rows and statuses computed from live data, pilot notes with screenshots,
who may read and write, and a query count that does not grow with the jobs."""

import struct
import zlib
from datetime import date, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit import log as audit
from audit.models import AuditAction, AuditRecord
from fleet.models import Node, NodeEvent
from metering.acceptance import checklist as acceptance
from metering.acceptance.contract import Evidence
from metering.models import (
    AcceptanceArea,
    AcceptanceNote,
    CapacityDaily,
    ImprovementAction,
    ImprovementDirection,
    ImprovementMetric,
    MonthlyReport,
    UsageMonthly,
)
from metering.review import oversight as review_oversight
from metering.review.parts import ReviewContext
from scheduling.models import FailureCategory, Job, JobAllocation, JobStatus, TaskType
from tenants.models import Project, Quota, Tenant
from tests.metering.helpers import at, gpus_of, ran_job

AREAS = ["multi_card", "multi_node", "multi_tenant", "operations"]
NCCL_LINE = "NCCL WARN NET/IB : Got completion from peer with error 12"


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG, built here so the test needs no image library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
            + chunk(b"IEND", b""))


def by_area(rows) -> dict:
    return {row.area: row for row in rows}


def multi_card_job(users, status=JobStatus.SUCCEEDED, category=""):
    start = at("2026-11-10T08:00:00")
    return ran_job(users["alice"], "vision/detection", gpus_of("dc1-r1-h100-01", 8), start,
                   start + timedelta(hours=2), status=status, category=category)


#: Stands for "the diagnosis has no node key at all" (an older executor, or a diagnosis cut short).
NO_KEY = object()


def communication_failure(users, node="dc1-r1-h100-02", attempts=True):
    """A two-node job that failed with a cross-node communication diagnosis naming ``node`` (or none: "",
    None or ``NO_KEY``); without ``attempts`` the executor state holds only the final diagnosis."""
    start = at("2026-11-11T08:00:00")
    job = ran_job(users["bob"], "nlp/llm-pretrain", gpus_of("dc1-r1-h100-01", 4) + gpus_of("dc1-r1-h100-02", 4),
                  start, start + timedelta(hours=1), nodes=2, status=JobStatus.FAILED,
                  category=FailureCategory.COMMUNICATION)
    diagnosis = {"category": "communication", "message": f"Cross-node communication failed: {NCCL_LINE}",
                 "advice": "", "exit_code": None, "evidence": {"log_line": NCCL_LINE}}
    if node is not NO_KEY:
        diagnosis["node"] = node
    state = {"attempts": [{"attempt": 0, **diagnosis}], "diagnosis": diagnosis} if attempts else {
        "diagnosis": diagnosis}
    Job.objects.filter(pk=job.pk).update(executor_state=state)
    return job


def succeeded_multi_node_jobs(users, count=5):
    """Enough successes that one communication failure stays under the attention share."""
    start = at("2026-11-12T08:00:00")
    for hour in range(count):
        ran_job(users["bob"], "nlp/llm-pretrain", gpus_of("dc1-r2-h100-03", 8) + gpus_of("dc1-r2-h100-04", 8),
                start + timedelta(hours=hour), start + timedelta(hours=hour, minutes=30), nodes=2)


def usage(tenant_name: str, model: str, hours: float, month=date(2026, 10, 1)):
    project = Project.objects.filter(tenant__name=tenant_name).first()
    user = project.tenant.memberships.first().user
    return UsageMonthly.objects.create(
        month=month, cluster=Node.objects.first().cluster, tenant=project.tenant, project=project, user=user,
        task_type=TaskType.objects.get(code="research"), gpu_model=model, allocated_gpu_seconds=hours * 3600)


def platform_report(month=date(2026, 10, 1), action="add"):
    advice = {"gpu_model": "H100", "action": action, "figures": {},
              "evidence": "H100: demand above capacity on 11 of 31 days, p95 wait 5.0 h -> add 8 H100 GPUs"}
    return MonthlyReport.objects.create(
        month=month, tenant=None, generated_at=at("2026-11-01T01:00:00"), reason="Frozen after the month closed.",
        data={"recommendations": [advice], "efficiency": 0.62, "wait_seconds_p95": 18000,
              "jobs": {"submitted": 40, "failed": 6}})


def capacity_days(count: int, first=date(2026, 10, 1)):
    CapacityDaily.objects.bulk_create(CapacityDaily(day=first + timedelta(days=i), gpu_model="H100", capacity_gpus=32)
                                      for i in range(count))


# --- rows ------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_no_data_every_row_missing_with_why():
    rows = acceptance.checklist()
    assert [row.area for row in rows] == AREAS
    assert {row.status for row in rows} == {"missing"}
    assert [row.evidence for row in rows] == [[], [], [], []]
    rows = by_area(rows)
    assert "No multi-card job" in rows["multi_card"].why
    assert rows["multi_node"].why == "No multi-node job has run yet."
    assert "No tenant usage" in rows["multi_tenant"].why
    assert "no frozen report" in rows["operations"].why
    assert all(row.status_text == "Evidence missing" and row.capability and row.rule
               for row in rows.values())
    assert "fewer than 20 % of the multi-node jobs" in rows["multi_node"].rule
    assert "at least 30 days of data" in rows["operations"].rule


def test_jobs_give_multi_card_present_and_multi_node_attention(world, users):
    Node.objects.filter(name="dc1-r1-h100-02").update(health="unhealthy")
    bad = Node.objects.get(name="dc1-r1-h100-02")
    NodeEvent.objects.create(node=bad, at=at("2026-11-11T09:00:00"), kind=NodeEvent.Kind.HEALTH,
                             from_state="healthy", to_state="unhealthy", reason="InfiniBand port down")
    card = multi_card_job(users)
    node_job = communication_failure(users)

    rows = by_area(acceptance.checklist())
    card_row, node_row = rows["multi_card"], rows["multi_node"]
    assert card_row.status == "present"
    assert "1 multi-card job succeeded on H100 (8 GPUs, NVLink)" in card_row.why
    assert "none failed with a node, GPU or communication fault" in card_row.why
    urls = [item.url for item in card_row.evidence]
    assert reverse("scheduling:job-detail", args=[card.pk]) in urls
    assert reverse("scheduling:job-detail", args=[node_job.pk]) not in urls  # two nodes: the other row's
    assert any(item.text.startswith("H100: 4 nodes") for item in card_row.evidence)

    assert node_row.status == "attention"
    assert "1 multi-node job ran but it did not succeed." in node_row.why
    assert "1 of 1 multi-node jobs (100 %) hit a communication failure" in node_row.why
    assert "names no node" not in node_row.why  # the diagnosis localised it
    texts = {item.url: item.text for item in node_row.evidence}
    log_url = reverse("scheduling:job-detail", args=[node_job.pk]) + "#job-log"
    assert "localised to dc1-r1-h100-02" in texts[log_url] and NCCL_LINE in texts[log_url]
    assert "on dc1-r1-h100-01, dc1-r1-h100-02" in texts[reverse("scheduling:job-detail", args=[node_job.pk])]
    node_url = reverse("fleet:node-detail", args=["dc1-r1-h100-02"])
    assert "InfiniBand port down" in texts[node_url]


def test_communication_failure_without_a_node_is_not_localised(world, users):
    communication_failure(users, node="")
    row = by_area(acceptance.checklist())["multi_node"]
    assert row.status == "attention"
    assert "1 communication failure names no node: the fault was not localised." in row.why
    assert any("no node named" in item.text for item in row.evidence)


@pytest.mark.parametrize("node", [None, NO_KEY], ids=["null", "missing"])
@pytest.mark.parametrize("attempts", [True, False], ids=["attempts", "diagnosis-only"])
def test_null_or_missing_node_is_not_localised(world, users, node, attempts):
    """A null or absent node is as unlocalised as "", whether the node is read from the attempts or, when the
    executor recorded none, from the final diagnosis."""
    succeeded_multi_node_jobs(users)
    communication_failure(users, node=node, attempts=attempts)
    row = by_area(acceptance.checklist())["multi_node"]
    assert row.status == "attention"
    assert row.why == "1 communication failure names no node: the fault was not localised."


def test_diagnosis_naming_a_node_localises_a_failure_without_attempts(world, users):
    succeeded_multi_node_jobs(users)
    job = communication_failure(users, attempts=False)
    row = by_area(acceptance.checklist())["multi_node"]
    assert row.status == "present", row.why
    assert row.why.endswith("1 communication failure, localised to its node.")
    texts = {item.url: item.text for item in row.evidence}
    assert "localised to dc1-r1-h100-02" in texts[reverse("scheduling:job-detail", args=[job.pk]) + "#job-log"]


def test_multi_node_present_when_jobs_succeed_and_failures_are_rare(world, users):
    succeeded_multi_node_jobs(users)
    communication_failure(users)
    row = by_area(acceptance.checklist())["multi_node"]
    assert row.status == "present", row.why
    assert row.why == ("5 multi-node jobs succeeded (up to 2 nodes); 1 communication failure, localised to its "
                          "node.")


def test_infrastructure_faults_on_multi_card_need_attention(world, users):
    multi_card_job(users)
    multi_card_job(users, status=JobStatus.FAILED, category=FailureCategory.GPU_FAULT)
    row = by_area(acceptance.checklist())["multi_card"]
    assert row.status == "attention"
    assert "ended 1 of 2 finished multi-card jobs (50 %)" in row.why


def test_unknown_model_is_not_recognised(world, users):
    multi_card_job(users)
    Node.objects.filter(name="dc2-r2-l40s-04").update(gpu_model="X9")
    row = by_area(acceptance.checklist())["multi_card"]
    assert row.status == "attention"
    assert "The catalogue lacks the memory or interconnect of X9." in row.why


def test_world_without_usage_has_only_audit_evidence(world):
    """The world's quotas and memberships were audited, but no tenant has used anything yet."""
    row = by_area(acceptance.checklist())["multi_tenant"]
    assert row.status == "attention"
    assert row.why == "No tenant has metered usage yet."
    quota_url = reverse("audit:log") + "?action=quota.change"
    assert quota_url in [item.url for item in row.evidence]


def test_tenant_usage_and_audit_give_multi_tenant_present(world, users):
    usage("vision", "A100", 120)
    usage("nlp", "H100", 300)
    audit.record(AuditAction.QUOTA_CHANGE, Quota.objects.get(tenant__name="nlp", gpu_model="H100"),
                 actor=users["admin"], reason="pilot")
    row = by_area(acceptance.checklist())["multi_tenant"]
    assert row.status == "present", row.why
    assert row.why.startswith("2 tenants used 420.0 GPU-hours, each only on models it has a quota for;")
    texts = {item.url: item.text for item in row.evidence}
    nlp_url = reverse("metering:tenant-report", kwargs={"month": "2026-10", "tenant": "nlp"})
    assert texts[nlp_url] == "nlp: 300.0 GPU-hours allocated, quotas on 3 models"
    assert list(texts)[0] == nlp_url  # the biggest user first


def test_usage_outside_quota_needs_attention(world):
    usage("vision", "A100", 10)
    usage("speech", "H100", 10)  # speech has no H100 quota: it may not use H100
    row = by_area(acceptance.checklist())["multi_tenant"]
    assert row.status == "attention"
    assert "speech/H100" in row.why


def test_report_snapshot_listed_and_short_trial_needs_attention(world):
    capacity_days(12)
    platform_report()
    row = by_area(acceptance.checklist())["operations"]
    assert row.status == "attention"
    assert "Only 12 days of data: keep at least 30 days" in row.why
    assert "The 2026-10 report advises H100: Add GPUs, but no improvement action" in row.why
    report_url = reverse("metering:platform-report", kwargs={"month": "2026-10"})
    texts = [item.text for item in row.evidence if item.url == report_url]
    assert texts[0] == "platform report 2026-10: efficiency 62 %, p95 wait 5.0 h, 6 of 40 jobs failed"
    assert "-> add 8 H100 GPUs" in texts[1]
    assert row.evidence[0].text == "12 days of usage or capacity data, from 2026-10-01 to 2026-10-12"


def test_closed_month_without_snapshot_links_its_live_report(world):
    capacity_days(3, first=timezone.localdate().replace(day=1) - timedelta(days=3))
    row = by_area(acceptance.checklist())["operations"]
    assert row.status == "attention"
    assert "No closed month has a frozen platform report yet" in row.why
    last_month = f"{timezone.localdate().replace(day=1) - timedelta(days=1):%Y-%m}"
    assert row.evidence[1] == Evidence(text=f"platform report {last_month} (live figures, not frozen yet)",
                                       url=reverse("metering:platform-report", kwargs={"month": last_month}))


def test_a_month_of_data_and_a_followed_report_give_operations_present(world, users):
    capacity_days(31)
    platform_report()
    ImprovementAction.objects.create(month=date(2026, 10, 1), title="Buy 8 H100", due_month=date(2026, 12, 1),
                                     metric=ImprovementMetric.DAYS_OVER_CAPACITY,
                                     direction=ImprovementDirection.DOWN)
    row = by_area(acceptance.checklist())["operations"]
    assert row.status == "present", row.why
    assert row.why.startswith("31 days of data; the latest frozen report (2026-10) concludes: H100: demand")
    assert reverse("metering:action-list") in [item.url for item in row.evidence]


def test_tenant_action_does_not_follow_the_platform_report(world, users):
    """The platform report's advice is answered by a platform action; a tenant's action for the same month is
    about its own report."""
    capacity_days(31)
    platform_report()
    ImprovementAction.objects.create(month=date(2026, 10, 1), title="Move vision to L40S",
                                     tenant=Tenant.objects.get(name="vision"),
                                     due_month=date(2026, 12, 1), metric=ImprovementMetric.DAYS_OVER_CAPACITY,
                                     direction=ImprovementDirection.DOWN)
    row = by_area(acceptance.checklist())["operations"]
    assert row.status == "attention"
    assert row.why == ("The 2026-10 report advises H100: Add GPUs, but no improvement action records what was "
                          "decided.")
    assert reverse("metering:action-list") not in [item.url for item in row.evidence]


def test_query_count_does_not_grow_with_jobs(world, users, django_assert_max_num_queries):
    multi_card_job(users)
    communication_failure(users)
    with CaptureQueriesContext(connection) as few:
        acceptance.checklist()
    for model in (Job.objects.filter(node_count=1).first(), Job.objects.filter(node_count=2).first()):
        fields = {f.attname: getattr(model, f.attname) for f in Job._meta.concrete_fields if f.name != "id"}
        Job.objects.bulk_create(Job(**fields) for _ in range(60))
    with django_assert_max_num_queries(len(few.captured_queries)):
        rows = by_area(acceptance.checklist())
    assert len(rows["multi_card"].evidence) <= 10 + acceptance.EVIDENCE_LINKS
    assert "61 multi-card jobs succeeded" in rows["multi_card"].why
    assert "61 of 61 multi-node jobs" in rows["multi_node"].why


# --- the page, notes and screenshots ---------------------------------------------------------------------------


def note_post(client, **fields):
    return client.post(reverse("acceptance:note-add"), {"area": "multi_node", "text": "", "configuration": "",
                                                        **fields})


def test_admin_adds_a_note_with_a_screenshot_audited_and_served(world, users, client):
    client.force_login(users["admin"])
    png = tiny_png()
    response = note_post(client, text="Ran the NCCL all-reduce test on two nodes.", configuration="NCCL_IB_HCA=mlx5",
                         screenshot=SimpleUploadedFile("all reduce.png", png, content_type="image/png"))
    assert response.status_code == 302
    assert response["Location"] == reverse("acceptance:checklist") + "#row-multi_node"
    note = AcceptanceNote.objects.get()
    assert (note.area, note.author, note.screenshot_type, bytes(note.screenshot)) == (
        "multi_node", users["admin"], "image/png", png)
    record = AuditRecord.objects.get(action=AuditAction.ACCEPTANCE_NOTE)
    assert record.actor == users["admin"] and record.after["screenshot"]["bytes"] == len(png)

    page = client.get(reverse("acceptance:checklist"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Ran the NCCL all-reduce test on two nodes." in html and "NCCL_IB_HCA=mlx5" in html
    row = by_area(page.context["rows"])["multi_node"]
    assert row.notes[0].has_screenshot and row.notes[0].author == "admin"
    assert row.notes[0].screenshot_url in html
    assert "<script>" not in html  # the site's CSP allows no inline script

    shot = client.get(row.notes[0].screenshot_url)
    assert shot.status_code == 200 and shot.content == png
    assert shot["Content-Type"] == "image/png"
    assert shot["Content-Disposition"] == 'inline; filename="all_reduce.png"'
    assert shot["X-Content-Type-Options"] == "nosniff"


def test_text_file_renamed_png_is_refused_and_the_text_kept(world, users, client):
    client.force_login(users["admin"])
    response = note_post(client, text="Kept text 42", screenshot=SimpleUploadedFile(
        "notes.png", b"just some text, not an image\n", content_type="image/png"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "Screenshot: only a PNG or JPEG image (at most 5 MB); this file is neither." in html
    assert "Kept text 42" in html
    assert 'id="error-screenshot"' in html
    assert not AcceptanceNote.objects.exists()
    assert not AuditRecord.objects.filter(action=AuditAction.ACCEPTANCE_NOTE).exists()


def test_screenshot_over_5_mb_is_refused(world, users, client):
    client.force_login(users["admin"])
    big = b"\x89PNG\r\n\x1a\n" + b"\0" * (acceptance.SCREENSHOT_MAX_BYTES + 1 - 8)
    response = note_post(client, text="big one", configuration="cfg 7",
                         screenshot=SimpleUploadedFile("big.png", big, content_type="image/png"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "Screenshot: at most 5 MB; this file has 5.0 MB." in html
    assert "big one" in html and "cfg 7" in html
    assert not AcceptanceNote.objects.exists()


def test_empty_note_and_unknown_area_are_refused(world, users, client):
    client.force_login(users["admin"])
    empty = note_post(client)
    assert empty.status_code == 400
    assert "Write a note, paste a configuration or attach a screenshot." in empty.content.decode()
    stray = note_post(client, area="nonsense", text="hello")
    assert stray.status_code == 400
    assert "Area: Select a valid choice." in stray.content.decode()
    assert not AcceptanceNote.objects.exists()


def test_manager_reads_but_adds_nothing(world, users, client):
    client.force_login(users["dave"])
    page = client.get(reverse("acceptance:checklist"))
    assert page.status_code == 200
    assert 'href="/acceptance/"' in page.content.decode()  # the navigation link
    assert reverse("acceptance:note-add") not in page.content.decode()
    assert note_post(client, text="manager note").status_code == 403
    assert not AcceptanceNote.objects.exists()


def test_others_get_403(world, users, client):
    note = AcceptanceNote.objects.create(area=AcceptanceArea.MULTI_CARD, text="x", screenshot=tiny_png(),
                                         screenshot_type="image/png", author=users["admin"])
    client.force_login(users["frank"])  # a tenant admin
    assert client.get(reverse("acceptance:checklist")).status_code == 403
    assert client.get(reverse("acceptance:screenshot", args=[note.pk])).status_code == 403
    assert note_post(client, text="tenant note").status_code == 403
    assert 'href="/acceptance/"' not in client.get(reverse("scheduling:dashboard")).content.decode()
    client.logout()
    assert client.get(reverse("acceptance:checklist")).status_code == 302  # to the login page


def test_page_query_count_bounded(world, users, client, django_assert_max_num_queries):
    multi_card_job(users)
    communication_failure(users)
    for area in AREAS:
        AcceptanceNote.objects.create(area=area, text=f"note {area}", author=users["admin"])
    client.force_login(users["admin"])
    with django_assert_max_num_queries(40):
        page = client.get(reverse("acceptance:checklist"))
    assert page.status_code == 200
    assert [row.status for row in page.context["rows"]] == ["present", "attention", "attention", "missing"]


def test_review_pack_appendix_carries_the_checklist(world, users):
    """The pack's appendix (``review_oversight.acceptance``) is the checklist as of the pack's making."""
    multi_card_job(users)
    now = timezone.now()
    ctx = ReviewContext(month=date(2026, 11, 1), tenant=None, now=now, report={}, previous={},
                        previous_month=date(2026, 10, 1))
    group = review_oversight.acceptance(ctx)
    assert group.key == "acceptance"
    (table,) = group.tables
    assert [row[0] for row in table.rows] == ["Multi-card", "Multi-node", "Multi-tenant", "Operations"]
    assert table.rows[0][2] == "Evidence present"
    assert table.rows[1][2:4] == ["Evidence missing", "No multi-node job has run yet."]
    assert group.conclusions[0] == "1 of 4 areas have their evidence."


@pytest.mark.parametrize("node, attempts", [("dc1-r1-h100-02", True), ("dc1-r1-h100-02", False), ("", True),
                                            (None, True), (NO_KEY, False)])
def test_the_python_rule_for_sqlite_counts_as_the_sql_does(world, users, node, attempts, monkeypatch):
    """The embedded demo's SQLite has no JSON containment or paths: the same rule in Python must agree."""
    succeeded_multi_node_jobs(users)
    communication_failure(users, node=node, attempts=attempts)
    ran = Job.objects.filter(node_count__gte=2, started_at__isnull=False)
    in_sql = acceptance._communication_failures(ran)
    monkeypatch.setattr(connection, "vendor", "sqlite")
    in_python = acceptance._communication_failures(ran)
    assert in_python[0] == in_sql[0] and in_sql[0].communication == 1
    assert [job.pk for job in in_python[1]] == [job.pk for job in in_sql[1]]


def test_a_retried_multi_node_job_shows_where_its_last_attempt_ran(world, users):
    """Two nodes asked, three nodes among its allocations: the first attempt's and the retry's, told apart."""
    job = communication_failure(users)
    retried_at = job.allocations.first().allocated_at + timedelta(minutes=30)
    JobAllocation.objects.bulk_create(JobAllocation(job=job, gpu=gpu, allocated_at=retried_at)
                                      for gpu in gpus_of("dc1-r2-h100-03", 4) + gpus_of("dc1-r2-h100-04", 4))
    texts = [item.text for item in by_area(acceptance.checklist())["multi_node"].evidence]
    placed = next(text for text in texts if text.startswith(f"Job #{job.pk} ") and ", on " in text)
    assert placed.endswith(", on dc1-r2-h100-03, dc1-r2-h100-04 (earlier attempts on dc1-r1-h100-01, "
                           "dc1-r1-h100-02)")
