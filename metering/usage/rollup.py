"""Roll allocations, readings and job timelines up into the daily and monthly fact tables.

``rollup(start, end)`` rebuilds every fact of the days ``start``..``end`` (inclusive, in the portal's time
zone) from the source rows, deleting what was there first, so running it twice gives the same rows and
running it again after late readings arrived absorbs them.

How GPU-seconds are attributed:

* **allocated** — each ``JobAllocation`` (one GPU, or a share of one) from ``allocated_at`` to
  ``released_at`` (or now), cut at midnight, times its fraction. A multi-node job has one allocation per
  GPU on every node; a preempted job's allocations end when it was preempted.
* **used** — allocated seconds times the mean utilisation the agent measured on that GPU during that
  piece of the allocation (one indexed average per piece; ``GpuReading`` has a covering index on
  ``(gpu, at) INCLUDE (utilization_pct)`` for it). Pieces without readings add to allocated but not to
  ``measured`` nor ``used``; reports show the measured share.
* **cost** — allocated GPU-hours times the price of the model on that day (``GpuPrice`` history).
"""

from __future__ import annotations

import time as clock
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Avg, Count, Max, Min, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.translation import gettext as _

from fleet.catalogue import gpu_model_catalogue
from fleet.models import GpuReading, NodeReading
from gpuportal.storage.db import bulk_insert
from gpuportal.text.dates import day_start, local_day, month_start, next_month
from metering.models import CapacityDaily, ClusterAccountingDaily, GpuPrice, JobFact, UsageDaily, UsageMonthly
from scheduling.models import Job, JobAllocation, JobEvent, JobStatus

#: Key of the PostgreSQL advisory lock that serialises rollups ("GPUROLL").
ROLLUP_LOCK_KEY = 0x475055524F4C4C
USAGE_KEY = ("cluster_id", "tenant_id", "project_id", "user_id", "task_type_id", "gpu_model")
CENT = Decimal("0.0001")


@dataclass
class RollupResult:
    start: date
    end: date
    pieces: int = 0
    daily_rows: int = 0
    monthly_rows: int = 0
    job_facts: int = 0
    capacity_rows: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "pieces": self.pieces,
                "daily_rows": self.daily_rows, "monthly_rows": self.monthly_rows, "job_facts": self.job_facts,
                "capacity_rows": self.capacity_rows, "rollup_seconds": round(self.seconds, 3)}


def split_by_day(start: datetime, end: datetime):
    """Yield ``(day, piece_start, piece_end)`` for the interval cut at local midnights."""
    day = local_day(start)
    while start < end:
        boundary = day_start(day + timedelta(days=1))
        piece_end = min(end, boundary)
        yield day, start, piece_end
        start, day = piece_end, day + timedelta(days=1)


class PriceBook:
    """The price of a GPU model on a day, from the price history (0 where none was set)."""

    def __init__(self):
        self._by_model: dict[str, tuple[list[date], list[Decimal]]] = {}
        for model, since, price in GpuPrice.objects.order_by("gpu_model", "effective_from").values_list(
                "gpu_model", "effective_from", "price_per_gpu_hour"):
            days, prices = self._by_model.setdefault(model, ([], []))
            days.append(since)
            prices.append(price)

    def price(self, model: str, day: date) -> Decimal:
        days, prices = self._by_model.get(model, ((), ()))
        index = bisect_right(days, day) - 1
        return prices[index] if index >= 0 else Decimal(0)


