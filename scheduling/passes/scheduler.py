"""The scheduling pass: database -> engine snapshot -> decisions -> database, in one transaction.

Only one pass runs at a time across all workers: on PostgreSQL a transaction-level advisory lock is
taken first and a second pass that finds it held returns at once (the next beat tick comes soon). The
whole apply step is one transaction, so a pass that dies halfway leaves nothing half-applied.

Each cluster is scheduled with its own policy (snapshots: ``scheduling.passes.snapshots``). The pass returns what it
admitted and preempted; the task that ran it (``tasks.run_scheduling_pass``) hands the admitted jobs to
dispatch and asks for the next pass, so this module knows nothing of Celery.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from gpuportal.observability import telemetry
from gpuportal.storage import pagecache
from gpuportal.storage.db import bulk_insert, bulk_set
from gpuportal.text.phrases import Clauses, Phrase
from scheduling import engine, lifecycle
from scheduling.executors import executor_for
from scheduling.executors.logs import DEFAULT_TAIL
from scheduling.models import (
    ACTIVE_STATUSES,
    PREEMPTION_RULES,
    WAITING_STATUSES,
    FailureCategory,
    Job,
    JobAllocation,
    JobEvent,
    JobQueueState,
    JobStatus,
    PreemptedBy,
    StoppedNote,
)
from scheduling.passes.snapshots import load_snapshots

logger = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock that serialises scheduling passes ("GPUSCHED").
PASS_LOCK_KEY = 0x47505553434845
QUEUE_FIELDS = ["wait_reason", "wait_reason_params", "queue_position", "tenant_queue_position", "estimated_start",
                "earliest_start", "latest_start"]


@dataclass
class PassReport:
    """What a pass did, for the task that ran it, ``schedule_once``, logs and tests."""

    ran: bool = True
    admitted: list[tuple[int, str]] = field(default_factory=list)
    preempted: list[tuple[int, int, str]] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)  # jobs ended because they avoid every node that could hold them
    waiting: list[tuple[int, str, str]] = field(default_factory=list)
    shares: dict[str, list] = field(default_factory=dict)
    seconds: float = 0.0
    load_seconds: float = 0.0
    engine_seconds: float = 0.0
    apply_seconds: float = 0.0

    @property
    def admitted_ids(self) -> list[int]:
        return [job_id for job_id, _where in self.admitted]


def _acquire_pass_lock() -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite serialises writers itself (IMMEDIATE transactions)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [PASS_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def run_pass() -> PassReport:
    """Run one pass over every cluster and commit its decisions; says what it admitted and preempted.

    Once its transaction has committed, the pass returns its report whatever fails after that: the task
    dispatches what was admitted from the report, so a failure after the commit (a listener of the commit that
    raised, the connection terminated while the duration is written) must not hide admissions already stored —
    they would wait, admitted and holding GPUs, for the reconciler. Such a failure is logged; a lost duration
    sample is counted, on a fresh connection."""
    started = time.monotonic()
    report = PassReport()
    committed = []
    try:
        with transaction.atomic():
            if not _acquire_pass_lock():
                logger.info("Another scheduling pass holds the lock; skipping this one.")
                return PassReport(ran=False)
            transaction.on_commit(lambda: committed.append(True))  # first of this pass's commit hooks
            snapshots, node_by_id, gpu_by_key = load_snapshots()
            report.load_seconds = time.monotonic() - started
            for name, snapshot in snapshots.items():
                engine_started = time.monotonic()
                result = engine.schedule(snapshot)
                applied = time.monotonic()
                report.engine_seconds += applied - engine_started
                report.shares[name] = result.shares
                _apply(result, node_by_id, gpu_by_key, report)
                report.apply_seconds += time.monotonic() - applied
    except Exception:
        if not committed:
            raise  # rolled back: nothing of this pass is stored, the task counts it as failed
        logger.exception("A scheduling pass committed, then a listener of its commit failed; it is followed up.")
    report.seconds = time.monotonic() - started
    try:
        telemetry.observe("gpuportal_scheduling_pass_duration_seconds", report.seconds)
    except Exception:
        logger.warning("A scheduling pass committed, but its duration could not be recorded.", exc_info=True)
        telemetry.guarded(lambda: telemetry.increment("gpuportal_metrics_write_failures_total",
                                                      metric="gpuportal_scheduling_pass_duration_seconds"))
    return report


def _apply(result: engine.PassResult, node_by_id, gpu_by_key, report: PassReport) -> None:
    now = timezone.now()
    ids = ([a.job_id for a in result.admissions] + [p.victim_id for p in result.preemptions]
           + [p.preemptor_id for p in result.preemptions])
    jobs = Job.objects.select_related("cluster", "tenant").in_bulk(ids)
    for preemption in result.preemptions:
        _preempt(preemption, jobs, now, report)
    _admit(result.admissions, jobs, node_by_id, gpu_by_key, now, report)
    _store_waits(_end_hopeless(result.waiting, now, report), now, report)


def _preempt(preemption, jobs: dict, now, report: PassReport) -> None:
    victim, preemptor = jobs[preemption.victim_id], jobs[preemption.preemptor_id]
    if victim.status not in ACTIVE_STATUSES:
        return  # it ended or was cancelled since the snapshot: its GPUs are free anyway
    # No job id in the stored sentence: the victim's readers may not see the preemptor (another tenant's). The
    # job page names it to those who may (``scheduling.jobs.attempts``), from the data kept beside it.
    rule = Phrase(PREEMPTION_RULES.get(preemption.rule, preemption.rule))
    text = Phrase(gettext_noop("Preempted by a job of tenant %(tenant)s (%(rule)s)."), {
        "tenant": preemption.preemptor_tenant, "rule": rule})
    data: PreemptedBy = {"preemptor": preemptor.pk, "preemptor_tenant": preemption.preemptor_tenant,
                         "preemptor_owner": preemptor.owner_id, "rule": preemption.rule}
    if not lifecycle.transition_many([victim], JobStatus.PREEMPTED, {victim.pk: text}, at=now,
                                     data={victim.pk: data}, skip_moved=True,
                                     failure_category=FailureCategory.PREEMPTED, failure_message=text):
        return  # it ended or was cancelled since the snapshot: its GPUs are free anyway
    # The record is read by the victim's tenant: the preemptor's tenant and the rule, never its id (another
    # tenant's job); the preemptor's own timeline names the job it stopped.
    audit.record(AuditAction.JOB_PREEMPT, victim, reason=text, actor=None,
                 after={"preemptor_tenant": preemption.preemptor_tenant, "rule": preemption.rule})
    stopped: StoppedNote = {"victim": victim.pk, "victim_tenant": victim.tenant.name, "victim_owner": victim.owner_id,
                        "rule": preemption.rule}
    lifecycle.note(preemptor, JobEvent.Kind.PREEMPTION, Phrase(gettext_noop(
        "Stopped a running job of tenant %(tenant)s to start (%(rule)s)."), {"tenant": victim.tenant.name,
                                                                            "rule": rule}), data=stopped, at=now)
    if victim.cluster_id:
        executor = executor_for(victim.cluster)
        lifecycle.keep_attempt_log(victim, executor.stopped_log(victim, DEFAULT_TAIL))
        executor.stop(victim)
    if victim.requeue_on_preemption:
        requeued = Phrase(gettext_noop("Requeued after preemption (retry %(n)d)."), {"n": victim.retry_count + 1})
        lifecycle.transition(victim, JobStatus.QUEUED, requeued, at=now, retry_count=victim.retry_count + 1,
                             cluster=None, executor_state={},
                             failure_category="", failure_message="", data=data)
    report.preempted.append((victim.pk, preemptor.pk, preemption.rule))


def _admission_reason(job: Job, admission, where: list[str]) -> str:
    params = {"n": f"{job.total_gpus:g}", "model": job.gpu_model, "where": "; ".join(where)}
    if admission.backfilled and admission.borrowing:
        return Phrase(gettext_noop("Admitted: %(n)s x %(model)s on %(where)s. (backfilled: it ends before the first "
                                   "waiting job of its model can start; borrowing idle GPUs beyond the tenant's "
                                   "guarantee (reclaimable))"), params)
    if admission.backfilled:
        return Phrase(gettext_noop("Admitted: %(n)s x %(model)s on %(where)s. (backfilled: it ends before the first "
                                   "waiting job of its model can start)"), params)
    if admission.borrowing:
        return Phrase(gettext_noop("Admitted: %(n)s x %(model)s on %(where)s. (borrowing idle GPUs beyond the "
                                   "tenant's guarantee (reclaimable))"), params)
    return Phrase(gettext_noop("Admitted: %(n)s x %(model)s on %(where)s."), params)


def _admit(admissions, jobs: dict, node_by_id, gpu_by_key, now, report: PassReport) -> None:
    """Admit each job that is still queued (a job cancelled since the snapshot is left alone, the others go on),
    then give the admitted ones their GPUs."""
    allocations, by_cluster = {}, defaultdict(list)
    reasons, data = {}, {}
    for admission in admissions:
        job = jobs[admission.job_id]
        if job.status != JobStatus.QUEUED:
            continue  # cancelled since the snapshot
        job.gpu_model = node_by_id[admission.placements[0].node_id].gpu_model  # a job of several models: landed
        where = []
        for placement in admission.placements:
            node = node_by_id[placement.node_id]
            share = "" if placement.gpu_milli >= engine.WHOLE else f" x {placement.gpu_milli / 1000:g}"
            where.append(f"{node.name} (GPU {', '.join(str(i) for i in placement.gpu_indices)}{share})")
            allocations.setdefault(job.pk, []).extend(
                JobAllocation(job=job, gpu=gpu_by_key[(node.id, i)], allocated_at=now,
                              fraction=placement.gpu_milli / 1000) for i in placement.gpu_indices)
        reasons[job.pk] = _admission_reason(job, admission, where)
        data[job.pk] = {"placements": [{"node": node_by_id[p.node_id].name, "gpus": list(p.gpu_indices),
                                        "share": p.gpu_milli / 1000} for p in admission.placements],
                        "backfilled": admission.backfilled, "borrowing": admission.borrowing}
        by_cluster[node_by_id[admission.placements[0].node_id].cluster].append((job, "; ".join(where)))
    admitted_ids = set()
    for cluster, admitted in by_cluster.items():
        events = lifecycle.transition_many([job for job, _where in admitted], JobStatus.ADMITTED, reasons, at=now,
                                           data=data, cluster=cluster, skip_moved=True)
        admitted_ids |= {event.job_id for event in events}
        report.admitted += [(job.pk, where) for job, where in admitted if job.pk in admitted_ids]
    JobAllocation.objects.bulk_create([a for job_id in admitted_ids for a in allocations[job_id]], batch_size=5000)
    landed = [job for admitted in by_cluster.values() for job, _where in admitted
              if job.pk in admitted_ids and job.accept_models]
    Job.objects.bulk_update(landed, ["gpu_model"])  # metering, quotas and reports count the model it runs on


def _end_hopeless(waiting, now, report: PassReport) -> list:
    """Fail the jobs that avoid every node that could hold them (their earlier attempts failed there), with that
    reason and the history of their faults, instead of keeping them waiting for what cannot happen; the rest
    wait on. A site that sets ``SCHEDULER["WAIT_WHEN_ALL_NODES_AVOIDED"]`` keeps them waiting with that reason
    (until the avoidance expires or an admin clears it: ``job_actions.clear_avoidance``)."""
    hopeless = {w.job_id: w for w in waiting if w.reason == engine.WaitReason.AVOIDS_ALL_NODES}
    if not hopeless or settings.SCHEDULER["WAIT_WHEN_ALL_NODES_AVOIDED"]:
        return waiting
    jobs = list(Job.objects.filter(pk__in=hopeless, status=JobStatus.QUEUED))
    reasons, data = {}, {}
    for job in jobs:
        attempts = (job.executor_state or {}).get("attempts", [])
        history = Clauses(Phrase(gettext_noop("attempt %(n)d on %(node)s: %(message)s"), {
            "n": i, "node": a.get("node") or "?", "message": a.get("message", "")}) for i, a in enumerate(attempts, 1))
        wait = hopeless[job.pk]
        reasons[job.pk] = Phrase(gettext_noop(
            "Ended without another attempt: it avoids %(avoided)s after node faults, and no other %(gpu_model)s node "
            "could hold it. Its attempts: %(history)s."), {
            "avoided": wait.params["avoided"], "gpu_model": wait.params["gpu_model"], "history": history})
        data[job.pk] = {"code": wait.reason.value, "params": _jsonable(wait.params), "attempts": len(attempts)}
    ended = set()
    for job in jobs:  # one by one: each keeps the category of its own last fault
        last = ((job.executor_state or {}).get("attempts") or [{}])[-1]
        message = hopeless[job.pk].message
        events = lifecycle.transition_many(
            [job], JobStatus.FAILED, reasons, at=now, data=data, skip_moved=True, failure_message=message,
            failure_category=last.get("category") or FailureCategory.NODE_FAULT,
            executor_state={**(job.executor_state or {}), "diagnosis": {**last, "message": message}})
        ended |= {event.job_id for event in events}
    report.failed += sorted(ended)
    return [w for w in waiting if w.job_id not in ended]


def _store_waits(waiting, now, report: PassReport) -> None:
    """Each waiting job's reason, position and estimate; an event only when the reason changed."""
    waiting_ids = [w.job_id for w in waiting]
    statuses = dict(Job.objects.filter(pk__in=waiting_ids).values_list("id", "status"))
    states = JobQueueState.objects.in_bulk(waiting_ids)
    new, changed, events = [], [], []
    for wait in waiting:
        if statuses.get(wait.job_id) not in WAITING_STATUSES:
            continue  # cancelled (or gone) since the snapshot
        params = _jsonable(wait.params)
        values = (wait.reason.value, params, wait.position, wait.tenant_position, _moment(wait.estimated_start),
                  _moment(wait.earliest_start), _moment(wait.latest_start))
        state = states.get(wait.job_id)
        if state is None or state.wait_reason != wait.reason.value:
            status = statuses[wait.job_id]
            events.append(JobEvent(job_id=wait.job_id, at=now, kind=JobEvent.Kind.WAIT_REASON, from_status=status,
                                   to_status=status, reason=wait.message,
                                   data={"code": wait.reason.value, "params": params}))
        if state is None:
            new.append(JobQueueState(job_id=wait.job_id, **dict(zip(QUEUE_FIELDS, values, strict=True))))
        elif values != tuple(getattr(state, name) for name in QUEUE_FIELDS):  # a steady queue writes nothing
            for name, value in zip(QUEUE_FIELDS, values, strict=True):
                setattr(state, name, value)
            changed.append(state)
        report.waiting.append((wait.job_id, wait.reason.value, wait.message))
    bulk_insert(JobQueueState, new)
    bulk_set(JobQueueState, changed, QUEUE_FIELDS)
    bulk_insert(JobEvent, events)
    if new or changed or events:
        pagecache.data_changed()  # queue positions and reasons shown on the dashboard


def _moment(timestamp: float | None) -> datetime | None:
    return (datetime.fromtimestamp(timestamp, tz=UTC)
            if timestamp is not None and math.isfinite(timestamp) else None)


def _jsonable(params: dict) -> dict:
    return {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in params.items()}
