"""Attribution of allocated and used GPU-seconds, day and month boundaries, idempotence, prices."""

from datetime import date, timedelta
from decimal import Decimal

import pytest

from metering.models import CapacityDaily, GpuPrice, JobFact, UsageDaily, UsageMonthly
from metering.usage.rollup import RollupRangeError, rollup
from scheduling import lifecycle
from scheduling.models import JobStatus
from tests.metering.helpers import at, gpus_of, hold, ran_job, readings

DAY = date(2026, 10, 14)
NOW = at("2026-11-20T12:00:00")


def usage_rows(**filters):
    return sorted(UsageDaily.objects.filter(**filters).values_list(
        "day", "tenant__name", "project__name", "user__username", "task_type__code", "gpu_model", "cluster__name",
        "allocated_gpu_seconds", "used_gpu_seconds", "measured_gpu_seconds", "cost"))


def test_whole_gpus_are_attributed_to_every_key_and_weighted_by_measured_utilisation(users):
    gpus = gpus_of("dc1-r3-a100-01", 2)
    ran_job(users["alice"], "vision/detection", gpus, at("2026-10-14T09:00"), at("2026-10-14T12:00"))
    readings(gpus, at("2026-10-14T09:00"), at("2026-10-14T12:00"), utilization=60)
    readings(gpus, at("2026-10-14T13:00"), at("2026-10-14T15:00"), utilization=99)  # after the job: not its use
    rollup(DAY, DAY, now=NOW, force=True)
    [(day, tenant, project, user, task, model, cluster, allocated, used, measured, _cost)] = usage_rows()
    assert (day, tenant, project, user, task, model, cluster) == (DAY, "vision", "detection", "alice", "research",
                                                                  "A100", "sim")
    assert allocated == 2 * 3 * 3600
    assert measured == allocated
    assert used == pytest.approx(allocated * 0.60)


def test_fractional_gpu_counts_its_share(users):
    [gpu] = gpus_of("dc2-r2-l40s-01", 1)
    ran_job(users["erin"], "speech/asr", [gpu], at("2026-10-14T10:00"), at("2026-10-14T12:00"), gpu_milli=250)
    readings([gpu], at("2026-10-14T10:00"), at("2026-10-14T12:00"), utilization=40)
    rollup(DAY, DAY, now=NOW, force=True)
    row = UsageDaily.objects.get()
    assert row.allocated_gpu_seconds == pytest.approx(0.25 * 2 * 3600)
    assert row.used_gpu_seconds == pytest.approx(0.25 * 2 * 3600 * 0.40)
    assert JobFact.objects.get().gpus == 0.25


def test_multi_node_job_counts_every_gpu_on_every_node(users):
    gpus = gpus_of("dc1-r1-h100-01", 4) + gpus_of("dc1-r1-h100-02", 4)
    ran_job(users["bob"], "nlp/llm-pretrain", gpus, at("2026-10-14T00:30"), at("2026-10-14T01:30"), nodes=2,
            task="training")
    rollup(DAY, DAY, now=NOW, force=True)
    row = UsageDaily.objects.get()
    assert row.allocated_gpu_seconds == 8 * 3600
    assert row.measured_gpu_seconds == 0 and row.used_gpu_seconds == 0  # no readings: allocated, not measured
    capacity = CapacityDaily.objects.get(day=DAY, gpu_model="H100")
    assert capacity.peak_allocated_gpus == 8 and capacity.capacity_gpus == 32


def test_preempted_job_counts_until_preemption_and_again_after_readmission(users):
    gpus = gpus_of("dc1-r3-a100-01", 4)
    job = _preempted_then_finished(users, gpus)
    rollup(DAY, DAY, now=NOW, force=True)
    assert UsageDaily.objects.get().allocated_gpu_seconds == 4 * (1 + 2) * 3600
    fact = JobFact.objects.get(job=job)
    assert fact.preemptions == 1 and fact.status == JobStatus.SUCCEEDED
    assert fact.wait_seconds == 600  # submission to first admission


def _preempted_then_finished(users, gpus):
    job = ran_job(users["alice"], "vision/detection", gpus, at("2026-10-14T08:00"), at("2026-10-14T08:00"),
                  status=JobStatus.PREEMPTED)
    job.allocations.update(released_at=at("2026-10-14T09:00"))  # it held them one hour before the preemption
    lifecycle.transition(job, JobStatus.QUEUED, "requeued", at=at("2026-10-14T09:00"))
    hold(job, gpus, at("2026-10-14T10:00"))
    lifecycle.transition(job, JobStatus.DISPATCHING, "sent", at=at("2026-10-14T10:00"))
    lifecycle.transition(job, JobStatus.RUNNING, "running", at=at("2026-10-14T10:00"))
    lifecycle.transition(job, JobStatus.SUCCEEDED, "done", at=at("2026-10-14T12:00"))
    return job


