"""The asset view: clusters -> datacenters -> racks -> nodes -> GPUs, with recent readings and holders.

Which job holds a GPU is tenant data, answered by scheduling (``fleet.occupancy``): a user sees the job and
tenant only when they may see the job; otherwise the GPU reads "in use by another tenant".
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from fleet import occupancy
from fleet.models import GpuReading, Health, Node, NodeReading, OutsideWork

SPARK_MINUTES = 30


def _series(rows, key_attr: str, fields: tuple[str, ...]) -> dict:
    series: dict = {}
    for row in rows:
        entry = series.setdefault(getattr(row, key_attr), {f: [] for f in fields} | {"latest": None})
        for f in fields:
            entry[f].append(getattr(row, f))
        entry["latest"] = row
    return series


def gpu_series(gpu_ids, minutes: int = SPARK_MINUTES) -> dict:
    since = timezone.now() - timedelta(minutes=minutes)
    rows = GpuReading.objects.filter(gpu_id__in=list(gpu_ids), at__gte=since).order_by("at")
    return _series(rows, "gpu_id", ("utilization_pct", "memory_used_mb", "temperature_c", "power_w"))


def node_series(node_ids, minutes: int = SPARK_MINUTES) -> dict:
    since = timezone.now() - timedelta(minutes=minutes)
    rows = NodeReading.objects.filter(node_id__in=list(node_ids), at__gte=since).order_by("at")
    return _series(rows, "node_id", ("cpu_percent", "memory_percent", "net_rx_bytes_per_s", "ib_rx_bytes_per_s",
                                     "disk_read_bytes_per_s"))


def gpu_rows(user, gpus) -> list[dict]:
    """Each GPU with its recent readings, the portal job that holds it (as ``user`` may see it) and the work
    outside the portal that holds it (``outside``: a GPU held by a job submitted to its cluster directly is not
    free, whichever page lists it)."""
    gpus = list(gpus)
    series = gpu_series(g.pk for g in gpus)
    held = occupancy.holders(user, (g.pk for g in gpus))
    outside = {(row.node_id, index): row for row in OutsideWork.objects.filter(node__in={g.node_id for g in gpus})
               for index in row.gpu_indices}
    return [{"gpu": g, "series": series.get(g.pk, {}), "holder": held.get(g.pk),
             "outside": outside.get((g.node_id, g.index))} for g in gpus]


def inventory_tree(user, datacenter: str = "", rack: str = "") -> list[dict]:
    nodes = Node.objects.select_related("cluster").prefetch_related("gpus")
    if datacenter:
        nodes = nodes.filter(datacenter=datacenter)
    if rack:
        nodes = nodes.filter(rack=rack)
    nodes = list(nodes)
    rows = {row["gpu"].pk: row for row in gpu_rows(user, (g for n in nodes for g in n.gpus.all()))}
    hosts = node_series(n.pk for n in nodes)
    tree: dict = {}
    for node in nodes:
        racks = tree.setdefault(node.cluster, {}).setdefault(node.datacenter, {})
        gpus = node.gpus.all()
        # "problem": the page unfolds this node's GPUs (not healthy, cordoned or draining, or a GPU not healthy).
        racks.setdefault(node.rack, []).append({
            "node": node, "host": hosts.get(node.pk, {}), "gpus": [rows[g.pk] for g in gpus],
            "problem": node.state != Health.HEALTHY or any(g.health != Health.HEALTHY for g in gpus)})
    return [{"cluster": cluster, "datacenters": [
        {"name": dc, "racks": [{"name": rack_name, "nodes": items} for rack_name, items in sorted(racks.items())]}
        for dc, racks in sorted(dcs.items())]} for cluster, dcs in tree.items()]
