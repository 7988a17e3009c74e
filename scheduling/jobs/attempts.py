"""A job's attempts as a reader sees them: where each ran, when, how long, how it ended and why, and which jobs
it stopped. Reads only (``lifecycle`` writes the attempts).

Preemptions cross tenants, so what a sentence names depends on who reads it: the other job's id only when the
reader may see that job (as on the queue page), "yours" when it is the reader's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from scheduling.executors.failures import read_text
from scheduling.models import AttemptOutcome, FailureCategory, Job, JobAttempt, JobEvent, label_of, rule_words


@dataclass(frozen=True)
class PlacedOn:
    """One node of an attempt and the GPU indices it had there."""

    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class AttemptRow:
    """One attempt, ready to show: the page and the API read the same."""

    number: int
    current: bool
    admitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    run_seconds: float | None  # from the program's start to the attempt's end (or now); None: it never started
    placement: tuple[PlacedOn, ...]
    outcome: str  # an AttemptOutcome value; "" while it holds its GPUs
    outcome_label: str
    failure_category: str
    category_label: str
    reason: str  # why it ended, in the reader's language ("" while it runs)
    preempted_by: int | None  # the preemptor's id, only when the reader may see that job
    requeued: bool  # it ended and the job went back to the queue (a retry or a preemption's requeue)
    has_log: bool  # lines can be shown: the latest attempt's from the cluster, an earlier one's as the portal kept


def visible_job_ids(reader, ids) -> set[int]:
    """Those of ``ids`` that ``reader`` may see (none without a reader: a serializer given no request)."""
    ids = {i for i in ids if isinstance(i, int) and not isinstance(i, bool)}
    if reader is None or not ids:
        return set()
    return set(Job.objects.visible_to(reader).filter(pk__in=ids).values_list("pk", flat=True))


def current_attempt(job: Job, attempts: list[JobAttempt] | None = None) -> int | None:
    """The number of the attempt whose log the job's executor reads: the latest attempt, unless the job waits in
    the queue again (then every attempt has ended and what the portal kept of each is its log). None before the
    first admission. Lifecycle numbers the attempts (a retry or requeue adds one; rows written back from an older
    timeline count admissions), so the rows say which is current, not the retry count. ``attempts``: the job's
    rows, oldest first, when the caller has them."""
    if job.is_waiting:
        return None
    if attempts is not None:
        return attempts[-1].number if attempts else None
    return JobAttempt.objects.filter(job=job).aggregate(last=Max("number"))["last"]


def _preemption_sentence(data: dict, reader, visible: set[int]) -> str:
    preemptor, tenant, rule = data.get("preemptor"), data.get("preemptor_tenant", ""), rule_words(data.get("rule", ""))
    if preemptor in visible and data.get("preemptor_owner") == getattr(reader, "pk", None):
        return gettext("Preempted by your job #%(job)d: %(rule)s.") % {"job": preemptor, "rule": rule}
    if preemptor in visible:
        return gettext("Preempted by job #%(job)d of tenant %(tenant)s: %(rule)s.") % {
            "job": preemptor, "tenant": tenant, "rule": rule}
    return gettext("Preempted by a job of tenant %(tenant)s: %(rule)s.") % {"tenant": tenant, "rule": rule}


def attempts_of(job: Job, reader, now: datetime | None = None) -> list[AttemptRow]:
    """Every attempt of ``job``, oldest first, with what ``reader`` may see of the jobs that preempted it."""
    now = now or timezone.now()
    attempts = list(JobAttempt.objects.filter(job=job).select_related("end_event").order_by("number"))
    if not attempts:  # never admitted (most waiting jobs): no placement to read
        return []
    allocations = list(job.allocations.select_related("gpu__node").order_by("allocated_at", "gpu__node__name",
                                                                              "gpu__index"))
    ends = [a.end_event.data if a.end_event else {} for a in attempts]
    visible = visible_job_ids(reader, [data.get("preemptor") for data in ends])
    live = current_attempt(job, attempts)
    rows = []
    for i, attempt in enumerate(attempts):
        later = attempts[i + 1].admitted_at if i + 1 < len(attempts) else None
        per_node: dict[str, list[int]] = {}
        for allocation in allocations:
            if allocation.allocated_at >= attempt.admitted_at and (later is None or allocation.allocated_at < later):
                per_node.setdefault(allocation.gpu.node.name, []).append(allocation.gpu.index)
        data = ends[i]
        if attempt.outcome == AttemptOutcome.PREEMPTED and data.get("preemptor_tenant"):
            reason = _preemption_sentence(data, reader, visible)
        elif attempt.outcome == AttemptOutcome.FAILED and data.get("message"):
            # the diagnosis, not only its category (an executor's reason may be that), in the reader's language
            reason = read_text(str(data["message"]), (data.get("phrases") or {}).get("message"))
        else:
            reason = attempt.end_event.reason_text if attempt.end_event else ""
        current = attempt.ended_at is None
        end = attempt.ended_at or now
        rows.append(AttemptRow(
            number=attempt.number, current=current, admitted_at=attempt.admitted_at, started_at=attempt.started_at,
            ended_at=attempt.ended_at,
            run_seconds=max((end - attempt.started_at).total_seconds(), 0.0) if attempt.started_at else None,
            placement=tuple(PlacedOn(node, tuple(gpus)) for node, gpus in sorted(per_node.items())),
            outcome=attempt.outcome, outcome_label=label_of(AttemptOutcome, attempt.outcome) if attempt.outcome
            else gettext("Running") if attempt.started_at else gettext("Starting"),
            failure_category=attempt.failure_category,
            category_label=label_of(FailureCategory, attempt.failure_category),
            reason=reason, preempted_by=data.get("preemptor") if data.get("preemptor") in visible else None,
            requeued=not current and (later is not None or (job.is_waiting and attempt.outcome in (
                AttemptOutcome.RETRIED, AttemptOutcome.PREEMPTED))),
            has_log=bool(attempt.log_tail) or (attempt.started_at is not None and attempt.number == live)))
    return rows


@dataclass(frozen=True)
class StoppedJob:
    """A job this one preempted, as the reader may see it."""

    job_id: int
    yours: bool
    tenant: str
    rule: str
    at: datetime


@dataclass(frozen=True)
class Stopped:
    """What ``job`` stopped to run: the jobs the reader may see, and how many others (by tenant: hidden ids)."""

    shown: tuple[StoppedJob, ...]
    hidden: int

    @property
    def sentence(self) -> str:
        parts = []
        for stopped in self.shown:
            parts.append((gettext("This job stopped #%(job)d of yours: %(rule)s.") if stopped.yours else
                          gettext("This job stopped #%(job)d of tenant %(tenant)s: %(rule)s.")) % {
                "job": stopped.job_id, "tenant": stopped.tenant, "rule": stopped.rule})
        if self.hidden:
            parts.append(ngettext("It stopped %(n)d job of another tenant.", "It stopped %(n)d jobs of other tenants.",
                                  self.hidden) % {"n": self.hidden})
        return " ".join(parts)


def stopped_by(job: Job, reader) -> Stopped:
    """The jobs ``job`` preempted to start (its preemption notes)."""
    events = list(JobEvent.objects.filter(job=job, kind=JobEvent.Kind.PREEMPTION).order_by("at", "id"))
    visible = visible_job_ids(reader, [event.data.get("victim") for event in events])
    me = getattr(reader, "pk", None)
    shown, hidden = [], 0
    for event in events:
        data = event.data
        if data.get("victim") in visible:
            shown.append(StoppedJob(job_id=data["victim"], yours=data.get("victim_owner") == me,
                                    tenant=data.get("victim_tenant", ""), rule=rule_words(data.get("rule", "")),
                                    at=event.at))
        else:
            hidden += 1
    return Stopped(shown=tuple(shown), hidden=hidden)
