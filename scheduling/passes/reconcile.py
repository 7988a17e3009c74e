"""The reconciler: level-triggered repair of what lost messages, dead workers and races leave behind.

Celery messages may be lost, duplicated or late, and a worker may die mid-task; the scheduling pass and
dispatch are edge-triggered for speed. Every ``RECONCILE["INTERVAL_SECONDS"]`` (and on
``manage.py reconcile``) this module compares the database with itself and with the clusters and repairs,
each repair a job event with its reason, an audit record where it gives capacity back, and a counter:

* ``released``: allocations of jobs that no longer hold GPUs (no GPU is held by a job that is not running);
* ``redispatched``: jobs ``admitted`` longer than ``ADMITTED_SECONDS`` (their dispatch message was lost);
* ``recreated``: jobs ``dispatching`` longer than ``DISPATCHING_SECONDS`` whose objects never appeared on the
  cluster (created again; a cluster that still refuses them fails the job with its message);
* ``deleted``: cluster objects that belong to no active job, or to an attempt that is not the current one.

On Slurm clusters (``scheduling/executors/slurm/follow.py``): ``withdrawn`` (jobs Slurm kept pending past
``SLURM["PENDING_SECONDS"]``, placed again), ``cancelled`` (Slurm jobs the portal submitted for an attempt that
is over) and ``reallocated`` (allocations moved to the GPUs Slurm gave the job). A portal job whose Slurm job
vanished is ended by the follower at once, with slurmdb's record or "outcome unknown".
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet.models import Cluster, ExecutorKind
from gpuportal.observability import telemetry
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from scheduling import lifecycle
from scheduling.executors import KubernetesExecutor
from scheduling.executors.kubernetes import manifests
from scheduling.executors.slurm.follow import reconcile_cluster as reconcile_slurm
from scheduling.models import ACTIVE_STATUSES, Job, JobAllocation, JobEvent, JobStatus
from scheduling.passes.dispatch import dispatch_many, fail_dispatch

logger = logging.getLogger(__name__)


@dataclass
class Repair:
    kind: str
    job: int | None
    detail: str
    cluster: str = ""


@dataclass
class ReconcileReport:
    repairs: list[Repair] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, kind: str) -> int:
        return sum(1 for r in self.repairs if r.kind == kind)

    def as_dict(self) -> dict:
        return {"repairs": [asdict(r) for r in self.repairs], "errors": self.errors,
                "counts": {kind: self.count(kind) for kind in ("released", "redispatched", "recreated", "deleted",
                                                               "withdrawn", "cancelled", "reallocated")},
                "seconds": round(self.seconds, 3)}


def _note(job: Job, reason: str, data: dict, at: datetime) -> None:
    lifecycle.note(job, JobEvent.Kind.RECONCILE, reason, data=data, at=at)


def release_orphan_allocations(now: datetime, report: ReconcileReport) -> None:
    """GPUs still allocated to jobs that no longer hold any: give them back."""
    orphans = (JobAllocation.objects.filter(released_at__isnull=True).exclude(job__status__in=ACTIVE_STATUSES)
               .select_related("job__tenant", "gpu__node"))
    by_job: dict[int, list[JobAllocation]] = {}
    for allocation in orphans:
        by_job.setdefault(allocation.job_id, []).append(allocation)
    for job_id, allocations in by_job.items():
        job = allocations[0].job
        gpus = [f"{a.gpu.node.name}/gpu{a.gpu.index}" for a in allocations]
        reason = Phrase(gettext_noop("Released %(n)d GPU(s) still allocated to this job (%(status)s): %(gpus)s."), {
            "n": len(gpus), "status": phrases.label(JobStatus(job.status).label), "gpus": ", ".join(gpus)})
        with transaction.atomic():
            JobAllocation.objects.filter(pk__in=[a.pk for a in allocations], released_at__isnull=True).update(
                released_at=now)
            _note(job, reason, {"repair": "released", "gpus": gpus}, now)
            audit.record(AuditAction.RECONCILE_RELEASE, job, actor=None, reason=reason,
                         before={"allocated": gpus}, after={"allocated": []})
        report.repairs.append(Repair("released", job_id, reason))


def redispatch_stuck_admitted(now: datetime, report: ReconcileReport) -> None:
    """Jobs admitted long ago and never dispatched: their dispatch message was lost. Dispatch them now."""
    bound = timedelta(seconds=settings.RECONCILE["ADMITTED_SECONDS"])
    stuck = list(Job.objects.filter(status=JobStatus.ADMITTED, admitted_at__lt=now - bound))
    if not stuck:
        return
    for job in stuck:
        reason = Phrase(gettext_noop("Admitted %(s)d s ago and still not sent to its cluster (a lost message or a "
                                     "stopped worker): dispatched again by the reconciler."), {
            "s": int((now - job.admitted_at).total_seconds())})
        _note(job, reason, {"repair": "redispatched"}, now)
        report.repairs.append(Repair("redispatched", job.pk, reason))
    dispatch_many([job.pk for job in stuck])


def _dispatched_before(job: Job, moment: datetime) -> bool:
    sent = parse_datetime((job.executor_state or {}).get("dispatched_at") or "")
    return sent is None or sent < moment


def recreate_missing_objects(cluster: Cluster, executor: KubernetesExecutor, now: datetime,
                             report: ReconcileReport) -> None:
    """Jobs dispatching for long whose Kubernetes objects never appeared: create them again."""
    bound = timedelta(seconds=settings.RECONCILE["DISPATCHING_SECONDS"])
    jobs = (Job.objects.filter(cluster=cluster, status=JobStatus.DISPATCHING)
            .select_related("tenant", "project", "task_type", "cluster"))
    for job in jobs:
        if not _dispatched_before(job, now - bound) or executor.has_objects(job):
            continue
        reason = Phrase(gettext_noop("Dispatched over %(s)d s ago but its objects never appeared on cluster %(c)s: "
                                     "created again by the reconciler."), {
            "s": int(bound.total_seconds()), "c": cluster.name})
        _note(job, reason, {"repair": "recreated"}, now)
        report.repairs.append(Repair("recreated", job.pk, reason, cluster.name))
        try:
            executor.dispatch(job)  # the tenant's and the task type's objects too, as on the first dispatch
        except Exception as exc:  # the cluster refuses them again: the job fails with the cluster's words
            fail_dispatch(job, exc)


def delete_orphan_objects(cluster: Cluster, executor: KubernetesExecutor, now: datetime,
                          report: ReconcileReport) -> None:
    """Objects on the cluster whose job is not active, or that belong to an attempt that is not the current
    one; objects younger than the dispatch bound are left to the dispatch that may be making them."""
    grace = timedelta(seconds=settings.RECONCILE["ADMITTED_SECONDS"])
    objects = executor.managed_jobs()
    ids = {_label_int(o, manifests.JOB_LABEL) for o in objects} - {None}
    jobs = Job.objects.in_bulk(list(ids))
    for obj in objects:
        meta = obj.get("metadata", {})
        created = parse_datetime(meta.get("creationTimestamp") or "")
        if created is not None and created > now - grace:
            continue
        job = jobs.get(_label_int(obj, manifests.JOB_LABEL))
        current = job is not None and job.status in ACTIVE_STATUSES and (
            (job.executor_state or {}).get("object") in (None, meta.get("name")))
        if current:
            continue
        executor.delete_objects(meta.get("namespace", ""), meta.get("name", ""))
        reason = Phrase(gettext_noop(
            "Deleted %(ns)s/%(name)s from cluster %(c)s: it belongs to no running attempt of this job."), {
            "ns": meta.get("namespace"), "name": meta.get("name"), "c": cluster.name})
        if job is not None:
            _note(job, reason, {"repair": "deleted", "namespace": meta.get("namespace"), "object": meta.get("name")},
                  now)
        report.repairs.append(Repair("deleted", job.pk if job else None, reason, cluster.name))


def _label_int(obj: dict, label: str) -> int | None:
    try:
        return int(obj.get("metadata", {}).get("labels", {}).get(label, ""))
    except ValueError:
        return None


def reconcile(now: datetime | None = None) -> ReconcileReport:
    """One reconciliation of everything; a cluster that cannot be reached is reported and skipped."""
    started = time.monotonic()
    now = now or timezone.now()
    report = ReconcileReport()
    release_orphan_allocations(now, report)
    redispatch_stuck_admitted(now, report)
    for cluster in Cluster.objects.filter(executor=ExecutorKind.KUBERNETES):
        try:
            executor = KubernetesExecutor(cluster)
            recreate_missing_objects(cluster, executor, now, report)
            delete_orphan_objects(cluster, executor, now, report)
        except Exception as exc:  # one unreachable cluster must not stop the others
            logger.exception("reconciling cluster %s failed", cluster.name)
            report.errors.append(f"{cluster.name}: {exc}")
    for cluster in Cluster.objects.filter(executor=ExecutorKind.SLURM):
        try:
            repairs = reconcile_slurm(cluster, now)
            report.repairs += [Repair(r.kind, r.job, r.detail, cluster.name) for r in repairs]
        except Exception as exc:  # one unreachable cluster must not stop the others
            logger.exception("reconciling Slurm cluster %s failed", cluster.name)
            report.errors.append(f"{cluster.name}: {exc}")
    for repair in report.repairs:
        telemetry.increment("gpuportal_reconcile_repairs_total", kind=repair.kind)
    report.seconds = time.monotonic() - started
    return report
