"""What a request would do if approved now: the scheduling engine run twice on today's snapshot.

The engine is pure, so the what-if is exact for the current state: one pass as things are, one with the
request applied (a higher priority, a raised limit, a reservation, a longer runtime, a new quota). The
difference names the jobs of which tenants it would preempt, which waiting jobs it would delay, and which
it would let start. Nothing is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from django.utils import timezone

from scheduling import engine
from scheduling.jobs.queries import size_text
from scheduling.passes.snapshots import load_snapshots

#: A waiting job is "delayed" when its estimated start moves later by more than this (seconds).
DELAY_TOLERANCE = 60.0

Change = Callable[[engine.Snapshot], engine.Snapshot]


def with_priority(job_id: int, priority: int, preemptible: bool) -> Change:
    def change(snapshot):
        return dataclasses.replace(
            snapshot,
            waiting=tuple(dataclasses.replace(j, priority=priority, preemptible=preemptible) if j.id == job_id else j
                          for j in snapshot.waiting),
            running=tuple(dataclasses.replace(j, priority=priority, preemptible=preemptible) if j.id == job_id else j
                          for j in snapshot.running))
    return change


def with_limit(tenant: str, gpu_model: str, extra: int = 0, guaranteed: int | None = None,
               limit: int | None = None) -> Change:
    """A burst (``extra`` above the limit) or a new quota (``guaranteed`` / ``limit``)."""
    def change(snapshot):
        quotas, found = [], False
        for q in snapshot.quotas:
            if q.tenant == tenant and q.gpu_model == gpu_model:
                found = True
                q = dataclasses.replace(q, guaranteed=q.guaranteed if guaranteed is None else guaranteed,
                                        limit=(q.limit if limit is None else limit) + extra)
            quotas.append(q)
        if not found:
            quotas.append(engine.QuotaSnapshot(tenant, gpu_model, guaranteed or 0, (limit or 0) + extra))
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

    def __init__(self, snapshot: engine.Snapshot, subject_tenant: str):
        self.jobs = {j.id: j for j in (*snapshot.running, *snapshot.waiting)}
        self.subject_tenant = subject_tenant

    def __call__(self, job_id: int, reason: str = "", **extra) -> dict:
        job = self.jobs.get(job_id)
        tenant = job.tenant if job else ""
        entry = {"job": job_id if tenant == self.subject_tenant else None, "tenant": tenant,
                 "size": _size(job) if job else "", "reason": str(reason), **extra}
        return entry


def what_if(change: Change, subject_tenant: str, now=None) -> dict:
    """Preemptions, delays and early starts the change causes, per job with its tenant (plain JSON).

    Other tenants' jobs carry no id (``job`` is None): the preview is stored with the request and shown
    to everyone who may read it."""
    snapshots, _nodes, _gpus = load_snapshots(now or timezone.now())
    preempts, delays, starts = [], [], []
    for snapshot in snapshots.values():
        changed = change(snapshot)
        before, after = engine.schedule(snapshot), engine.schedule(changed)
        describe = _Describe(snapshot, subject_tenant)
        preempted_before = {p.victim_id for p in before.preemptions}
        for p in after.preemptions:
            if p.victim_id not in preempted_before:
                preempts.append({**describe(p.victim_id, p.rule), "tenant": p.victim_tenant, "rule": p.rule})
        admitted_before, admitted_after = before.admitted_ids(), after.admitted_ids()
        for job_id in sorted(admitted_after - admitted_before):
            starts.append(describe(job_id, "admitted"))
        waits_after = {w.job_id: w for w in after.waiting}
        for job_id in sorted(admitted_before - admitted_after):
            later = waits_after.get(job_id)
            delays.append(describe(job_id, later.reason if later else "", before="now", after=_when(later)))
        for wait in before.waiting:
            later = waits_after.get(wait.job_id)
            if (later is not None and wait.estimated_start is not None and later.estimated_start is not None
                    and later.estimated_start - wait.estimated_start > DELAY_TOLERANCE):
                delays.append(describe(wait.job_id, later.reason, before=_when(wait), after=_when(later)))
    return {"preempts": preempts, "delays": delays, "starts": starts,
            "other_tenants_preempted": sorted({p["tenant"] for p in preempts if p["tenant"] != subject_tenant}),
            "other_tenants_delayed": sorted({d["tenant"] for d in delays if d["tenant"] != subject_tenant}),
            "computed_at": (now or timezone.now()).isoformat(timespec="seconds")}


def _when(wait) -> str | None:
    if wait is None or wait.estimated_start is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(wait.estimated_start, UTC).isoformat(timespec="minutes")
