"""The scheduling engine: plain data in, decisions out.

No Django, no ORM, no I/O. The Celery pass (``scheduling.scheduler``) turns the database into a
:class:`Snapshot`, calls :func:`schedule`, and applies the :class:`PassResult` in one transaction; tests,
trace replays and benchmarks call :func:`schedule` directly.
"""

from .model import (
    Admission,
    NodeSnapshot,
    PassResult,
    Placement,
    QuotaSnapshot,
    RunningJob,
    Snapshot,
    WaitDecision,
    WaitingJob,
)
from .passes import place_gang, schedule
from .reasons import WaitReason, render_reason

__all__ = [
    "Admission",
    "NodeSnapshot",
    "PassResult",
    "Placement",
    "QuotaSnapshot",
    "RunningJob",
    "Snapshot",
    "WaitDecision",
    "WaitReason",
    "WaitingJob",
    "place_gang",
    "render_reason",
    "schedule",
]
