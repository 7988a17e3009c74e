"""The demo's job pages show their GPUs' readings over time and the efficiency summary: a seeded job that kept only
a quarter of its GPUs working gets the hint (a running job's readings, live from the simulated agents:
tests/scheduling/jobs/test_efficiency.py)."""

from __future__ import annotations

import pytest
from django.test import Client

from demo.metering import PART_USED_EVERY, PART_USED_FROM_GPUS
from demo.world import DEMO_PASSWORD
from scheduling.jobs.efficiency import efficiency_of
from scheduling.models import Job, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_seeded_job_that_used_a_quarter_of_its_gpus_gets_the_hint_on_its_page(demo_months):
    candidates = [job for job in Job.objects.filter(status=JobStatus.SUCCEEDED).order_by("-finished_at")[:400]
                  if job.pk % PART_USED_EVERY == 0 and job.total_gpus >= PART_USED_FROM_GPUS]
    measured = [(job, efficiency_of(job)) for job in candidates[:20]]
    hinted = [(job, e) for job, e in measured if e.hint]
    assert hinted, "a seeded job that asked for many GPUs and used a quarter of them"
    job, efficiency = hinted[0]
    # a quarter of its allocations worked (of every attempt's: a retried job had more than it asked for at once)
    assert 0 < efficiency.most_gpus_working < job.total_gpus
    assert f"used {efficiency.most_gpus_working} at most" in efficiency.hint
    assert efficiency.series and all(len(s.times) >= 1 for s in efficiency.series)
    client = Client()
    assert client.login(username=job.owner.username, password=DEMO_PASSWORD)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert efficiency.hint in page and 'id="efficiency-utilization"' in page
    series = client.get(f"/api/jobs/{job.pk}/efficiency/").json()["series"]
    # one series per GPU any attempt held: as many as it asked for, more when a retry ran on other GPUs
    assert len(series) == len(efficiency.series) >= int(job.total_gpus) and any(len(s["time"]) > 1 for s in series)

