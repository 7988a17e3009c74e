"""The review pack in Chromium: a platform admin signs in, opens the last closed month's report and
downloads the pack as PDF and as a spreadsheet from the links at the top; both files are read back."""

import subprocess
from datetime import timedelta

import openpyxl
import pytest
from django.utils import timezone

from gpuportal.text.dates import next_month
from metering.reports import monthly as reports
from metering.usage.rollup import rollup
from scheduling.models import FailureCategory, JobStatus
from tests.factories import PASSWORD, build_world
from tests.metering.helpers import at, gpus_of, ran_job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def closed_month(transactional_db, settings):
    """Last month: vision and nlp ran jobs, one failed out of memory; rolled up."""
    settings.TIME_ZONE = "UTC"
    users = build_world()["users"]
    month = (timezone.now().date().replace(day=1) - timedelta(days=1)).replace(day=1)
    day = month.isoformat()[:8]
    ran_job(users["alice"], "vision/detection", gpus_of("dc1-r3-a100-01", 4), at(f"{day}03T08:00"),
            at(f"{day}03T18:00"))
    ran_job(users["bob"], "nlp/chat-eval", gpus_of("dc1-r1-h100-01", 2), at(f"{day}06T00:00"), at(f"{day}06T01:00"),
            status=JobStatus.FAILED, category=FailureCategory.OUT_OF_MEMORY)
    rollup(month, next_month(month) - timedelta(days=1), force=True)
    return month


def test_platform_admin_downloads_the_pack_as_pdf_and_spreadsheet(page, live_server, closed_month, tmp_path):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.goto(f"{live_server.url}/reports/{closed_month:%Y-%m}/")

    with page.expect_download() as pdf_download:
        page.get_by_role("link", name="Review pack (PDF)").click()
    pdf = pdf_download.value
    assert pdf.suggested_filename == f"gpuportal-review-{closed_month:%Y-%m}-platform.pdf"
    pdf_path = tmp_path / pdf.suggested_filename
    pdf.save_as(pdf_path)
    assert pdf_path.read_bytes().startswith(b"%PDF")
    text = subprocess.run(["pdftotext", str(pdf_path), "-"], capture_output=True, text=True, check=True).stdout
    assert "Resources" in text and "Improvements" in text
    assert str(reports.report_for(closed_month)[0]["gpu_hours_allocated"]) in text

    with page.expect_download() as xlsx_download:
        page.get_by_role("link", name="Review pack (spreadsheet)").click()
    xlsx_path = tmp_path / xlsx_download.value.suggested_filename
    xlsx_download.value.save_as(xlsx_path)
    assert xlsx_path.suffix == ".xlsx"
    book = openpyxl.load_workbook(xlsx_path)
    assert any("Resources" in name for name in book.sheetnames), book.sheetnames
