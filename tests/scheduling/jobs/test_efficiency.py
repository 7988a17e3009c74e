"""A job's use of its GPUs, from its allocations and the agents' readings: the summary, the series, the hint, and the
same figures on the page, in the API and in the mail (tests/governance/test_mail.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import GpuReading
from scheduling.jobs.efficiency import IDLE_STRETCH_MINUTES, efficiency_of
from scheduling.models import JobStatus
from tests.metering.helpers import gpus_of, hold, ran_job

pytestmark = pytest.mark.django_db(transaction=True)

NODE = "dc1-r3-a100-01"


def _read(gpus, start, end, utilization, memory=20_000, every=timedelta(minutes=5)):
    rows, moment = [], start
    while moment < end:
        rows += [GpuReading(gpu=g, at=moment, utilization_pct=utilization, memory_used_mb=memory, power_w=300.0)
                 for g in gpus]
        moment += every
    GpuReading.objects.bulk_create(rows)
    return len(rows)


@pytest.fixture
def eight_gpus_two_used(users):
    """An 8-GPU job that ran two hours with two GPUs at 80 % (one peaking at 30 GB) and six idle."""
    gpus = gpus_of(NODE, 8)
    end = timezone.now() - timedelta(minutes=10)
    start = end - timedelta(hours=2)
    job = ran_job(users["alice"], "vision/detection", gpus, start, end)
    _read(gpus[:2], start, end, 80)
    _read(gpus[2:], start, end, 0, memory=500)
    GpuReading.objects.create(gpu=gpus[0], at=start + timedelta(minutes=31), utilization_pct=80,
                              memory_used_mb=30_000)
    return job


def test_the_summary_counts_what_the_job_held_and_what_its_gpus_did(eight_gpus_two_used):
    efficiency = efficiency_of(eight_gpus_two_used)
    assert efficiency.finished
    assert efficiency.gpu_hours_held == pytest.approx(16, abs=0.01)
    readings = GpuReading.objects.count()
    assert efficiency.readings == readings
    busy = 2 * 24 + 1  # two GPUs every 5 minutes for 2 hours, and one reading more
    assert efficiency.mean_gpu_utilization == pytest.approx(80 * busy / readings, abs=0.1)
    assert efficiency.idle_share == pytest.approx((readings - busy) / readings, abs=0.001)
    assert efficiency.peak_memory_mb == 30_000 and efficiency.memory_total_mb == 81920
    assert efficiency.most_gpus_working == 2
    assert efficiency.measured_share == pytest.approx(1, abs=0.05)
    assert efficiency.hint == "This job asked for 8 GPUs and used 2 at most: ask for 2."
    assert not efficiency.idle_stretches  # two GPUs worked all along


def test_the_series_has_one_line_per_gpu_at_a_bounded_resolution(eight_gpus_two_used):
    efficiency = efficiency_of(eight_gpus_two_used)
    assert len(efficiency.series) == 8
    first = efficiency.series[0]
    assert first.name == f"{NODE}/gpu0" and first.memory_total_mb == 81920
    assert efficiency.resolution_seconds == 300  # never finer than the readings (every 5 minutes)
    assert len(first.times) == 24 and first.times == sorted(first.times)
    assert set(first.utilization) == {80} and max(first.memory_mb) == 30_000
    assert set(efficiency.series[5].utilization) == {0}


def test_a_long_job_draws_with_coarser_buckets_and_shows_when_everything_was_idle(users):
    gpus = gpus_of(NODE, 2)
    end = timezone.now()
    start = end - timedelta(hours=24)
    job = ran_job(users["alice"], "vision/detection", gpus, start, end)
    idle_from, idle_to = start + timedelta(hours=6), start + timedelta(hours=8)
    minute = timedelta(minutes=1)
    _read(gpus, start, idle_from, 90, every=minute)
    _read(gpus, idle_from, idle_to, 1, every=minute)
    _read(gpus, idle_to, end, 90, every=minute)
    efficiency = efficiency_of(job)
    assert efficiency.resolution_seconds == 240  # 24 h / 360 points, whole minutes
    assert all(len(s.times) <= 360 for s in efficiency.series)
    assert len(efficiency.idle_stretches) == 1
    stretch = efficiency.idle_stretches[0]
    assert abs((stretch.start - idle_from).total_seconds()) <= 240
    assert stretch.minutes >= IDLE_STRETCH_MINUTES and abs(stretch.minutes - 120) <= 8
    assert efficiency.most_gpus_working == 2 and efficiency.hint == ""  # both worked: nothing to say


def test_a_running_job_is_measured_so_far_and_gets_no_hint(users):
    gpus = gpus_of(NODE, 4)
    start = timezone.now() - timedelta(hours=1)
    job = _running(users, gpus, start)
    _read(gpus[:1], start, timezone.now(), 50)
    efficiency = efficiency_of(job)
    assert not efficiency.finished and efficiency.most_gpus_working == 1
    assert efficiency.gpu_hours_held == pytest.approx(4, abs=0.05)
    assert efficiency.hint == ""  # it may still use the others


def _running(users, gpus, start):
    from scheduling import lifecycle
    from scheduling.models import TaskType
    from tenants.models import Project

    project = Project.objects.get(tenant__name="vision", name="detection")
    task_type = TaskType.objects.get(code="research")
    job = lifecycle.create_job(status=JobStatus.QUEUED, reason="test", tenant=project.tenant, project=project,
                               owner=users["alice"], task_type=task_type, gpu_model="A100", name="live",
                               gpus_per_node=len(gpus), node_count=1, image="img", max_runtime_minutes=600,
                               priority=50, submitted_at=start)
    hold(job, gpus, start)
    lifecycle.transition(job, JobStatus.DISPATCHING, "sent", at=start)
    lifecycle.transition(job, JobStatus.RUNNING, "running", at=start)
    return job


def test_a_job_without_readings_says_nothing_was_measured(users):
    gpus = gpus_of(NODE, 2)
    end = timezone.now()
    job = ran_job(users["alice"], "vision/detection", gpus, end - timedelta(hours=1), end)
    efficiency = efficiency_of(job)
    assert efficiency.readings == 0 and efficiency.mean_gpu_utilization is None and efficiency.hint == ""
    assert efficiency.gpu_hours_held == pytest.approx(2, abs=0.01)
    assert "No readings of its GPUs were kept" in " ".join(efficiency.summary_lines())


def test_the_api_gives_the_summary_and_the_series_to_those_who_may_see_the_job(eight_gpus_two_used, api):
    answer = api("alice").get(f"/api/jobs/{eight_gpus_two_used.pk}/efficiency/")
    assert answer.status_code == 200
    data = answer.json()
    expected = efficiency_of(eight_gpus_two_used)
    assert data["gpu_hours_held"] == expected.gpu_hours_held
    assert data["mean_gpu_utilization"] == expected.mean_gpu_utilization
    assert data["peak_memory_mb"] == 30_000 and data["idle_share"] == expected.idle_share
    assert 0 <= data["idle_share"] <= 1 and 0 <= data["mean_gpu_utilization"] <= 100
    assert len(data["series"]) == 8
    assert set(data["series"][0]) >= {"gpu", "time", "utilization", "memory_mb"}
    assert len(data["series"][0]["time"]) == len(data["series"][0]["utilization"]) == 24
    assert data["hint"] == expected.hint
    assert api("bob").get(f"/api/jobs/{eight_gpus_two_used.pk}/efficiency/").status_code == 404


def test_the_job_page_shows_the_summary_the_hint_and_the_charts(eight_gpus_two_used, client):
    client.login(username="alice", password="demo")
    page = client.get(f"/jobs/{eight_gpus_two_used.pk}/").content.decode()
    assert 'id="efficiency"' in page and f'data-efficiency-url="/api/jobs/{eight_gpus_two_used.pk}/efficiency/"' in page
    assert 'id="eff-held">16.00<' in page
    assert "29.3 / 80 GB" in page
    assert "This job asked for 8 GPUs and used 2 at most: ask for 2." in page
    assert 'id="efficiency-utilization"' in page and "plotly/plotly-basic.min.js" in page
    assert 'data-live="0"' in page


def test_a_running_job_is_measured_live_from_the_agents_polls(users):
    """The simulated cluster's agents read its GPUs busy: each poll adds to the job's readings while it runs."""
    from fleet.tasks import poll_agents
    from scheduling.jobs import submission
    from tests.conftest import job_payload, long_run

    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=4, command=long_run(99999)))
    assert job.allocations.count() == 4
    poll_agents()
    first = efficiency_of(job)
    poll_agents()
    second = efficiency_of(job)
    assert first.readings == 4 and second.readings == 8
    stored = list(GpuReading.objects.filter(gpu__allocations__job=job).values_list("utilization_pct", flat=True))
    assert len(stored) == 8 and second.mean_gpu_utilization == pytest.approx(sum(stored) / 8, abs=0.05)
    assert second.mean_gpu_utilization > 50 and not second.finished  # the agents read its GPUs busy


def test_the_database_and_the_readings_themselves_give_the_same_figures(eight_gpus_two_used):
    """PostgreSQL sums the buckets; elsewhere (the embedded demo's SQLite) they are summed from the readings here:
    both give every figure alike, and the report's summaries are the page's figures without the series."""
    from scheduling.jobs.efficiency import summaries_of

    now = timezone.now()
    summed_there = efficiency_of(eight_gpus_two_used, now, in_database=True)
    summed_here = efficiency_of(eight_gpus_two_used, now, in_database=False)
    assert summed_here == summed_there and summed_here.readings == GpuReading.objects.count()
    assert summaries_of([eight_gpus_two_used], now)[eight_gpus_two_used.pk] == efficiency_of(
        eight_gpus_two_used, now, with_series=False)
