"""How well a job used the GPUs it held: the node agents' readings of those GPUs while it held them, as a typed
summary and a series per GPU (reads only).

The GPUs and the periods come from the job's allocations (one per GPU, or share of one, from admission until
release, every attempt's), the readings from ``fleet.models.GpuReading``: the page, ``GET
/api/jobs/{id}/efficiency/``, ``gpuportal efficiency``, the end-of-job mail and the monthly report all read
``efficiency_of`` or ``summaries_of``, so they cannot tell a job different numbers.

* **GPU-hours held**: each allocation's period (until now while it is held) times its fraction.
* **mean utilisation**, **peak memory**, **idle share**: over every reading of a held GPU inside an allocation's
  period; a reading below ``IDLE_BELOW_PCT`` counts as idle (the idle reclamation's default threshold, so that
  "idle" means the same everywhere). A shared GPU's readings are the whole GPU's: the other holders' work counts.
* **series**: per GPU, the readings averaged into buckets of ``resolution_seconds`` (at most ``MAX_POINTS`` per
  GPU; never finer than ``MIN_RESOLUTION_SECONDS``), so that a three-day run draws as quickly as a short one.
* **idle stretches**: runs of buckets in which every GPU the job held was idle, ``IDLE_STRETCH_MINUTES`` or longer.
* **hint**: only where it is clear (``hint_of``): the job ended, at least ``HINT_MEASURED_SHARE`` of its held time
  was measured over ``HINT_MIN_MINUTES`` or more, and fewer of its whole GPUs ever worked at once than it asked for.

Readings are kept ``READINGS_RETENTION_DAYS``: an older job's summary says that nothing was measured.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, models
from django.db.models import Count, F, Func, Max, Q, Sum, Value
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from fleet.models import GpuReading
from scheduling.models import Job, JobAllocation

#: The most points of one GPU's series: a page draws eight GPUs of a three-day run without waiting.
MAX_POINTS = 360
#: The finest bucket of a series (the agents are polled every 15 s; a minute keeps short jobs readable).
MIN_RESOLUTION_SECONDS = 60
#: A GPU counts as working in a bucket from this mean utilisation on (the hint's "used N GPUs at most").
ACTIVE_FROM_PCT = 10
#: Every held GPU idle at least this long is an idle stretch worth showing.
IDLE_STRETCH_MINUTES = 30
#: The hint needs this share of the held GPU-time measured, over at least this many minutes of running.
HINT_MEASURED_SHARE = 0.8
HINT_MIN_MINUTES = 30
#: Readings read to find the agents' usual interval when the database sums the buckets.
SPACING_SAMPLE = 20


def idle_below_pct() -> int:
    """A reading under this utilisation is idle: the idle reclamation's default threshold."""
    return settings.GOVERNANCE["IDLE_THRESHOLD_PCT"]


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's readings while the job held it, in buckets: ``times[i]`` is the start of bucket ``i``."""

    gpu_id: int
    name: str  # node/gpuN
    model: str
    memory_total_mb: int
    times: list[datetime]
    utilization: list[float | None]
    memory_mb: list[int | None]
    power_w: list[float | None]


@dataclass(frozen=True)
class IdleStretch:
    start: datetime
    end: datetime

    @property
    def minutes(self) -> int:
        return round((self.end - self.start).total_seconds() / 60)


