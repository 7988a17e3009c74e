"""The demo's metering history: GPU prices, simulated agent readings for the seeded jobs, and the rollup.

Readings are hourly for every GPU and node since the history starts: a GPU holding a seeded job reads
that job's simulated utilisation (with noise), an idle one reads 0. Then the whole range is rolled up, so
the reports and charts of the two closed months have something to show on first run.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

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


def seed_prices(start: date) -> None:
    for model, price in DEMO_PRICES.items():
        GpuPrice.objects.get_or_create(gpu_model=model, effective_from=start, defaults={
            "price_per_gpu_hour": Decimal(price), "note": "demo price"})
    last_month = (local_day(timezone.now()).replace(day=1) - timedelta(days=1)).replace(day=1)
    GpuPrice.objects.get_or_create(gpu_model="A100", effective_from=last_month, defaults={
        "price_per_gpu_hour": Decimal(A100_LATER_PRICE), "note": "demo: new support contract"})


def seed_readings(start, now, seed: int = 11) -> int:
    rng = random.Random(seed)
    busy: dict[int, list[tuple]] = defaultdict(list)
    for gpu_id, allocated, released, state in JobAllocation.objects.filter(
            released_at__gt=start).values_list("gpu_id", "allocated_at", "released_at", "job__executor_state"):
        busy[gpu_id].append((allocated, released or now, (state or {}).get("demo_utilization_pct", 50)))
    gpus = list(GPU.objects.values_list("id", "node_id", "memory_mb"))
    # InfiniBand counters only on the nodes of InfiniBand networks ("ib-…"), as the simulated agents report them
    infiniband = set(Node.objects.filter(network_domain__startswith="ib").values_list("id", flat=True))
    readings, node_util = [], defaultdict(list)
    at = start
    while at < now:
        for gpu_id, node_id, memory in gpus:
            util = 0
            for allocated, released, level in busy.get(gpu_id, ()):
                if allocated <= at < released:
                    util = max(0, min(100, round(rng.gauss(level, 5))))
                    break
            readings.append(GpuReading(gpu_id=gpu_id, at=at, utilization_pct=util,
                                       memory_used_mb=int(memory * (0.05 + 0.9 * util / 100)) if util else 300,
                                       temperature_c=32 + util * 0.45, power_w=70 + util * 5.5))
            node_util[(node_id, at)].append(util)
        at += READING_INTERVAL
    bulk_insert(GpuReading, readings)
    nodes = []
    for (node_id, at), utils in node_util.items():
        load = sum(utils) / len(utils)
        nodes.append(NodeReading(
            node_id=node_id, at=at, cpu_percent=round(3 + load * 0.55 + rng.uniform(0, 4), 1),
            memory_percent=round(8 + load * 0.5, 1), net_rx_bytes_per_s=int(2e6 + load * 4e6),
            net_tx_bytes_per_s=int(1e6 + load * 2e6),
            ib_rx_bytes_per_s=int(load * 2.5e8) if node_id in infiniband else None,
            ib_tx_bytes_per_s=int(load * 2.5e8) if node_id in infiniband else None,
            disk_read_bytes_per_s=int(5e6 + load * 1.2e7)))
    bulk_insert(NodeReading, nodes)
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
