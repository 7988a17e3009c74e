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
from scheduling.snapshots import load_snapshots

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


def _tenants_of(snapshot: engine.Snapshot) -> dict[int, str]:
    return {j.id: j.tenant for j in (*snapshot.running, *snapshot.waiting)}


def what_if(change: Change, subject_tenant: str, now=None) -> dict:
    """Preemptions, delays and early starts the change causes, per job with its tenant (plain JSON)."""
    snapshots, _nodes, _gpus = load_snapshots(now or timezone.now())
    preempts, delays, starts = [], [], []
    for snapshot in snapshots.values():
        changed = change(snapshot)
        before, after = engine.schedule(snapshot), engine.schedule(changed)
        tenant_of = _tenants_of(snapshot)
        preempted_before = {p.victim_id for p in before.preemptions}
        for p in after.preemptions:
            if p.victim_id not in preempted_before:
                preempts.append({"job": p.victim_id, "tenant": p.victim_tenant, "rule": p.rule})
        admitted_before, admitted_after = before.admitted_ids(), after.admitted_ids()
        for job_id in admitted_after - admitted_before:
            starts.append({"job": job_id, "tenant": tenant_of.get(job_id, "")})
        waits_after = {w.job_id: w for w in after.waiting}
        for job_id in admitted_before - admitted_after:
            delays.append({"job": job_id, "tenant": tenant_of.get(job_id, ""), "before": "now",
                           "after": _when(waits_after.get(job_id))})
        for wait in before.waiting:
            later = waits_after.get(wait.job_id)
            if (later is not None and wait.estimated_start is not None and later.estimated_start is not None
                    and later.estimated_start - wait.estimated_start > DELAY_TOLERANCE):
                delays.append({"job": wait.job_id, "tenant": tenant_of.get(wait.job_id, ""),
                               "before": _when(wait), "after": _when(later)})
    return {"preempts": preempts, "delays": delays, "starts": starts,
            "other_tenants_preempted": sorted({p["tenant"] for p in preempts if p["tenant"] != subject_tenant}),
            "other_tenants_delayed": sorted({d["tenant"] for d in delays if d["tenant"] != subject_tenant}),
            "computed_at": (now or timezone.now()).isoformat(timespec="seconds")}


def _when(wait) -> str | None:
    if wait is None or wait.estimated_start is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(wait.estimated_start, UTC).isoformat(timespec="minutes")