@dataclass(frozen=True)
class Efficiency:
    """A job's use of the GPUs it held. Figures are None where nothing was measured."""

    job_id: int
    gpus_asked: float
    finished: bool
    gpu_hours_held: float
    mean_gpu_utilization: float | None  # 0-100
    peak_memory_mb: int | None
    memory_total_mb: int | None  # the largest GPU it held
    idle_share: float | None  # 0-1, of the readings
    measured_share: float | None  # 0-1, of the held GPU-time that has readings
    most_gpus_working: int | None  # the most GPUs at or above ACTIVE_FROM_PCT in one bucket
    readings: int
    resolution_seconds: int
    idle_stretches: list[IdleStretch] = field(default_factory=list)
    series: list[GpuSeries] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        return self.readings > 0

    @property
    def hint(self) -> str:
        return hint_of(self)

    @property
    def peak_memory_gb(self) -> float | None:
        return None if self.peak_memory_mb is None else self.peak_memory_mb / 1024

    @property
    def memory_total_gb(self) -> float | None:
        return None if self.memory_total_mb is None else self.memory_total_mb / 1024

    @property
    def idle_pct(self) -> float | None:
        return None if self.idle_share is None else self.idle_share * 100

    @property
    def idle_below_pct(self) -> int:
        return idle_below_pct()

    def summary_lines(self) -> list[str]:
        """The summary as sentences in the active language (the mail's body, the CLI's text output)."""
        lines = [_("GPU-hours held: %(h)s") % {"h": f"{self.gpu_hours_held:.2f}"}]
        if not self.measured:
            return [*lines, _("No readings of its GPUs were kept for the time it held them.")]
        lines.append(_("Mean GPU utilisation: %(u)s %%") % {"u": f"{self.mean_gpu_utilization:.0f}"})
        if self.peak_memory_mb is not None:
            lines.append(_("Peak GPU memory: %(peak)s of %(total)s GB") % {
                "peak": f"{self.peak_memory_mb / 1024:.1f}", "total": f"{(self.memory_total_mb or 0) / 1024:.0f}"})
        lines.append(_("Idle (below %(pct)d %% utilisation): %(share)s %% of the readings") % {
            "pct": idle_below_pct(), "share": f"{(self.idle_share or 0) * 100:.0f}"})
        if self.idle_stretches:
            longest = max(stretch.minutes for stretch in self.idle_stretches)
            lines.append(ngettext("%(n)d idle stretch, the longest %(m)d minutes",
                                  "%(n)d idle stretches, the longest %(m)d minutes",
                                  len(self.idle_stretches)) % {"n": len(self.idle_stretches), "m": longest})
        if self.hint:
            lines.append(self.hint)
        return lines


def hint_of(efficiency: Efficiency) -> str:
    """A gentle, specific hint where the readings make it clear, else "" (see the module's docstring)."""
    asked = efficiency.gpus_asked
    if (not efficiency.finished or not efficiency.measured or asked != int(asked) or asked < 2
            or efficiency.most_gpus_working is None or efficiency.most_gpus_working >= asked
            or (efficiency.measured_share or 0) < HINT_MEASURED_SHARE
            or efficiency.gpu_hours_held * 60 / asked < HINT_MIN_MINUTES):
        return ""
    used = efficiency.most_gpus_working
    if used == 0:
        return _("This job asked for %(asked)d GPUs and none of them ever worked above %(pct)d %%: check that the "
                 "program uses the GPUs before asking for them again.") % {"asked": asked, "pct": ACTIVE_FROM_PCT}
    return ngettext("This job asked for %(asked)d GPUs and used %(used)d at most: ask for %(used)d.",
                    "This job asked for %(asked)d GPUs and used %(used)d at most: ask for %(used)d.",
                    used) % {"asked": asked, "used": used}


def _windows(allocations: Iterable[JobAllocation], now: datetime) -> dict[int, list[tuple[datetime, datetime]]]:
    windows: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for allocation in allocations:
        end = allocation.released_at or now
        if end > allocation.allocated_at:
            windows[allocation.gpu_id].append((allocation.allocated_at, end))
    return windows


def _held_hours(allocations: Iterable[JobAllocation], now: datetime) -> float:
    return sum(float(a.fraction) * max(0.0, ((a.released_at or now) - a.allocated_at).total_seconds())
               for a in allocations) / 3600


def _readings(windows: dict[int, list[tuple[datetime, datetime]]]):
    """``(gpu_id, at, utilisation, memory, power)`` of the held GPUs inside their periods, oldest first: one
    query over the covering ``(gpu, at)`` index."""
    if not windows:
        return []
    return list(GpuReading.objects.filter(_periods(windows)).order_by("at").values_list(
        "gpu_id", "at", "utilization_pct", "memory_used_mb", "power_w"))


