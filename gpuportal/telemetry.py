"""Counters and gauges for ``/metrics`` that every process can add to (kept in ``OperationalCounter``).

Workers, beat and web processes are separate; a counter in process memory would show one worker's share
only, so each call is one UPDATE (or INSERT the first time) of a row per name and label set.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F

from .models import OperationalCounter


def label_text(labels: dict) -> str:
    def escape(value) -> str:
        return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{key}="{escape(value)}"' for key, value in sorted(labels.items()))


def _write(name: str, labels: dict, value: float, add: bool) -> None:
    text = label_text(labels)
    rows = OperationalCounter.objects.filter(name=name, labels=text)
    if rows.update(value=F("value") + value if add else value):
        return
    try:
        with transaction.atomic():
            OperationalCounter.objects.create(name=name, labels=text, value=value)
    except IntegrityError:  # another process created it first
        rows.update(value=F("value") + value if add else value)


def increment(name: str, amount: float = 1, **labels) -> None:
    _write(name, labels, amount, add=True)


def set_gauge(name: str, value: float, **labels) -> None:
    _write(name, labels, value, add=False)


def observe(name: str, seconds: float, **labels) -> None:
    """A duration: the last one as a gauge, plus ``_sum`` and ``_count`` for rates and averages."""
    set_gauge(f"{name}_last", seconds, **labels)
    increment(f"{name}_sum", seconds, **labels)
    increment(f"{name}_count", 1, **labels)
