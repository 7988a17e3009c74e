"""The rules the monthly report and the capacity plan share: when a month is closed, how capacity is counted
in whole nodes, and how many GPUs a node of each model holds.

A module of their own because the report asks the plan for its "add N" (one number in both places), so the
plan may not read them from the report's module without the two importing each other.
"""

from __future__ import annotations

import math
from datetime import date, datetime

from django.utils import timezone

from fleet.catalogue import gpu_model_catalogue
from gpuportal.text.dates import local_day, next_month

#: "Add N" in advice frozen before the plan gave the one number covered this share of the month's daily
#: excesses over capacity (``capacity_plan.with_advice`` explains such a stored number beside the plan's).
ADD_COVERS_EXCESS_SHARE = 0.75
#: GPUs per node assumed for a model the fleet catalogue does not know (the "add N" rounding step).
DEFAULT_GPUS_PER_NODE = 8


def is_closed(month: date, now: datetime | None = None) -> bool:
    return next_month(month) <= local_day(now or timezone.now())


def whole_nodes(gpus: float, gpus_per_node: float) -> int:
    """``gpus`` rounded up to whole nodes of ``gpus_per_node``: capacity is bought a node at a time. One rule
    for every "add N" (tenths first, so float noise never adds a node)."""
    step = max(1, round(gpus_per_node))
    return int(math.ceil(round(gpus, 1) / step) * step)


def gpus_per_node() -> dict[str, int]:
    """Whole GPUs per node by model from the fleet catalogue (a model it does not know: ``DEFAULT_GPUS_PER_NODE``,
    read by the caller)."""
    return {model: max(1, round(c.total_gpus / max(c.nodes, 1))) for model, c in gpu_model_catalogue().items()}
