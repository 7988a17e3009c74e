"""The scheduling pass: database -> engine snapshot -> decisions -> database, in one transaction.

Only one pass runs at a time across all workers: on PostgreSQL a transaction-level advisory lock is
taken first and a second pass that finds it held returns at once (the next beat tick comes soon). The
whole apply step is one transaction, so a pass that dies halfway leaves nothing half-applied.

Each cluster is scheduled with its own policy (snapshots: ``scheduling.passes.snapshots``). The pass returns what it
admitted and preempted; the task that ran it (``tasks.run_scheduling_pass``) hands the admitted jobs to
dispatch and asks for the next pass, so this module knows nothing of Celery.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field

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
from scheduling.jobs import dependencies
from scheduling.models import (
    ACTIVE_STATUSES,
    PREEMPTION_RULES,
    FailureCategory,
    Job,
    JobAllocation,
    JobEvent,
    JobStatus,
    PreemptedBy,
    StoppedNote,
)
from scheduling.passes import kept, queue_states
from scheduling.passes.kept import load_snapshots

logger = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock that serialises scheduling passes ("GPUSCHED").
PASS_LOCK_KEY = 0x47505553434845


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
    states_written: int = 0  # waiting jobs' reasons written (the others were unchanged)
    table_written: bool = False  # whether the queue table was written (else every place and estimate held)
    #: Every cluster's waiting jobs as (job id, position, position in tenant, estimate, earliest, latest).
    places: list[tuple] = field(default_factory=list, repr=False)

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
    sample is counted, on a fresh connection.

    The cyclic garbage collector waits until the pass is over: a pass allocates hundreds of thousands of small
    objects in a process that keeps a large view (``passes.kept``), and each full collection walked all of it —
    at 10,000 nodes a tenth of the pass. What a pass leaves is freed by reference counting all the same."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run_pass()
    finally:
        if collecting:
            gc.enable()


def _run_pass() -> PassReport:
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
            waiting = []
            for name, snapshot in snapshots.items():
                engine_started = time.monotonic()
                result = engine.schedule(snapshot)
                applied = time.monotonic()
                report.engine_seconds += applied - engine_started
                report.shares[name] = result.shares
                waiting += _apply(result, node_by_id, gpu_by_key, report)
                report.apply_seconds += time.monotonic() - applied
            applied = time.monotonic()
            _store_waits(waiting, timezone.now(), report)  # every cluster's at once: one comparison of the reasons
            _store_places(snapshots, report)
            report.apply_seconds += time.monotonic() - applied
    except Exception:
        if not committed:
            kept.VIEW.discard()  # what it read may be what made it fail: the next pass reads everything
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


def _apply(result: engine.PassResult, node_by_id, gpu_by_key, report: PassReport) -> list:
    """Store one cluster's admissions and preemptions and end its hopeless jobs; returns the jobs that wait on,
    whose reasons the pass stores for every cluster at once."""
    now = timezone.now()
    ids = ([a.job_id for a in result.admissions] + [p.victim_id for p in result.preemptions]
           + [p.preemptor_id for p in result.preemptions])
    jobs = Job.objects.select_related("cluster", "tenant").in_bulk(ids)
    _preempt(result.preemptions, jobs, now, report)
    _admit(result.admissions, jobs, node_by_id, gpu_by_key, now, report)
    # a job whose dependency can never be met ends (jobs.dependencies), as one that avoids every node does
    return dependencies.end_unmeetable(_end_hopeless(result.waiting, now, report), now)


def _preempt(preemptions, jobs: dict, now, report: PassReport) -> None:
    """Stop this pass's victims: one compare-and-set per status they are in rather than one per victim, then
    the victims' audit records in one append, each victim's stop on its cluster, the preemptors' timeline lines
    in one insert, and the requeues one per retry count."""
    texts, data, notes, victims = {}, {}, {}, {}
    for preemption in preemptions:
        victim, preemptor = jobs[preemption.victim_id], jobs[preemption.preemptor_id]
        if victim.status not in ACTIVE_STATUSES or victim.pk in victims:
            continue  # it ended or was cancelled since the snapshot: its GPUs are free anyway
        # No job id in the stored sentence: the victim's readers may not see the preemptor (another tenant's). The
        # job page names it to those who may (``scheduling.jobs.attempts``), from the data kept beside it.
        rule = Phrase(PREEMPTION_RULES.get(preemption.rule, preemption.rule))
        texts[victim.pk] = Phrase(gettext_noop("Preempted by a job of tenant %(tenant)s (%(rule)s)."), {
            "tenant": preemption.preemptor_tenant, "rule": rule})
        data[victim.pk] = PreemptedBy(preemptor=preemptor.pk, preemptor_tenant=preemption.preemptor_tenant,
                                      preemptor_owner=preemptor.owner_id, rule=preemption.rule)
        stopped: StoppedNote = {"victim": victim.pk, "victim_tenant": victim.tenant.name,
                                "victim_owner": victim.owner_id, "rule": preemption.rule}
        notes[victim.pk] = (preemptor, Phrase(gettext_noop(
            "Stopped a running job of tenant %(tenant)s to start (%(rule)s)."), {"tenant": victim.tenant.name,
                                                                                "rule": rule}), stopped)
        victims[victim.pk] = (victim, preemption)
    groups = defaultdict(list)
    for victim, _preemption in victims.values():
        groups[victim.status].append(victim)
    moved = set()
    for group in groups.values():
        moved |= {event.job_id for event in lifecycle.transition_many(
            group, JobStatus.PREEMPTED, texts, at=now, data=data, skip_moved=True,
            failure_category=FailureCategory.PREEMPTED)}
    kept_preempted = [victim for pk, (victim, _p) in victims.items()
                      if pk in moved and not victim.requeue_on_preemption]
    for victim in kept_preempted:  # its own sentence; a requeued victim's is cleared by the requeue anyway
        victim.failure_message = texts[victim.pk]
    bulk_set(Job, kept_preempted, ["failure_message"])
    # The records are read by the victims' tenants: the preemptor's tenant and the rule, never its id (another
    # tenant's job); the preemptor's own timeline names the job it stopped. One append for all of them.
    audit.record_many([audit.Entry(AuditAction.JOB_PREEMPT, victims[pk][0], reason=texts[pk], after={
        "preemptor_tenant": victims[pk][1].preemptor_tenant, "rule": victims[pk][1].rule}) for pk in sorted(moved)])
    requeued = defaultdict(list)
    for pk in sorted(moved):
        victim, preemption = victims[pk]
        if victim.cluster_id:
            executor = executor_for(victim.cluster)
            lifecycle.keep_attempt_log(victim, executor.stopped_log(victim, DEFAULT_TAIL))
            executor.stop(victim)
        if victim.requeue_on_preemption:
            requeued[victim.retry_count].append(victim)
        report.preempted.append((pk, preemption.preemptor_id, preemption.rule))
    lifecycle.note_many([(preemptor, JobEvent.Kind.PREEMPTION, text, stopped)
                         for pk, (preemptor, text, stopped) in notes.items() if pk in moved], at=now)
    for retries, group in requeued.items():
        lifecycle.transition_many(group, JobStatus.QUEUED, {victim.pk: Phrase(gettext_noop(
            "Requeued after preemption (retry %(n)d)."), {"n": retries + 1}) for victim in group}, at=now,
            data=data, retry_count=retries + 1, cluster=None, executor_state={}, failure_category="",
            failure_message="")


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
    bulk_insert(JobAllocation, [a for job_id in admitted_ids for a in allocations[job_id]])
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
        data[job.pk] = {"code": wait.reason.value, "params": queue_states.jsonable(wait.params),
                        "attempts": len(attempts)}
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
    """Each waiting job's reason, an event only when it changed, and its places and estimates for the queue
    table. Only the jobs that still wait are written (a cancel since the snapshot wins)."""
    values = {w.job_id: (w.reason.value, w.params) for w in waiting}
    found, written = queue_states.store(values)
    report.states_written += written
    events = []
    for wait in waiting:
        if wait.job_id not in found:
            continue  # cancelled (or gone) since the snapshot
        status, reason_changed = found[wait.job_id]
        if reason_changed:
            events.append(JobEvent(job_id=wait.job_id, at=now, kind=JobEvent.Kind.WAIT_REASON, from_status=status,
                                   to_status=status, reason=wait.message,
                                   data={"code": wait.reason.value, "params": queue_states.jsonable(wait.params)}))
        report.waiting.append((wait.job_id, wait.reason.value, wait.message))
        report.places.append((wait.job_id, wait.position, wait.tenant_position, wait.estimated_start,
                              wait.earliest_start, wait.latest_start))
    bulk_insert(JobEvent, events)
    if written or events:
        pagecache.data_changed()  # reasons shown on the dashboard


def _store_places(snapshots: dict, report: PassReport) -> None:
    """The queue table of every cluster's waiting jobs (``queue_states.write_table``)."""
    models = {job.id: job.gpu_model for snapshot in snapshots.values() for job in snapshot.waiting}
    rows = queue_states.place_rows(report.places, models)
    report.table_written = queue_states.write_table(rows, timezone.now())
    if report.table_written:
        pagecache.data_changed()  # queue positions and estimates shown on the dashboard