def _mean_utilization(pieces: list[tuple[int, datetime, datetime]]) -> list[float | None]:
    """The mean measured utilisation (0–100) of each ``(gpu_id, start, end)``, None where nothing was read.

    The pieces go into a temporary table and one statement averages each with a correlated subquery, which
    both PostgreSQL and SQLite answer from the ``(gpu, at)`` index: thousands of range scans in one round trip.
    """
    if not pieces:
        return []
    reading = GpuReading._meta.db_table
    stamp = models.DateTimeField().db_type(connection)
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS metering_piece")
        cursor.execute(f"CREATE TEMPORARY TABLE metering_piece (id integer PRIMARY KEY, gpu_id bigint, "
                       f"start_at {stamp}, end_at {stamp})")
        rows = ((i, gpu, start, end) for i, (gpu, start, end) in enumerate(pieces))
        if connection.vendor == "postgresql":
            with cursor.cursor.copy("COPY metering_piece (id, gpu_id, start_at, end_at) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            adapt = connection.ops.adapt_datetimefield_value
            cursor.executemany("INSERT INTO metering_piece VALUES (%s, %s, %s, %s)",
                               [(i, gpu, adapt(start), adapt(end)) for i, gpu, start, end in rows])
        cursor.execute(
            f"SELECT p.id, (SELECT AVG(r.utilization_pct) FROM {reading} r WHERE r.gpu_id = p.gpu_id "  # noqa: S608
            f"AND r.at >= p.start_at AND r.at < p.end_at) FROM metering_piece p")
        means: list[float | None] = [None] * len(pieces)
        for index, mean in cursor.fetchall():
            means[index] = float(mean) if mean is not None else None
        cursor.execute("DROP TABLE metering_piece")
    return means


def _allocation_pieces(t0: datetime, t1: datetime, now: datetime):
    """Allocations overlapping ``[t0, t1)`` cut at midnight: ``(day, key, gpu_id, start, end, fraction)``."""
    rows = (JobAllocation.objects.filter(allocated_at__lt=t1)
            .filter(Q(released_at__isnull=True) | Q(released_at__gt=t0))
            .values_list("gpu_id", "gpu__model", "gpu__node__cluster_id", "fraction", "allocated_at",
                         "released_at", "job__tenant_id", "job__project_id", "job__owner_id", "job__task_type_id"))
    for gpu_id, model, cluster, fraction, allocated, released, tenant, project, owner, task_type in rows.iterator(
            chunk_size=5000):
        start, end = max(allocated, t0), min(released or now, t1)
        key = (cluster, tenant, project, owner, task_type, model)
        for day, piece_start, piece_end in split_by_day(start, end):
            yield day, key, gpu_id, piece_start, piece_end, float(fraction)


def _jobs_overlapping(t0: datetime, t1: datetime):
    """Jobs whose life (submission to end, or now) overlaps ``[t0, t1)``."""
    return Job.objects.filter(submitted_at__lt=t1).filter(Q(finished_at__isnull=True) | Q(finished_at__gte=t0))


def _job_facts(t0: datetime, t1: datetime) -> list[JobFact]:
    """Facts of every job whose life overlaps ``[t0, t1)``."""
    overlapping = _jobs_overlapping(t0, t1)
    timeline = {row["job_id"]: row for row in JobEvent.objects.filter(job__in=overlapping).values("job_id").annotate(
        first_admitted=Min("at", filter=Q(to_status=JobStatus.ADMITTED)),
        preemptions=Count("id", filter=Q(to_status=JobStatus.PREEMPTED)),
        reclaimed=Count("id", filter=Q(data__reclaimed=True)))}
    facts = []
    for job in overlapping.values("id", "tenant_id", "project_id", "owner_id", "task_type_id", "gpu_model",
                                  "gpus_per_node", "node_count", "gpu_milli", "submitted_at", "finished_at", "status",
                                  "failure_category", "retry_count").iterator(chunk_size=5000):
        events = timeline.get(job["id"], {})
        admitted = events.get("first_admitted")
        facts.append(JobFact(
            job_id=job["id"], tenant_id=job["tenant_id"], project_id=job["project_id"], user_id=job["owner_id"],
            task_type_id=job["task_type_id"], gpu_model=job["gpu_model"],
            gpus=job["gpus_per_node"] * job["node_count"] * job["gpu_milli"] / 1000,
            submitted_at=job["submitted_at"], first_admitted_at=admitted,
            wait_seconds=(admitted - job["submitted_at"]).total_seconds() if admitted else None,
            finished_at=job["finished_at"], status=job["status"], failure_category=job["failure_category"],
            preemptions=events.get("preemptions", 0), retries=job["retry_count"],
            reclaimed=bool(events.get("reclaimed"))))
    return facts


def _peaks(intervals: dict[tuple[date, str], list[tuple[datetime, datetime, float, bool]]]):
    """Peak GPUs held, and held plus waiting, per (day, model) from ``(start, end, gpus, held)`` intervals."""
    peaks = {}
    for key, items in intervals.items():
        changes = []
        for start, end, gpus, held in items:
            changes.append((start, 1, gpus, held))
            changes.append((end, 0, -gpus, held))  # ends sort before starts at the same instant
        held_now = demand_now = held_peak = demand_peak = 0.0
        for _at, _order, delta, held in sorted(changes, key=lambda c: (c[0], c[1])):
            demand_now += delta
            if held:
                held_now += delta
            held_peak, demand_peak = max(held_peak, held_now), max(demand_peak, demand_now)
        peaks[key] = (round(held_peak, 3), round(demand_peak, 3))
    return peaks


def _host_counters(t0: datetime, t1: datetime) -> dict[tuple[date, str], dict]:
    """Per (day, GPU model): mean GPU utilisation, GPU memory high-water mark, mean node counters."""
    tz = timezone.get_default_timezone()
    out: dict[tuple[date, str], dict] = defaultdict(dict)
    gpu_rows = (GpuReading.objects.filter(at__gte=t0, at__lt=t1).annotate(day=TruncDate("at", tzinfo=tz))
                .values("day", "gpu__model").annotate(util=Avg("utilization_pct"), memory=Max("memory_used_mb")))
    for row in gpu_rows:
        out[(row["day"], row["gpu__model"])].update(util=row["util"], memory=row["memory"])
    node_rows = (NodeReading.objects.filter(at__gte=t0, at__lt=t1).annotate(day=TruncDate("at", tzinfo=tz))
                 .values("day", "node__gpu_model").annotate(
                     cpu=Avg("cpu_percent"), mem=Avg("memory_percent"), rx=Avg("net_rx_bytes_per_s"),
                     tx=Avg("net_tx_bytes_per_s"), ib_rx=Avg("ib_rx_bytes_per_s"), ib_tx=Avg("ib_tx_bytes_per_s"),
                     disk=Avg("disk_read_bytes_per_s")))
    for row in node_rows:
        network = [row[k] for k in ("rx", "tx", "ib_rx", "ib_tx") if row[k] is not None]
        out[(row["day"], row["node__gpu_model"])].update(
            cpu=row["cpu"], mem=row["mem"], disk=row["disk"], network=sum(network) if network else None)
    return out


def _acquire_lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROLLUP_LOCK_KEY])


