"""What a request would do if approved now: the engine on the snapshot the next pass would see, as it is and
as the approval would change it.

The next pass reads the world through ``load_snapshots`` and the pure engine decides on it, so the preview runs
the same engine on the same snapshots (``scheduling.passes.preview``), each change made there as the approval
makes it in the database (a higher priority, a burst in force, a reservation, a longer runtime, a new quota).
It says, for the request's own job, whether it starts now, right after the preemptions the pass makes for it,
or waits (its position and likely start); and for the others, which jobs of which tenants it would preempt,
which waiting jobs it would delay and by how much, and which it would let start. Nothing is written.

A preemptor is not admitted in the pass that stops its victims (the engine holds their GPUs for it); the pass
right after admits it. A preview that reported only admissions said "would start now: nothing" beside "would
preempt #697" for a job that started a second after its approval; it now reports such a start.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime

from django.utils import timezone

from scheduling import engine
from scheduling.jobs.queries import size_text
from scheduling.passes import preview, queue_states

#: A waiting job is "delayed" when its estimated start moves later by more than this (seconds).
DELAY_TOLERANCE = 60.0

Change = preview.Change


def with_priority(job_id: int, priority: int, preemptible: bool, task_type: str | None = None,
                  expected_runtime: float | None | object = ...) -> Change:
    """The job in another task type: its priority, whether it may be preempted, and (when given) the type's
    code and the runtime history expects of it, as the next pass would load them."""
    fields: dict = {"priority": priority, "preemptible": preemptible}
    if task_type is not None:
        fields["task_type"] = task_type
    if expected_runtime is not ...:
        fields["expected_runtime"] = expected_runtime

    def change(snapshot):
        return dataclasses.replace(
            snapshot,
            waiting=tuple(dataclasses.replace(j, **fields) if j.id == job_id else j for j in snapshot.waiting),
            running=tuple(dataclasses.replace(j, **fields) if j.id == job_id else j for j in snapshot.running))
    return change


def unchanged(snapshot: engine.Snapshot) -> engine.Snapshot:
    """A change the next pass would not see yet (a burst that starts later, or for a model without quota)."""
    return snapshot


def with_limit(tenant: str, gpu_model: str, guaranteed: int, limit: int, department: str = "") -> Change:
    """The tenant's quota of ``gpu_model`` as the next pass would load it: ``limit`` is the effective limit
    (the configured one plus the bursts in force, ``tenants.quotas``)."""
    def change(snapshot):
        quotas, found = [], False
        for q in snapshot.quotas:
            if q.tenant == tenant and q.gpu_model == gpu_model:
                found = True
                q = dataclasses.replace(q, guaranteed=guaranteed, limit=limit)
            quotas.append(q)
        if not found:
            quotas.append(engine.QuotaSnapshot(tenant, gpu_model, guaranteed, limit, department))
        return dataclasses.replace(snapshot, quotas=tuple(quotas))
    return change


def with_reservation(tenant: str, gpu_model: str, gpus: int, start: float, end: float) -> Change:
    def change(snapshot):
        return dataclasses.replace(snapshot, reservations=(
            *snapshot.reservations, engine.Reservation(-1, tenant, gpu_model, gpus, start, end)))
    return change


def with_runtime(job_id: int, max_runtime_seconds: float) -> Change:
    def change(snapshot):
        return dataclasses.replace(snapshot, running=tuple(
            dataclasses.replace(j, max_runtime=max_runtime_seconds) if j.id == job_id else j
            for j in snapshot.running), waiting=tuple(
            dataclasses.replace(j, max_runtime=max_runtime_seconds) if j.id == job_id else j
            for j in snapshot.waiting))
    return change


def _size(job) -> str:
    """The job's size as the queue page shows other tenants' jobs (``scheduling.jobs.queries.size_text``)."""
    if isinstance(job, engine.WaitingJob):
        return size_text(job.nodes, job.gpus_per_node, job.gpu_milli, job.gpu_model)
    first = job.placements[0] if job.placements else None
    return size_text(len(job.placements), len(first.gpu_indices) if first else 0,
                     first.gpu_milli if first else engine.WHOLE, job.gpu_model)


class _Describe:
    """One job of the preview as JSON: the request's own tenant sees ids; other tenants' jobs, like on the
    queue page, only their tenant, size and reason, so an approver learns no other tenant's job ids."""

    def __init__(self, jobs: dict, subject_tenant: str):
        self.jobs = jobs
        self.subject_tenant = subject_tenant

    def __call__(self, job_id: int, reason: str = "", **extra) -> dict:
        job = self.jobs.get(job_id)
        tenant = job.tenant if job else ""
        entry = {"job": job_id if tenant == self.subject_tenant else None, "tenant": tenant,
                 "size": _size(job) if job else "", "reason": str(reason), **extra}
        return entry


