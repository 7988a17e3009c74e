"""Liveness of the Celery worker and beat: each touches a file while its main loop turns; a probe
(``manage.py liveness worker|beat``, Kubernetes' exec probe, systemd's watchdog script) checks the file is
fresh.

Why a file and not ``celery inspect ping``: a ping goes through the broker, so a broker outage would make
every worker "dead" and Kubernetes would restart workers that are fine; it also costs a Python start-up
and a broker round trip per probe. The file says exactly "this process's loop still runs": the worker's
timer (run by its event loop) and beat's tick stop touching it when they hang.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from celery import bootsteps
from celery.beat import PersistentScheduler

#: How often the loops touch their files, and the age past which a probe calls them dead.
TOUCH_SECONDS = 10.0
STALE_SECONDS = 60.0
ROLES = ("worker", "beat")


def liveness_file(role: str) -> Path:
    """Where ``role`` keeps its file: ``GPUPORTAL_LIVENESS_DIR`` or the system's temporary directory (a
    container's own /tmp, so each pod probes its own process)."""
    directory = Path(os.environ.get("GPUPORTAL_LIVENESS_DIR") or Path(tempfile.gettempdir()) / "gpuportal")
    return directory / f"{role}.alive"


def touch(role: str) -> None:
    path = liveness_file(role)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def age_seconds(role: str, now: float | None = None) -> float | None:
    """Seconds since ``role`` last touched its file; None if it never did (or removed it on a clean stop)."""
    try:
        return (now or time.time()) - liveness_file(role).stat().st_mtime
    except FileNotFoundError:
        return None


class WorkerLiveness(bootsteps.StartStopStep):
    """A worker bootstep: touch the file now and every ``TOUCH_SECONDS`` from the worker's timer."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.timer_ref = None

    def start(self, worker):
        touch("worker")
        self.timer_ref = worker.timer.call_repeatedly(TOUCH_SECONDS, touch, ("worker",), priority=10)

    def stop(self, worker):
        if self.timer_ref is not None:
            self.timer_ref.cancel()
        liveness_file("worker").unlink(missing_ok=True)


class LivenessScheduler(PersistentScheduler):
    """Celery beat's scheduler, touching its file on each tick (beat ticks at least every few seconds)."""

    _last_touch = 0.0

    def tick(self, *args, **kwargs):
        now = time.monotonic()
        if now - self._last_touch >= TOUCH_SECONDS:
            touch("beat")
            self._last_touch = now
        return min(super().tick(*args, **kwargs), TOUCH_SECONDS)
