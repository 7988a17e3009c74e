"""The only place a job's status changes.

:func:`transition` checks that the move is allowed, writes it with a compare-and-set (so a cancel and a
scheduling pass racing on one job cannot both win), stamps the matching time, releases GPUs when the job
stops holding them, and records a :class:`JobEvent` with the reason. A test makes sure no other module
assigns ``status``.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from .models import ACTIVE_STATUSES, TERMINAL_STATUSES, Job, JobAllocation, JobEvent, JobStatus

S = JobStatus

ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "": frozenset({S.PENDING, S.QUEUED}),
    S.PENDING: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.ADMITTED, S.CANCELLED}),
    S.ADMITTED: frozenset({S.DISPATCHING, S.FAILED, S.CANCELLED, S.PREEMPTED}),
    S.DISPATCHING: frozenset({S.RUNNING, S.FAILED, S.CANCELLED, S.PREEMPTED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.PREEMPTED}),
    S.PREEMPTED: frozenset({S.QUEUED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}

_TIMESTAMP_FOR = {S.ADMITTED: "admitted_at", S.RUNNING: "started_at"}


class InvalidTransition(Exception):
    """The job is not in a state from which the asked-for move is allowed (or it moved meanwhile)."""


def create_job(*, status: str, reason: str, actor=None, **fields) -> Job:
    """Store a new job in its first status (queued, or pending when it needs approval) with its first event."""
    if status not in ALLOWED_TRANSITIONS[""]:
        raise InvalidTransition(f"a job cannot start in {status}")
    with transaction.atomic():
        job = Job.objects.create(status=status, **fields)
        JobEvent.objects.create(job=job, at=job.submitted_at, from_status="", to_status=status, reason=reason,
                                actor=actor)
    return job


def transition(job: Job, to_status: str, reason: str, *, actor=None, at=None, data=None, **fields) -> JobEvent:
    """Move ``job`` to ``to_status`` for ``reason``; extra ``fields`` are saved in the same update."""
    from_status = job.status
    if to_status not in ALLOWED_TRANSITIONS[from_status]:
        raise InvalidTransition(f"job {job.pk}: {from_status} -> {to_status} is not allowed")
    at = at or timezone.now()
    updates = dict(fields)
    updates["status"] = to_status
    if to_status in _TIMESTAMP_FOR:
        updates.setdefault(_TIMESTAMP_FOR[to_status], at)
    if to_status in TERMINAL_STATUSES:
        updates.setdefault("finished_at", at)
    if from_status in (S.PENDING, S.QUEUED) and to_status not in (S.PENDING, S.QUEUED):
        updates.update(queue_position=None, tenant_queue_position=None, wait_reason="", wait_reason_params={},
                       estimated_start=None)
    with transaction.atomic():
        changed = Job.objects.filter(pk=job.pk, status=from_status).update(**updates, last_updated=at)
        if changed != 1:
            raise InvalidTransition(f"job {job.pk} is no longer {from_status}")
        if from_status in ACTIVE_STATUSES and to_status not in ACTIVE_STATUSES:
            JobAllocation.objects.filter(job=job, released_at__isnull=True).update(released_at=at)
        event = JobEvent.objects.create(job=job, at=at, from_status=from_status, to_status=to_status,
                                        reason=reason, actor=actor, data=data or {})
    for name, value in updates.items():
        setattr(job, name, value)
    return event