def _periods(windows: dict[int, list[tuple[datetime, datetime]]]) -> Q:
    periods = Q()
    for gpu_id, spans in windows.items():
        for start, end in spans:
            periods |= Q(gpu_id=gpu_id, at__gte=start, at__lt=end)
    return periods


def _resolution(start: datetime, end: datetime, spacing: float) -> int:
    """Whole minutes, never finer than the readings themselves, at most ``MAX_POINTS`` over the job's span."""
    span = max(1.0, (end - start).total_seconds())
    return max(MIN_RESOLUTION_SECONDS, math.ceil(max(span / MAX_POINTS, spacing) / 60) * 60)


def _times_by_gpu(rows) -> dict[int, list[datetime]]:
    times: dict[int, list[datetime]] = defaultdict(list)
    for gpu_id, at, *_values in rows:
        times[gpu_id].append(at)
    return times


def _spacing(times: dict[int, list[datetime]]) -> float:
    """The agents' usual interval between two readings of one GPU (the median), in seconds; 0 without two."""
    gaps = sorted((b - a).total_seconds() for ats in times.values() for a, b in zip(ats, ats[1:], strict=False)
                  if b > a)
    return gaps[len(gaps) // 2] if gaps else 0.0


def efficiency_of(job: Job, now: datetime | None = None, with_series: bool = True,
                  in_database: bool | None = None) -> Efficiency:
    """The job's use of its GPUs so far (all of it, once it ended). The readings are summed per bucket by the
    database on PostgreSQL (a long run of many GPUs is millions of them), here otherwise (``in_database`` chooses;
    both give the same figures)."""
    now = now or timezone.now()
    allocations = list(JobAllocation.objects.filter(job=job).select_related("gpu__node"))
    windows = _windows(allocations, now)
    if connection.vendor == "postgresql" if in_database is None else in_database:
        return _measure(job, allocations, windows, None, now, with_series)
    return _measure(job, allocations, windows, _readings(windows), now, with_series)


def summaries_of(jobs: Iterable[Job], now: datetime | None = None) -> dict[int, Efficiency]:
    """Each job's summary without its series (the monthly report's least efficient jobs): their allocations in one
    query; then on PostgreSQL two small queries per job (its buckets, summed there: a long run of many GPUs is
    millions of readings), elsewhere one query for the readings of every period they held a GPU."""
    now, jobs = now or timezone.now(), list(jobs)
    held: dict[int, list[JobAllocation]] = defaultdict(list)
    for allocation in JobAllocation.objects.filter(job__in=jobs).select_related("gpu__node"):
        held[allocation.job_id].append(allocation)
    windows = {job.pk: _windows(held[job.pk], now) for job in jobs}
    if connection.vendor == "postgresql":
        return {job.pk: _measure(job, held[job.pk], windows[job.pk], None, now, False) for job in jobs}
    every: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for spans_by_gpu in windows.values():
        for gpu_id, spans in spans_by_gpu.items():
            every[gpu_id] += spans
    rows = _readings(every)
    return {job.pk: _measure(job, held[job.pk], windows[job.pk], _inside(rows, windows[job.pk]), now, False)
            for job in jobs}


def _inside(rows, windows: dict[int, list[tuple[datetime, datetime]]]) -> list:
    """The readings taken on a GPU while the job held it (a GPU's share may be held by several jobs at once)."""
    return [row for row in rows if any(start <= row[1] < end for start, end in windows.get(row[0], ()))]


def _measure(job: Job, allocations: list[JobAllocation], windows: dict[int, list[tuple[datetime, datetime]]], rows,
             now: datetime, with_series: bool) -> Efficiency:
    """The figures from the readings as buckets: summed by the database (``rows`` None) or here from ``rows``."""
    start = min((a.allocated_at for a in allocations), default=now)
    end = max(((a.released_at or now) for a in allocations), default=now)
    spacing = _sampled_spacing(windows) if rows is None else _spacing(_times_by_gpu(rows))
    resolution = _resolution(start, end, spacing)
    threshold = idle_below_pct()
    buckets = (_database_buckets(windows, start, resolution, threshold) if rows is None
               else _buckets(rows, start, resolution, threshold))
    every = [bucket for per_gpu in buckets.values() for bucket in per_gpu.values()]
    measured_util = sum(b.n_util for b in every)
    readings = sum(b.n for b in every)
    held_seconds = sum((b - a).total_seconds() for spans in windows.values() for a, b in spans)
    covered = sum(min(resolution, b.n * spacing) for b in every)
    gpus = {a.gpu_id: a.gpu for a in allocations}
    series = [_series(gpus[gpu_id], buckets.get(gpu_id, {}), start, resolution) for gpu_id in sorted(
        windows, key=lambda pk: (gpus[pk].node.name, gpus[pk].index))] if with_series else []
    busy = _bucket_means(buckets)
    return Efficiency(
        job_id=job.pk, gpus_asked=job.total_gpus, finished=job.is_terminal,
        gpu_hours_held=round(_held_hours(allocations, now), 3),
        mean_gpu_utilization=round(sum(b.sum_util for b in every) / measured_util, 1) if measured_util else None,
        peak_memory_mb=max((b.max_memory for b in every if b.max_memory is not None), default=None),
        memory_total_mb=max((gpu.memory_mb for gpu in gpus.values()), default=None),
        idle_share=round(sum(b.n_idle for b in every) / measured_util, 3) if measured_util else None,
        measured_share=round(min(1.0, covered / held_seconds), 3) if held_seconds and readings > 1 else None,
        most_gpus_working=max((sum(1 for u in per_gpu.values() if u >= ACTIVE_FROM_PCT) for per_gpu in busy.values()),
                              default=None) if measured_util else None,
        readings=readings, resolution_seconds=resolution,
        idle_stretches=_idle_stretches(busy, windows, start, resolution), series=series)


@dataclass
class _Bucket:
    """One GPU's readings in one bucket, summed: what every figure and the series are made of."""

    n: int = 0
    n_util: int = 0
    sum_util: float = 0.0
    n_idle: int = 0
    max_memory: int | None = None
    sum_power: float = 0.0
    n_power: int = 0

    @property
    def utilization(self) -> float | None:
        return self.sum_util / self.n_util if self.n_util else None

    @property
    def power(self) -> float | None:
        return self.sum_power / self.n_power if self.n_power else None


def _buckets(rows, start: datetime, resolution: int, threshold: int) -> dict[int, dict[int, _Bucket]]:
    """``{gpu: {bucket: _Bucket}}`` from the readings themselves."""
    buckets: dict[int, dict[int, _Bucket]] = defaultdict(lambda: defaultdict(_Bucket))
    for gpu_id, at, util, memory, power in rows:
        bucket = buckets[gpu_id][int((at - start).total_seconds() // resolution)]
        bucket.n += 1
        if util is not None:
            bucket.n_util, bucket.sum_util, bucket.n_idle = (bucket.n_util + 1, bucket.sum_util + util,
                                                             bucket.n_idle + (util < threshold))
        if memory is not None:
            bucket.max_memory = memory if bucket.max_memory is None else max(bucket.max_memory, memory)
        if power is not None:
            bucket.n_power, bucket.sum_power = bucket.n_power + 1, bucket.sum_power + power
    return buckets


def _database_buckets(windows, start: datetime, resolution: int, threshold: int) -> dict[int, dict[int, _Bucket]]:
    """The same buckets summed by PostgreSQL: a three-day run of 64 GPUs polled every 15 s is a million readings,
    too many to bring over for a page; its buckets are 23,000 rows."""
    if not windows:
        return {}
    seconds = Func(F("at") - Value(start, output_field=models.DateTimeField()), function="EXTRACT",
                   template="EXTRACT(EPOCH FROM %(expressions)s)", output_field=models.FloatField())
    number = Func(seconds / resolution, function="FLOOR", output_field=models.IntegerField())
    rows = (GpuReading.objects.filter(_periods(windows)).annotate(bucket=number).values("gpu_id", "bucket")
            .annotate(n=Count("id"), n_util=Count("utilization_pct"), sum_util=Sum("utilization_pct"),
                      n_idle=Count("id", filter=Q(utilization_pct__lt=threshold)), max_memory=Max("memory_used_mb"),
                      sum_power=Sum("power_w"), n_power=Count("power_w")).order_by())
    buckets: dict[int, dict[int, _Bucket]] = defaultdict(dict)
    for row in rows:
        buckets[row["gpu_id"]][int(row["bucket"])] = _Bucket(
            n=row["n"], n_util=row["n_util"], sum_util=float(row["sum_util"] or 0), n_idle=row["n_idle"],
            max_memory=row["max_memory"], sum_power=float(row["sum_power"] or 0), n_power=row["n_power"])
    return buckets


def _sampled_spacing(windows) -> float:
    """The agents' usual interval, from the first readings of the first GPU the job held (one small query)."""
    for gpu_id, spans in sorted(windows.items()):
        start, end = spans[0]
        times = list(GpuReading.objects.filter(gpu_id=gpu_id, at__gte=start, at__lt=end).order_by("at")
                     .values_list("at", flat=True)[:SPACING_SAMPLE])
        return _spacing({gpu_id: times})
    return 0.0


def _bucket_numbers(spans: list[tuple[datetime, datetime]], start: datetime, resolution: int) -> set[int]:
    numbers: set[int] = set()
    for span_start, span_end in spans:
        first = int((span_start - start).total_seconds() // resolution)
        last = int(((span_end - start).total_seconds() - 1e-6) // resolution)
        numbers.update(range(first, last + 1))
    return numbers


def _bucket_means(buckets: dict[int, dict[int, _Bucket]]) -> dict[int, dict[int, float]]:
    """``{bucket: {gpu: mean utilisation}}`` of the buckets with readings."""
    means: dict[int, dict[int, float]] = defaultdict(dict)
    for gpu_id, per_bucket in buckets.items():
        for number, bucket in per_bucket.items():
            if bucket.utilization is not None:
                means[number][gpu_id] = bucket.utilization
    return means


def _idle_stretches(busy: dict[int, dict[int, float]], windows, start: datetime, resolution: int) -> list[IdleStretch]:
    """Runs of measured buckets in which every GPU held then (and measured) stayed below the idle threshold."""
    held = {gpu_id: _bucket_numbers(spans, start, resolution) for gpu_id, spans in windows.items()}
    stretches, run = [], []
    threshold = idle_below_pct()
    for number in sorted(busy):
        means = busy[number]
        idle = all(mean < threshold for gpu_id, mean in means.items() if number in held.get(gpu_id, ()))
        if idle and (not run or run[-1] == number - 1):
            run.append(number)
            continue
        stretches.append(run)
        run = [number] if idle else []
    stretches.append(run)
    shortest = IDLE_STRETCH_MINUTES * 60
    return [IdleStretch(start + timedelta(seconds=run[0] * resolution),
                        start + timedelta(seconds=(run[-1] + 1) * resolution))
            for run in stretches if run and len(run) * resolution >= shortest]


def _series(gpu, per_bucket: dict[int, _Bucket], start: datetime, resolution: int) -> GpuSeries:
    numbers = sorted(per_bucket)
    return GpuSeries(
        gpu_id=gpu.pk, name=f"{gpu.node.name}/gpu{gpu.index}", model=gpu.model, memory_total_mb=gpu.memory_mb,
        times=[start + timedelta(seconds=n * resolution) for n in numbers],
        utilization=[_rounded(per_bucket[n].utilization) for n in numbers],
        memory_mb=[per_bucket[n].max_memory for n in numbers],
        power_w=[_rounded(per_bucket[n].power) for n in numbers])


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
