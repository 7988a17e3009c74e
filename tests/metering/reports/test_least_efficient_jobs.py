"""The monthly report's least efficient large jobs: held versus used GPU-hours from the readings of the GPUs each
job held, least used first, with the job's hint; small and unmeasured jobs are left out."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import GpuReading
from gpuportal.text.dates import local_day, month_start
from metering.reports.monthly import build_report
from metering.reports.presentation import report_sections, section_by_name
from metering.usage.rollup import rollup
from scheduling.jobs.efficiency import efficiency_of
from tests.metering.helpers import gpus_of, ran_job

pytestmark = pytest.mark.django_db(transaction=True)


def _read(gpus, start, end, busy: int, utilization: int):
    at, rows = start, []
    while at < end:
        rows += [GpuReading(gpu=g, at=at, utilization_pct=utilization if i < busy else 0, memory_used_mb=1000)
                 for i, g in enumerate(gpus)]
        at += timedelta(minutes=10)
    GpuReading.objects.bulk_create(rows)


def test_the_least_efficient_large_jobs_come_first_with_their_hint(users):
    end = timezone.now() - timedelta(minutes=5)
    start = end - timedelta(hours=3)  # the jobs count in the month they ended in
    wasteful_gpus, busy_gpus = gpus_of("dc1-r3-a100-01", 8), gpus_of("dc1-r3-a100-02", 8)
    wasteful = ran_job(users["alice"], "vision/detection", wasteful_gpus, start, end)
    busy = ran_job(users["bob"], "nlp/llm-pretrain", busy_gpus, start, end)
    small = ran_job(users["alice"], "vision/detection", gpus_of("dc1-r1-h100-01", 1), start, end)
    unmeasured = ran_job(users["erin"], "speech/asr", gpus_of("dc2-r1-a100-03", 8), start, end)
    _read(wasteful_gpus, start, end, busy=2, utilization=60)
    _read(busy_gpus, start, end, busy=8, utilization=90)
    _read(gpus_of("dc1-r1-h100-01", 1), start, end, busy=0, utilization=0)
    rollup(local_day(start), local_day(end), force=True)

    report = build_report(month_start(local_day(end)))
    rows = report["least_efficient_jobs"]
    assert [row["job"] for row in rows] == [wasteful.pk, busy.pk]  # small and unmeasured: left out
    assert small.pk not in {row["job"] for row in rows} and unmeasured.pk not in {row["job"] for row in rows}
    first = rows[0]
    measured = efficiency_of(wasteful)
    assert first["gpu_hours_held"] == pytest.approx(measured.gpu_hours_held, abs=0.01)
    assert first["mean_gpu_utilization"] == measured.mean_gpu_utilization == pytest.approx(15, abs=0.5)
    assert first["gpu_hours_used"] == pytest.approx(measured.gpu_hours_held * 0.15, abs=0.1)
    assert first["hint"] == "This job asked for 8 GPUs and used 2 at most: ask for 2." and rows[1]["hint"] == ""
    section = section_by_name(report_sections(report), "least_efficient_jobs")
    assert section is not None and section.table()[0][0] == wasteful.pk

    tenant_report = build_report(month_start(local_day(end)), tenant=busy.tenant)
    assert [row["job"] for row in tenant_report["least_efficient_jobs"]] == [busy.pk]  # its own jobs only
