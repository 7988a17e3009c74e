"""Counters and gauges for ``/metrics`` that every process can add to (kept in ``OperationalCounter``).

Workers, beat and web processes are separate; a counter in process memory would show one worker's share
only, so each call is one UPDATE (or INSERT the first time) of a row per name and label set.

A counter written because something failed goes through ``guarded``: the failure may have been the database
connection itself, and a lost sample must never turn into a failed request or task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext

from django.db import IntegrityError, connection, transaction
from django.db.models import F

from gpuportal.models import OperationalCounter

logger = logging.getLogger(__name__)


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


def guarded(write: Callable[[], object]) -> bool:
    """Run ``write`` (a counter update, e.g. ``lambda: telemetry.increment(...)``) so that it cannot fail its
    caller; False, logged, when it could not be written.

    Why: such writes come right after a failure, and the failure may have been the connection itself (a backend
    terminated by a failover leaves a connection that raises on every query until it is closed; Django replaces
    it only at the end of a request or task). Outside a transaction a write that fails is tried once more on a
    fresh connection, which also leaves the caller a working connection for what it does next. Inside one it gets
    its own savepoint, so that a failed write leaves the caller's transaction usable; no reconnecting there."""
    for attempt in (1, 2):
        in_transaction = connection.in_atomic_block
        try:
            with transaction.atomic() if in_transaction else nullcontext():
                write()
            return True
        except Exception:
            if attempt == 2 or in_transaction:
                logger.warning("Could not write an operational counter; the sample is lost.", exc_info=True)
                return False
            try:
                connection.close()  # a broken connection is dropped; the next query opens a fresh one
            except Exception:  # closing a dead connection may raise too; it is gone either way
                logger.debug("Closing a broken database connection raised.", exc_info=True)
    return False