class RollupRangeError(ValueError):
    """The asked-for range cannot be rolled up (the message names the bound)."""


def rollup(start: date, end: date, now: datetime | None = None, force: bool = False) -> RollupResult:
    """Rebuild the facts of days ``start``..``end`` (inclusive) and the monthly rows of the months they touch.

    Days older than the readings' retention are refused unless ``force``: their readings are pruned, and
    rolling them up again would turn measured use into zero.
    """
    if end < start:
        raise RollupRangeError(_("end (%(end)s) is before start (%(start)s).") % {"end": end, "start": start})
    now = now or timezone.now()
    keep = settings.AGENTS["READINGS_RETENTION_DAYS"]
    oldest = local_day(now) - timedelta(days=keep)
    if start < oldest and not force:
        raise RollupRangeError(_(
            "start (%(start)s) is older than the %(keep)d days of readings kept (READINGS_RETENTION_DAYS): "
            "rolling it up again would lose the measured use of the pruned days. Use --force if the readings "
            "of that range are still there.") % {"start": start, "keep": keep})
    began = clock.perf_counter()
    t0, t1 = day_start(start), day_start(end + timedelta(days=1))
    result = RollupResult(start, end)
    with transaction.atomic():
        _acquire_lock()
        pieces = list(_allocation_pieces(t0, t1, now))
        means = _mean_utilization([(gpu, s, e) for _d, _k, gpu, s, e, _f in pieces])
        prices = PriceBook()
        usage: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        intervals: dict[tuple[date, str], list] = defaultdict(list)
        for (day, key, _gpu, piece_start, piece_end, fraction), mean in zip(pieces, means, strict=True):
            seconds = (piece_end - piece_start).total_seconds() * fraction
            totals = usage[(day, *key)]
            totals[0] += seconds
            if mean is not None:
                totals[1] += seconds * mean / 100
                totals[2] += seconds
            intervals[(day, key[-1])].append((piece_start, piece_end, fraction, True))
        daily = [UsageDaily(day=day, **dict(zip(USAGE_KEY, key, strict=True)), allocated_gpu_seconds=allocated,
                            used_gpu_seconds=used, measured_gpu_seconds=measured,
                            cost=(Decimal(allocated) / 3600 * prices.price(key[-1], day)).quantize(CENT))
                 for (day, *key), (allocated, used, measured) in usage.items()]
        UsageDaily.objects.filter(day__gte=start, day__lte=end).delete()
        bulk_insert(UsageDaily, daily)
        result.pieces, result.daily_rows = len(pieces), len(daily)

        facts = _job_facts(t0, t1)
        JobFact.objects.filter(job__in=_jobs_overlapping(t0, t1)).delete()
        bulk_insert(JobFact, facts)
        result.job_facts = len(facts)
        for fact in facts:  # waiting jobs count towards demand until their first admission (or their end)
            wait_end = min(fact.first_admitted_at or fact.finished_at or now, t1)
            for day, piece_start, piece_end in split_by_day(max(fact.submitted_at, t0), wait_end):
                intervals[(day, fact.gpu_model)].append((piece_start, piece_end, fact.gpus, False))

        result.capacity_rows = _rebuild_capacity(start, end, t0, t1, daily, intervals)
        result.monthly_rows = _rebuild_months(start, end)
    result.seconds = clock.perf_counter() - began
    return result


