"""The only place a job's status changes.

:func:`transition` checks that the move is allowed, writes it with a compare-and-set (so a cancel and a
scheduling pass racing on one job cannot both win), stamps the matching time, releases GPUs when the job
stops holding them, and records a :class:`JobEvent` with the reason. A test makes sure no other module
assigns ``status``.
"""

from __future__ import annotations

import copy

from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from fleet.models import Node
from gpuportal.storage import pagecache
from gpuportal.storage.db import bulk_insert, bulk_insert_with_ids, bulk_set
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from scheduling.models import (
    ACTIVE_STATUSES,
    INFRASTRUCTURE_FAILURES,
    OUTCOME_OF_STATUS,
    TERMINAL_STATUSES,
    FailureCategory,
    Job,
    JobAllocation,
    JobAttempt,
    JobEvent,
    JobQueueState,
    JobStatus,
)
from scheduling.signals import job_status_changed

S = JobStatus

ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "": frozenset({S.PENDING, S.QUEUED}),
    S.PENDING: frozenset({S.QUEUED, S.CANCELLED}),
    # -> failed: every node that could hold it failed it before (the pass ends it rather than keep it waiting)
    S.QUEUED: frozenset({S.ADMITTED, S.CANCELLED, S.FAILED}),
    # -> queued: an attempt failed for an infrastructure reason and the job is retried (see executors)
    S.ADMITTED: frozenset({S.DISPATCHING, S.FAILED, S.CANCELLED, S.PREEMPTED, S.QUEUED}),
    S.DISPATCHING: frozenset({S.RUNNING, S.FAILED, S.CANCELLED, S.PREEMPTED, S.QUEUED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.PREEMPTED, S.QUEUED}),
    S.PREEMPTED: frozenset({S.QUEUED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}

_TIMESTAMP_FOR = {S.ADMITTED: "admitted_at", S.RUNNING: "started_at"}
#: Statuses a job may be requeued from: its run is over, so the job row no longer shows that run's moments.
_RUN_OVER = (*ACTIVE_STATUSES, S.PREEMPTED)


class InvalidTransition(Exception):
    """The job is not in a state from which the asked-for move is allowed (or it moved meanwhile)."""


def create_job(*, status: str, reason: str, actor=None, **fields) -> Job:
    """Store a new job in its first status (queued, or pending when it needs approval) with its first event."""
    if status not in ALLOWED_TRANSITIONS[""]:
        raise InvalidTransition(f"a job cannot start in {status}")
    with transaction.atomic():
        job = Job.objects.create(status=status, **fields)
        JobEvent.objects.create(job=job, at=job.submitted_at, from_status="", to_status=status, reason=reason,
                                actor=actor, data=phrases.data_of(reason))
        _announce([job], "", status, {job.pk: reason}, actor, job.submitted_at)
    return job


def create_many(jobs: list[Job], statuses: list[str], reasons: list[str], *, actor=None) -> list[Job]:
    """Store new jobs (not saved yet) each in its first status (``statuses``, queued or pending) with its first
    event (``reasons``): what ``create_job`` does for one, with one insert of jobs and one of events for all of
    them, so that an array of 10,000 tasks or a batch of 1,000 jobs is stored in seconds. Listeners hear of
    them once per first status, after the commit, as they do of a transition."""
    if any(status not in ALLOWED_TRANSITIONS[""] for status in statuses):
        raise InvalidTransition(f"a job cannot start in {sorted(set(statuses) - ALLOWED_TRANSITIONS[''])}")
    for job, status in zip(jobs, statuses, strict=True):
        job.status = status
    with transaction.atomic():
        created = bulk_insert_with_ids(Job, jobs)
        bulk_insert(JobEvent, _first_events(created, reasons, actor))  # nobody needs their ids back: COPY
        for status in dict.fromkeys(statuses):
            first = [(job, reason) for job, reason in zip(created, reasons, strict=True) if job.status == status]
            _announce([job for job, _reason in first], "", status, {job.pk: reason for job, reason in first}, actor,
                      first[0][0].submitted_at)
    return created


def _first_events(jobs: list[Job], reasons: list[str], actor) -> list[JobEvent]:
    """The first event of each new job. The jobs of one submission share their reason, so its event is made once
    and copied (building each of 10,000 events afresh costs seconds)."""
    made: dict[tuple, JobEvent] = {}
    events = []
    for job, reason in zip(jobs, reasons, strict=True):
        key = (id(reason), job.status, job.submitted_at)
        if key not in made:
            made[key] = JobEvent(at=job.submitted_at, from_status="", to_status=job.status, reason=reason,
                                 actor=actor, data=phrases.data_of(reason))
        event = copy.copy(made[key])
        event.job_id = job.pk
        events.append(event)
    return events


def note(job: Job, kind: str, reason: str, actor=None, data: dict | None = None, at=None) -> JobEvent:
    """A line on the job's timeline that changes no status (an approval, a fault, a repair, a cluster action)."""
    return JobEvent.objects.create(job=job, at=at or timezone.now(), kind=kind, from_status=job.status,
                                   to_status=job.status, reason=reason, actor=actor,
                                   data={**(data or {}), **phrases.data_of(reason)})


def note_many(notes, at) -> list[JobEvent]:
    """``note`` for many jobs in one insert: ``notes`` are (job, kind, reason, data), all at ``at``."""
    return bulk_insert_with_ids(JobEvent, [
        JobEvent(job=job, at=at, kind=kind, from_status=job.status, to_status=job.status, reason=reason,
                 data={**(data or {}), **phrases.data_of(reason)}) for job, kind, reason, data in notes])


def transition(job: Job, to_status: str, reason: str, *, actor=None, at=None, data=None, **fields) -> JobEvent:
    """Move ``job`` to ``to_status`` for ``reason``; extra ``fields`` are saved in the same update."""
    return transition_many([job], to_status, {job.pk: reason}, actor=actor, at=at,
                           data={job.pk: data} if data else None, **fields)[0]


def import_jobs(jobs: list[Job], status: str, reason: str) -> list[Job]:
    """Store many jobs at once in ``status`` with one event each: for importing what already runs on an
    existing cluster, and for benchmark fixtures. Not for submissions (use ``create_job``)."""
    if status not in ALLOWED_TRANSITIONS:
        raise InvalidTransition(f"unknown status {status}")
    for job in jobs:
        job.status = status
    with transaction.atomic():
        created = Job.objects.bulk_create(jobs, batch_size=2000)
        JobEvent.objects.bulk_create([JobEvent(job=job, at=job.submitted_at, from_status="", to_status=status,
                                               reason=reason) for job in created], batch_size=2000)
        pagecache.data_changed()
    return created


def _movable(ids: list[int], from_status: str, to_status: str):
    """The rows of ``ids`` that may make this move now: still in ``from_status`` and, for an admission, not held
    (a hold written after the pass's snapshot wins over the pass's decision; ``job_actions.set_hold`` takes the
    same row lock)."""
    rows = Job.objects.filter(pk__in=ids, status=from_status)
    return rows.filter(held_by="") if to_status == S.ADMITTED else rows


def still_in(jobs: list[Job], status: str, to_status: str = "") -> list[Job]:
    """The jobs that are still in ``status`` (and may move to ``to_status``), their rows locked until the
    transaction ends: a cancel or a hold racing with a pass or a dispatch waits for it and then acts on what it
    did, and nobody else is rolled back."""
    ids = set(_movable([job.pk for job in jobs], status, to_status).select_for_update()
              .values_list("pk", flat=True))
    return [job for job in jobs if job.pk in ids]


def transition_many(jobs: list[Job], to_status: str, reasons: dict[int, str], *, actor=None, at=None,
                    data=None, skip_moved: bool = False, **fields) -> list[JobEvent]:
    """Move many jobs that share a status to ``to_status`` in one compare-and-set UPDATE, with one event
    each (``reasons`` and ``data`` by job id). Raises InvalidTransition if any of them moved meanwhile, so
    the caller's transaction rolls back as a whole; with ``skip_moved`` the jobs that moved meanwhile (a
    cancel, or a hold before an admission) are left alone and the others move: the events returned say which."""
    if not jobs:
        return []
    from_status = jobs[0].status
    if any(job.status != from_status for job in jobs) or to_status not in ALLOWED_TRANSITIONS[from_status]:
        raise InvalidTransition(f"{from_status} -> {to_status} is not allowed for all of these jobs")
    at = at or timezone.now()
    updates = dict(fields, status=to_status)
    if to_status in _TIMESTAMP_FOR:
        updates.setdefault(_TIMESTAMP_FOR[to_status], at)
    if to_status in TERMINAL_STATUSES:
        updates.setdefault("finished_at", at)
    if to_status == S.QUEUED and from_status in _RUN_OVER:  # the attempt is history (``JobAttempt``)
        updates.setdefault("admitted_at", None)
        updates.setdefault("started_at", None)
    with transaction.atomic():
        if skip_moved:
            jobs = still_in(jobs, from_status, to_status)
            if not jobs:
                return []
        ids = [job.pk for job in jobs]
        if _movable(ids, from_status, to_status).update(**updates, last_updated=at) != len(ids):
            raise InvalidTransition(f"some of jobs {ids[:5]}… are no longer {from_status}")
        if from_status in (S.PENDING, S.QUEUED) and to_status not in (S.PENDING, S.QUEUED):
            JobQueueState.objects.filter(job_id__in=ids).delete()
        if from_status in ACTIVE_STATUSES and to_status not in ACTIVE_STATUSES:
            JobAllocation.objects.filter(job_id__in=ids, released_at__isnull=True).update(released_at=at)
        # COPY, not bulk_create: a pass moves a hundred jobs at a time, and bulk_create sent each text column as
        # an array that the driver escaped value by value (a fifth of a busy pass's preemptions)
        events = bulk_insert_with_ids(JobEvent, [
            JobEvent(job=job, at=at, from_status=from_status, to_status=to_status, reason=reasons[job.pk],
                     actor=actor, data={**((data or {}).get(job.pk) or {}), **phrases.data_of(reasons[job.pk])})
            for job in jobs])
        _record_attempts(jobs, from_status, to_status, events, at, updates, data or {})
        for job in jobs:
            for name, value in updates.items():
                setattr(job, name, value)
        _announce(jobs, from_status, to_status, reasons, actor, at)
    return events


def _record_attempts(jobs, from_status, to_status, events, at, updates: dict, data: dict) -> None:
    """Open an attempt on admission, stamp its start when the program runs, end it when the job stops holding
    its GPUs: how (the status it went to, the failure's category), why (the event) and the log lines the
    diagnosis kept."""
    ids = [job.pk for job in jobs]
    if to_status == S.ADMITTED:
        numbers = dict(JobAttempt.objects.filter(job_id__in=ids).values("job_id").annotate(
            last=models.Max("number")).values_list("job_id", "last"))
        bulk_insert_with_ids(JobAttempt, [
            JobAttempt(job=job, number=max(job.retry_count + 1, numbers.get(job.pk, 0) + 1), admitted_at=at)
            for job in jobs])
    elif to_status == S.RUNNING:
        JobAttempt.objects.filter(job_id__in=ids, ended_at__isnull=True).update(started_at=at)
    elif from_status in ACTIVE_STATUSES and to_status not in ACTIVE_STATUSES:
        event_of = {event.job_id: event for event in events}
        open_attempts = list(JobAttempt.objects.filter(job_id__in=ids, ended_at__isnull=True))
        for attempt in open_attempts:
            about = data.get(attempt.job_id) or {}
            attempt.ended_at, attempt.outcome = at, OUTCOME_OF_STATUS[to_status]
            attempt.end_event_id = event_of[attempt.job_id].pk if attempt.job_id in event_of else None
            attempt.failure_category = (FailureCategory.PREEMPTED if to_status == S.PREEMPTED else str(
                about.get("category") or updates.get("failure_category") or ""))
            attempt.log_tail = list((about.get("evidence") or {}).get("log_tail") or [])
        bulk_set(JobAttempt, open_attempts, ["ended_at", "outcome", "end_event", "failure_category", "log_tail"])


def keep_attempt_log(job: Job, lines) -> None:
    """Keep the last lines of the job's attempt that just ended, read before the cluster lets them go (a
    preemption): the job page and the API show them as that attempt's log."""
    if lines:
        last = JobAttempt.objects.filter(job=job, ended_at__isnull=False).order_by("-number").first()
        if last is not None and not last.log_tail:
            JobAttempt.objects.filter(pk=last.pk).update(log_tail=list(lines))


def fail_or_retry(job: Job, diagnosis: dict, *, reason: str = "", at=None) -> JobEvent:
    """End the current attempt of ``job`` with ``diagnosis`` (a ``Diagnosis.as_dict()``): the one retry rule of
    every executor. An infrastructure failure (node, GPU, cross-node communication) goes back to the queue while
    the task type allows retries, away from the node and from the last checkpoint; anything else, or an
    infrastructure failure with no retry left, fails the job. Each attempt's diagnosis is kept in
    ``executor_state["attempts"]``, which the job page lists."""
    at = at or timezone.now()
    state = dict(job.executor_state or {})
    limit = job.task_type.infrastructure_retries
    infrastructure = diagnosis["category"] in INFRASTRUCTURE_FAILURES
    if infrastructure and job.retry_count >= limit:  # the diagnosis' "retried automatically" no longer holds
        advice = Phrase(gettext_noop(
            "Retried %(n)d times on other nodes, failing each time: submit it again later, and tell the platform "
            "admins if it keeps failing."), {"n": limit}) if limit else Phrase(gettext_noop(
            "Its task type is not retried automatically: submit it again."))
        # its phrase replaces the diagnosis' too, so that the page reads this advice in its reader's language
        diagnosis = {**diagnosis, "advice": advice,
                     "phrases": {**(diagnosis.get("phrases") or {}), "advice": advice.stored()}}
    attempts = [*state.get("attempts", []), {"attempt": job.retry_count, "at": at.isoformat(), **diagnosis}]
    if not infrastructure or job.retry_count >= limit:
        return transition(job, S.FAILED, reason or diagnosis["message"], at=at, data=diagnosis,
                          failure_category=diagnosis["category"], failure_message=diagnosis["message"],
                          exit_code=diagnosis.get("exit_code"),
                          executor_state={**state, "attempts": attempts, "diagnosis": diagnosis})
    avoid = set(state.get("avoid_nodes", []))
    since = dict(state.get("avoid_since", {}))  # node id (text: JSON keys) -> when it was last avoided
    if diagnosis.get("node"):
        for pk in Node.objects.filter(name=diagnosis["node"]).values_list("pk", flat=True):
            avoid.add(pk)
            since[str(pk)] = at.isoformat()
    checkpoint = job.checkpoints.first()
    text = Phrase(gettext_noop("Attempt %(a)d failed: %(msg)s Retrying (%(n)d of %(max)d)%(away)s%(resume)s."), {
        "a": job.retry_count + 1, "msg": diagnosis["message"], "n": job.retry_count + 1, "max": limit,
        "away": Phrase(gettext_noop(" away from %(node)s"), {"node": diagnosis["node"]}) if diagnosis.get("node")
        else "",
        "resume": Phrase(gettext_noop(", resuming from %(p)s"), {"p": checkpoint.path}) if checkpoint else ""})
    return transition(job, S.QUEUED, text, at=at, data=diagnosis, retry_count=job.retry_count + 1, cluster=None,
                      executor_state={"attempts": attempts, "avoid_nodes": sorted(avoid), "avoid_since": since,
                                      "resume_from": checkpoint.path if checkpoint else "",
                                      "previous": {k: state.get(k) for k in ("namespace", "object")}})


def _announce(jobs, from_status, to_status, reasons, actor, at) -> None:
    """Tell listeners (notifications, approvals) once the change is committed."""
    pagecache.data_changed()  # transitions are bulk updates: no save signal reaches the page cache
    transaction.on_commit(lambda: job_status_changed.send(
        sender=Job, jobs=list(jobs), from_status=from_status, to_status=to_status, reasons=reasons, actor=actor,
        at=at))
