"""The scheduling engine: plain data in, decisions out.

No Django, no ORM, no I/O. The Celery pass (``scheduling.passes.scheduler``) turns the database into a
:class:`Snapshot`, calls :func:`schedule`, and applies the :class:`PassResult` in one transaction; tests,
trace replays and benchmarks call :func:`schedule` directly.
"""

from scheduling.engine.capacity import Capacity
from scheduling.engine.model import (
    ANY_MODEL,
    WHOLE,
    DepartmentQuota,
    Dependency,
    NodeSnapshot,
    OutsideHold,
    PassResult,
    Placement,
    QuotaSnapshot,
    Reservation,
    RunningJob,
    Snapshot,
    TenantInfo,
    UsageRecord,
    WaitingJob,
)
from scheduling.engine.passes import reserved_for_others, schedule
from scheduling.engine.policy import Policy
from scheduling.engine.reasons import WaitReason, render_reason

__all__ = [
    "ANY_MODEL",
    "WHOLE",
    "Capacity",
    "DepartmentQuota",
    "Dependency",
    "NodeSnapshot",
    "OutsideHold",
    "PassResult",
    "Placement",
    "Policy",
    "QuotaSnapshot",
    "Reservation",
    "RunningJob",
    "Snapshot",
    "TenantInfo",
    "UsageRecord",
    "WaitReason",
    "WaitingJob",
    "render_reason",
    "reserved_for_others",
    "schedule",
]
