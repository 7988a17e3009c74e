"""What the pass reads besides the job rows: the tenants' decayed usage, summed by the database."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from fleet.models import GPU
from scheduling.models import JobAllocation, JobStatus
from scheduling.passes import snapshots
from tests.factories import build_world, make_job

pytestmark = pytest.mark.django_db


def _per_allocation(now, half_life: float) -> dict:
    """The usage as a reading of every allocation would count it: the reference the database's sums must equal."""
    since = now - timedelta(seconds=snapshots.USAGE_HALF_LIVES * half_life)
    per_day = defaultdict(float)
    for tenant, start, end, fraction in JobAllocation.objects.filter(released_at__gte=since).values_list(
            "job__tenant__name", "allocated_at", "released_at", "fraction"):
        day = end.astimezone(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
        per_day[(tenant, day.timestamp())] += (end - max(start, since)).total_seconds() * float(fraction)
    return per_day


def test_usage_is_summed_per_tenant_and_day_as_each_allocation_counts():
    world = build_world()
    owner, gpus = world["users"]["alice"], list(GPU.objects.order_by("pk")[:12])
    jobs = [make_job(owner, world["tenants"][name], JobStatus.SUCCEEDED, gpu_model=gpus[0].model)
            for name in ("vision", "nlp", "speech")]
    now, half_life = datetime(2026, 11, 20, 9, 30, tzinfo=UTC), 86400.0
    since = now - timedelta(seconds=snapshots.USAGE_HALF_LIVES * half_life)
    allocations = []
    for i, gpu in enumerate(gpus):  # across the window's start, several days, whole and shared GPUs
        start = since - timedelta(hours=5) + timedelta(hours=7 * i)
        allocations.append(JobAllocation(job=jobs[i % 3], gpu=gpu, allocated_at=start, fraction=(1.0, 0.5, 0.25)[i % 3],
                                         released_at=start + timedelta(hours=3 + 5 * (i % 4), minutes=i)))
    allocations[0].released_at = since - timedelta(minutes=1)  # ended before the window: not counted
    JobAllocation.objects.bulk_create(allocations)

    summed = {(u.tenant, u.at): u.gpu_seconds for u in snapshots.usage_history(now, half_life)}
    expected = _per_allocation(now, half_life)
    assert summed.keys() == expected.keys() and len({tenant for tenant, _day in summed}) == 3 and len(summed) >= 6
    assert all(summed[key] == pytest.approx(expected[key]) for key in expected)
