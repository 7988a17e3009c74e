"""The demo's metering history: GPU prices, simulated agent readings for the seeded jobs, and the rollup.

Readings are hourly for every GPU and node since the history starts: a GPU holding a seeded job reads
that job's simulated utilisation (with noise), an idle one reads 0. Then the whole range is rolled up, so
the reports and charts of the two closed months have something to show on first run.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from fleet.models import GPU, GpuReading, Node, NodeReading
from gpuportal.storage.db import bulk_insert
from gpuportal.text.dates import local_day, next_month
from metering.improvements import queries as improvement_queries
from metering.improvements import services as improvements
from metering.models import CapacityAction, GpuPrice, ImprovementAction
from metering.reports import monthly as reports
from metering.usage.rollup import rollup
from scheduling.models import JobAllocation

#: Demo prices per GPU-hour; A100 got cheaper at the start of last month (a price history to show).
DEMO_PRICES = {"H100": "3.50", "A100": "2.20", "L40S": "1.10", "Ascend910B": "1.80", "MI300X": "2.60"}
A100_LATER_PRICE = "1.90"
READING_INTERVAL = timedelta(hours=1)
#: Every this many-th job of at least this many GPUs uses a quarter of them (``_busy``).
PART_USED_EVERY = 5
PART_USED_FROM_GPUS = 4
#: The utilisation (%) of the quarter of such a job's GPUs that work.
PART_USED_LEVEL = 60


def seed_prices(start: date) -> None:
    for model, price in DEMO_PRICES.items():
        GpuPrice.objects.get_or_create(gpu_model=model, effective_from=start, defaults={
            "price_per_gpu_hour": Decimal(price), "note": "demo price"})
    last_month = (local_day(timezone.now()).replace(day=1) - timedelta(days=1)).replace(day=1)
    GpuPrice.objects.get_or_create(gpu_model="A100", effective_from=last_month, defaults={
        "price_per_gpu_hour": Decimal(A100_LATER_PRICE), "note": "demo: new support contract"})


def _insert(model, fields: tuple[str, ...], rows) -> None:
    """Insert ``rows`` (tuples of ``fields``' values, already of the columns' Python types) in one ``COPY`` on
    PostgreSQL, without a model instance or a field's conversion per value: the demo's 200,000 readings took
    most of their seeding time as objects. Elsewhere (the embedded demo's SQLite) as objects, by
    ``bulk_insert``."""
    if connection.vendor != "postgresql":
        names = [model._meta.get_field(name).attname for name in fields]
        bulk_insert(model, [model(**dict(zip(names, row, strict=True))) for row in rows])
        return
    columns = ", ".join(connection.ops.quote_name(model._meta.get_field(name).column) for name in fields)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _levels(busy: dict[int, list[tuple]], moments: list) -> dict[tuple[int, int], int]:
    """(GPU, index of the moment) -> the utilisation level of the first of the GPU's busy ranges that holds the
    moment: what asking every range at every moment finds, found by bisecting the moments for each range (a
    linear search per GPU and moment took most of the readings' time)."""
    if moments != sorted(moments):  # never in UTC; a zone's clock change could make wall-clock steps go back
        return {(gpu_id, hour): next((level for allocated, released, level in ranges if allocated <= at < released))
                for hour, at in enumerate(moments) for gpu_id, ranges in busy.items()
                if any(allocated <= at < released for allocated, released, _level in ranges)}
    levels: dict[tuple[int, int], int] = {}
    for gpu_id, ranges in busy.items():
        for allocated, released, level in ranges:
            for hour in range(bisect_left(moments, allocated), bisect_left(moments, released)):
                levels.setdefault((gpu_id, hour), level)
    return levels


def _busy(start, now) -> dict[int, list[tuple]]:
    """GPU -> (from, until, utilisation level) of each allocation since ``start``, the running jobs' until now.
    Every ``PART_USED_EVERY``-th job of ``PART_USED_FROM_GPUS`` GPUs or more keeps only a quarter of them working
    (the others read idle), so that the job pages show what a job that asked for too many GPUs looks like."""
    busy: dict[int, list[tuple]] = defaultdict(list)
    rank: dict[int, int] = defaultdict(int)
    allocations = list(JobAllocation.objects.filter(Q(released_at__isnull=True) | Q(released_at__gt=start))
                       .order_by("job_id", "gpu_id")
                       .values_list("job_id", "gpu_id", "allocated_at", "released_at", "job__executor_state"))
    sizes = defaultdict(int)
    for job_id, *_rest in allocations:
        sizes[job_id] += 1
    for job_id, gpu_id, allocated, released, state in allocations:
        level = (state or {}).get("demo_utilization_pct", 50)
        part_used = sizes[job_id] >= PART_USED_FROM_GPUS and job_id % PART_USED_EVERY == 0
        if part_used:  # a quarter of its GPUs busy (even when the job's own level is an idle one), the rest idle
            level = 0 if rank[job_id] >= sizes[job_id] // 4 else max(level, PART_USED_LEVEL)
        rank[job_id] += 1
        busy[gpu_id].append((allocated, released or now, level))
    return busy


def seed_readings(start, now, seed: int = 11) -> int:
    rng = random.Random(seed)
    busy = _busy(start, now)
    gpus = list(GPU.objects.values_list("id", "node_id", "memory_mb"))
    # InfiniBand counters only on the nodes of InfiniBand networks ("ib-…"), as the simulated agents report them
    infiniband = set(Node.objects.filter(network_domain__startswith="ib").values_list("id", flat=True))
    readings, node_util = [], defaultdict(list)
    moments, at = [], start
    while at < now:
        moments.append(at)
        at += READING_INTERVAL
    levels = _levels(busy, moments)
    for hour, at in enumerate(moments):
        for gpu_id, node_id, memory in gpus:
            util = 0
            level = levels.get((gpu_id, hour))
            if level:  # a held GPU its job leaves idle (level 0) reads 0, as an unheld one
                util = max(0, min(100, round(rng.gauss(level, 5))))
            # the columns' types: a whole degree (SmallIntegerField), watts as a float
            readings.append((gpu_id, at, util, int(memory * (0.05 + 0.9 * util / 100)) if util else 300,
                             int(32 + util * 0.45), float(70 + util * 5.5)))
            node_util[(node_id, at)].append(util)
    _insert(GpuReading, ("gpu", "at", "utilization_pct", "memory_used_mb", "temperature_c", "power_w"), readings)
    nodes = []
    for (node_id, at), utils in node_util.items():
        load = sum(utils) / len(utils)
        nodes.append((node_id, at, round(3 + load * 0.55 + rng.uniform(0, 4), 1), round(8 + load * 0.5, 1),
                      int(2e6 + load * 4e6), int(1e6 + load * 2e6),
                      int(load * 2.5e8) if node_id in infiniband else None,
                      int(load * 2.5e8) if node_id in infiniband else None, int(5e6 + load * 1.2e7)))
    _insert(NodeReading, ("node", "at", "cpu_percent", "memory_percent", "net_rx_bytes_per_s", "net_tx_bytes_per_s",
                          "ib_rx_bytes_per_s", "ib_tx_bytes_per_s", "disk_read_bytes_per_s"), nodes)
    return len(readings)


def seed_metering(start) -> dict:
    """Prices, readings and the rollup of the demo history (``start``: its first midnight)."""
    now = timezone.now()
    seed_prices(local_day(start))
    readings = seed_readings(start, now)
    result = rollup(local_day(start), local_day(now), now=now, force=True)
    return {"readings": readings, "nodes": Node.objects.count(), **result.as_dict()}


def seed_improvement_action(users: dict, month: date) -> ImprovementAction | None:
    """The platform admin turns the closed month's first "add GPUs" advice (else its first advice to change
    something) into an action due this month, as a review meeting would: the current month's pack and the
    acceptance checklist then show an action being followed."""
    report, _snapshot = reports.report_for(month)
    advice = sorted((a for a in report.get("recommendations", []) if a["action"] != CapacityAction.KEEP),
                    key=lambda a: a["action"] != CapacityAction.ADD)
    if not advice:
        return None
    initial = improvement_queries.advice_prefill(month, None, advice[0]["gpu_model"], advice[0]["action"])
    return improvements.create_action(
        users["admin"], month=month, tenant=None, title=initial["title"], owner=users["admin"],
        due_month=next_month(month), metric=initial["metric"], direction=initial["direction"],
        gpu_model=advice[0]["gpu_model"], recommendation=initial["recommendation"],
        reason="Agreed at the monthly capacity review (demo).")