def test_job_crossing_a_day_and_a_month_boundary_is_split_at_midnight(users):
    gpus = gpus_of("dc2-r1-a100-03", 2)
    ran_job(users["bob"], "nlp/chat-eval", gpus, at("2026-10-31T21:00"), at("2026-11-01T02:00"))
    rollup(date(2026, 10, 31), date(2026, 11, 1), now=NOW, force=True)
    by_day = dict(UsageDaily.objects.values_list("day", "allocated_gpu_seconds"))
    assert by_day == {date(2026, 10, 31): 2 * 3 * 3600, date(2026, 11, 1): 2 * 2 * 3600}
    by_month = dict(UsageMonthly.objects.values_list("month", "allocated_gpu_seconds"))
    assert by_month == {date(2026, 10, 1): 2 * 3 * 3600, date(2026, 11, 1): 2 * 2 * 3600}


def test_rollup_is_idempotent_and_absorbs_late_readings(users):
    gpus = gpus_of("dc1-r3-a100-02", 2)
    ran_job(users["alice"], "vision/detection", gpus, at("2026-10-14T09:00"), at("2026-10-14T11:00"))
    readings(gpus, at("2026-10-14T09:00"), at("2026-10-14T10:00"), utilization=80)
    rollup(DAY, DAY, now=NOW, force=True)
    first = (usage_rows(), list(UsageMonthly.objects.values_list("allocated_gpu_seconds", "used_gpu_seconds")),
             list(JobFact.objects.values_list("job_id", "wait_seconds", "status")),
             list(CapacityDaily.objects.values_list("day", "gpu_model", "allocated_gpu_seconds", "peak_demand_gpus")))
    rollup(DAY, DAY, now=NOW, force=True)
    again = (usage_rows(), list(UsageMonthly.objects.values_list("allocated_gpu_seconds", "used_gpu_seconds")),
             list(JobFact.objects.values_list("job_id", "wait_seconds", "status")),
             list(CapacityDaily.objects.values_list("day", "gpu_model", "allocated_gpu_seconds", "peak_demand_gpus")))
    assert again == first and len(first[0]) == 1
    readings(gpus, at("2026-10-14T10:00"), at("2026-10-14T11:00"), utilization=20)  # the agent's late batch
    rollup(DAY, DAY, now=NOW, force=True)
    row = UsageDaily.objects.get()
    assert row.measured_gpu_seconds == row.allocated_gpu_seconds == 4 * 3600
    assert row.used_gpu_seconds == pytest.approx(4 * 3600 * 0.50)


def test_cost_follows_the_price_history(users, admin_user):
    GpuPrice.objects.create(gpu_model="A100", price_per_gpu_hour=Decimal("2.00"), effective_from=date(2026, 10, 1))
    GpuPrice.objects.create(gpu_model="A100", price_per_gpu_hour=Decimal("3.00"), effective_from=date(2026, 10, 15))
    gpus = gpus_of("dc1-r3-a100-01", 1)
    ran_job(users["alice"], "vision/detection", gpus, at("2026-10-14T22:00"), at("2026-10-15T02:00"))
    rollup(date(2026, 10, 14), date(2026, 10, 15), now=NOW, force=True)
    costs = dict(UsageDaily.objects.values_list("day", "cost"))
    assert costs == {date(2026, 10, 14): Decimal("4.0000"), date(2026, 10, 15): Decimal("6.0000")}


def test_waiting_jobs_count_as_demand(users):
    gpus = gpus_of("dc1-r1-h100-01", 8)
    ran_job(users["bob"], "nlp/llm-pretrain", gpus, at("2026-10-14T09:00"), at("2026-10-14T12:00"),
            wait=timedelta(hours=2))
    ran_job(users["frank"], "nlp/llm-pretrain", gpus, at("2026-10-14T12:00"), at("2026-10-14T13:00"),
            wait=timedelta(hours=4))  # asked at 08:00, waited while the first one ran
    rollup(DAY, DAY, now=NOW, force=True)
    capacity = CapacityDaily.objects.get(day=DAY, gpu_model="H100")
    assert capacity.peak_allocated_gpus == 8 and capacity.peak_demand_gpus == 16


def test_old_days_are_refused_without_force(users):
    with pytest.raises(RollupRangeError, match="READINGS_RETENTION_DAYS"):
        rollup(NOW.date() - timedelta(days=200), NOW.date(), now=NOW)
    with pytest.raises(RollupRangeError, match="before start"):
        rollup(DAY, DAY - timedelta(days=1), now=NOW)