def _rebuild_capacity(start, end, t0, t1, daily, intervals) -> int:
    capacity = {model: c.total_gpus for model, c in gpu_model_catalogue().items()}
    per_model: dict[tuple[date, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in daily:
        totals = per_model[(row.day, row.gpu_model)]
        totals[0] += row.allocated_gpu_seconds
        totals[1] += row.used_gpu_seconds
    # GPUs that work submitted to a Slurm cluster directly held were not idle: slurmdb's figures (imported by
    # ``usage.slurm``) count as allocated capacity, so idle GPU-hours and the capacity advice stay true
    for day, model, seconds in (ClusterAccountingDaily.objects.filter(day__gte=start, day__lte=end, from_portal=False)
                                .values_list("day", "gpu_model").annotate(Sum("gpu_seconds"))):
        per_model[(day, model)][0] += seconds
    peaks = _peaks(intervals)
    host = _host_counters(t0, t1)
    rows = []
    day = start
    while day <= end:
        for model in sorted(set(capacity) | {m for d, m in per_model if d == day}):
            counters = host.get((day, model), {})
            allocated, used = per_model.get((day, model), (0.0, 0.0))
            held_peak, demand_peak = peaks.get((day, model), (0.0, 0.0))
            rows.append(CapacityDaily(
                day=day, gpu_model=model, capacity_gpus=capacity.get(model, 0), allocated_gpu_seconds=allocated,
                used_gpu_seconds=used, peak_allocated_gpus=held_peak, peak_demand_gpus=demand_peak,
                mean_utilization_pct=counters.get("util"), gpu_memory_high_water_mb=counters.get("memory"),
                node_cpu_pct=counters.get("cpu"), node_memory_pct=counters.get("mem"),
                network_bytes_per_s=counters.get("network"), storage_read_bytes_per_s=counters.get("disk")))
        day += timedelta(days=1)
    CapacityDaily.objects.filter(day__gte=start, day__lte=end).delete()
    CapacityDaily.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


def _rebuild_months(start: date, end: date) -> int:
    """Each month touched is the sum of its daily rows (all of them, not only the re-run days)."""
    written = 0
    month = month_start(start)
    while month <= end:
        following = next_month(month)
        sums = (UsageDaily.objects.filter(day__gte=month, day__lt=following).values(*USAGE_KEY)
                .annotate(allocated=Sum("allocated_gpu_seconds"), used=Sum("used_gpu_seconds"),
                          measured=Sum("measured_gpu_seconds"), total_cost=Sum("cost")))
        rows = [UsageMonthly(month=month, **{k: row[k] for k in USAGE_KEY}, allocated_gpu_seconds=row["allocated"],
                             used_gpu_seconds=row["used"], measured_gpu_seconds=row["measured"],
                             cost=row["total_cost"]) for row in sums]
        UsageMonthly.objects.filter(month=month).delete()
        UsageMonthly.objects.bulk_create(rows, batch_size=1000)
        written += len(rows)
        month = following
    return written