def _wait_fields(wait) -> dict:
    """A waiting job's reason (code and numbers, rendered in the reader's language on the page), its queue
    positions and likely start."""
    return {"code": wait.reason.value, "params": queue_states.jsonable(wait.params), "position": wait.position,
            "tenant_position": wait.tenant_position, "estimated_start": _iso(wait.estimated_start),
            "earliest_start": _iso(wait.earliest_start), "latest_start": _iso(wait.latest_start)}


def _outcome(result: preview.NextPass, job_id: int, describe: _Describe, changed: bool) -> dict:
    """What the next pass does with the request's job: "now", "after_preemption" (naming its victims),
    "waits" (reason, positions, likely start) or "running" (it runs already)."""
    outcome = result.outcome(job_id, changed)
    if outcome is None:
        running = any(j.id == job_id for w in (result.changed if changed else result.world).values()
                      for j in w.running)
        return {"starts": "running" if running else "unknown"}
    entry = {"starts": outcome.starts}
    if outcome.victims:
        entry["victims"] = [describe(v) for v in outcome.victims]
    if outcome.starts != "now":
        results = result.after if changed else result.before
        wait = next(w for r in results.values() for w in r.waiting if w.job_id == job_id)
        entry.update(_wait_fields(wait))
    return entry


def what_if(change: Change, subject_tenant: str, now=None, subject_job: int | None = None) -> dict:
    """What the next pass would do differently with the change: preemptions, delays (by how much) and starts
    (at once, or right after the preemptions made for them), per job with its tenant (plain JSON), and for
    ``subject_job`` (the request's own job) what happens to it with and without the change.

    Other tenants' jobs carry no id (``job`` is None): the preview is stored with the request and shown
    to everyone who may read it."""
    now = now or timezone.now()
    result = preview.next_pass(preview.each_cluster(change), now)
    return summarise(result, subject_tenant, now, subject_job)


def summarise(result: preview.NextPass, subject_tenant: str, now, subject_job: int | None = None) -> dict:
    """The preview's JSON from the engine's two runs (``what_if``; the property tests call it on worlds of
    their own)."""
    describe = _Describe(result.jobs(), subject_tenant)
    preempts, delays, starts = [], [], []
    preempted_before = {p.victim_id for p in result.preemptions(changed=False)}
    for p in result.preemptions():
        if p.victim_id not in preempted_before:
            preempts.append({**describe(p.victim_id, p.rule), "tenant": p.victim_tenant, "rule": p.rule,
                             "for": describe(p.preemptor_id)["job"]})
    admitted_before, admitted_after = result.admitted(changed=False), result.admitted()
    for job_id in sorted(admitted_after - admitted_before):
        starts.append(describe(job_id, "admitted", when="now"))
    preemptors_before = {p.preemptor_id for p in result.preemptions(changed=False)}
    preemptors_after = {}
    for p in result.preemptions():
        preemptors_after.setdefault(p.preemptor_id, []).append(p.victim_id)
    for job_id in sorted(set(preemptors_after) - preemptors_before - admitted_before):
        starts.append(describe(job_id, "admitted", when="after_preemption", victims=len(preemptors_after[job_id])))
    waits_after = {w.job_id: w for r in result.after.values() for w in r.waiting}
    for job_id in sorted(admitted_before - admitted_after):
        later = waits_after.get(job_id)
        delays.append(describe(job_id, later.reason.value if later else "", before="now", after=_when(later),
                               by=_by(now.timestamp(), later)))
    for wait in (w for r in result.before.values() for w in r.waiting):
        later = waits_after.get(wait.job_id)
        if (later is not None and wait.estimated_start is not None and later.estimated_start is not None
                and later.estimated_start - wait.estimated_start > DELAY_TOLERANCE):
            delays.append(describe(wait.job_id, later.reason.value, before=_when(wait), after=_when(later),
                                   by=round(later.estimated_start - wait.estimated_start)))
    impact = {"preempts": preempts, "delays": delays, "starts": starts,
              "other_tenants_preempted": sorted({p["tenant"] for p in preempts if p["tenant"] != subject_tenant}),
              "other_tenants_delayed": sorted({d["tenant"] for d in delays if d["tenant"] != subject_tenant}),
              "computed_at": now.isoformat(timespec="seconds")}
    if subject_job is not None:
        impact["subject"] = {"job": subject_job, "before": _outcome(result, subject_job, describe, False),
                             "after": _outcome(result, subject_job, describe, True)}
    return impact


def _by(now: float, later) -> int | None:
    """How much later than now a job that would have started now starts (None: unknown)."""
    if later is None or later.estimated_start is None or not math.isfinite(later.estimated_start):
        return None
    return max(0, round(later.estimated_start - now))


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None or not math.isfinite(timestamp):
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="minutes")


def _when(wait) -> str | None:
    return None if wait is None else _iso(wait.estimated_start)
