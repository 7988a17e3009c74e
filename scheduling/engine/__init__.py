"""The scheduling engine: plain data in, decisions out.

No Django, no ORM, no I/O. The Celery pass (``scheduling.passes.scheduler``) turns the database into a
:class:`Snapshot`, calls :func:`schedule`, and applies the :class:`PassResult` in one transaction; tests,
trace replays and benchmarks call :func:`schedule` directly.
"""

from scheduling.engine.capacity import Capacity
from scheduling.engine.model import (
    ANY_MODEL,
    WHOLE,
    Admission,
    DepartmentQuota,
    NodeSnapshot,
    PassResult,
    Placement,
    Preemption,
    QuotaSnapshot,
    Reservation,
    RunningJob,
    Snapshot,
    TenantInfo,
    TenantShare,
    UsageRecord,
    WaitDecision,
    WaitingJob,
)
from scheduling.engine.passes import reserved_for_others, schedule
from scheduling.engine.policy import Policy
from scheduling.engine.reasons import WaitReason, render_reason

__all__ = [
    "ANY_MODEL",
    "WHOLE",
    "Admission",
    "Capacity",
    "DepartmentQuota",
    "NodeSnapshot",
    "PassResult",
    "Placement",
    "Policy",
    "Preemption",
    "QuotaSnapshot",
    "Reservation",
    "RunningJob",
    "Snapshot",
    "TenantInfo",
    "TenantShare",
    "UsageRecord",
    "WaitDecision",
    "WaitReason",
    "WaitingJob",
    "render_reason",
    "reserved_for_others",
    "schedule",
]
