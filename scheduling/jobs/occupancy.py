"""Scheduling's answers to the fleet (see ``fleet.occupancy``): which GPUs jobs hold, and what a hardware
fault means for the jobs it hits. Registered in ``SchedulingConfig.ready()``."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext_noop

from fleet.models import Node
from fleet.occupancy import Headroom, NodeWork
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from scheduling import engine, lifecycle
from scheduling.jobs import queries
from scheduling.models import ACTIVE_STATUSES, FailureCategory, Job, JobAllocation, JobEvent, Reservation
from scheduling.triggers import request_scheduling_pass


def _active_allocations():
    return JobAllocation.objects.filter(released_at__isnull=True, job__status__in=ACTIVE_STATUSES)


class JobOccupancy:
    def held_gpus(self) -> dict[int, set[int]]:
        held: dict[int, set[int]] = {}
        # Unordered: a set per node; the allocations' default order joined the nodes to every dashboard.
        for node_id, index in _active_allocations().order_by().values_list("gpu__node_id", "gpu__index"):
            held.setdefault(node_id, set()).add(index)
        return held

    def headroom(self, user) -> list[Headroom]:
        """The reader's quotas with what other tenants' reservations in force keep now, counted as the pass
        counts them (``engine.reserved_for_others``); every tenant's use counts, not only the reader's."""
        now = timezone.now()
        reservations = [engine.Reservation(r.pk, r.tenant.name, r.gpu_model, r.gpus, r.start.timestamp(),
                                           r.end.timestamp())
                        for r in Reservation.objects.filter(start__lte=now, end__gt=now).select_related("tenant")]
        usage = {(row["job__tenant__name"], row["job__gpu_model"]): row["gpus"] for row in _active_allocations()
                 .values("job__tenant__name", "job__gpu_model").annotate(gpus=Count("id"))}
        rows = []
        for quota in queries.quota_usage(user):
            held, holder, until = engine.reserved_for_others(reservations, usage, quota.tenant, quota.gpu_model,
                                                             now.timestamp(), now.timestamp())
            rows.append(Headroom(quota.tenant, quota.gpu_model, quota.used, quota.guaranteed, quota.limit, held,
                                 holder, until))
        return rows

    def work_on(self, node_id: int) -> list[NodeWork]:
        rows = (_active_allocations().filter(gpu__node_id=node_id).values(
            "job_id", "job__name", "job__tenant__name", "job__owner__username", "job__status")
            .annotate(gpus=Count("id")).order_by("job_id"))
        return [NodeWork(r["job_id"], r["job__name"], r["job__tenant__name"], r["job__owner__username"],
                         r["job__status"], r["gpus"]) for r in rows]

    def holders(self, user, gpu_ids) -> dict[int, dict]:
        rows = list(_active_allocations().filter(gpu_id__in=list(gpu_ids)).values_list("gpu_id", "job_id"))
        visible = Job.objects.visible_to(user).filter(pk__in={j for _g, j in rows}).select_related("tenant")
        jobs = {j.pk: j for j in visible}
        return {gpu_id: {"job": jobs.get(job_id), "hidden": job_id not in jobs} for gpu_id, job_id in rows}


def mark_jobs_hit_by_fault(sender, category: str, reason: str, node: Node, gpu_id: int | None, at, evidence="",
                           **kwargs) -> int:
    """Attach the fault to every active job on the node (or GPU) as evidence for its failure diagnosis."""
    allocations = _active_allocations()
    allocations = allocations.filter(gpu_id=gpu_id) if gpu_id else allocations.filter(gpu__node_id=node.pk)
    job_ids = sorted(set(allocations.values_list("job_id", flat=True)))
    fault = {"category": category, "node": node.name, "gpu_id": gpu_id, "message": reason,
             "evidence": evidence, "at": at.isoformat()}
    for job_id in job_ids:
        # merged into the state read under the row's lock: a status sync may have recorded a server (or a
        # retry its avoided nodes) since the allocations were read, and a stale copy would erase it
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            lifecycle.note(job, JobEvent.Kind.FAULT, Phrase(gettext_noop("%(category)s on %(node)s: %(reason)s"), {
                "category": phrases.label(FailureCategory(category).label), "node": node.name, "reason": reason}),
                data=fault, at=at)
            Job.objects.filter(pk=job.pk).update(executor_state={**(job.executor_state or {}), "fault": fault})
    return len(job_ids)


def pass_after_capacity_change(sender, node: Node, job_note: str = "", actor=None, **kwargs) -> None:
    """A node was cordoned, drained or reactivated: the jobs running on it get ``job_note`` (the fleet's sentence
    of what the action means for them, a phrase) on their timelines; schedule again once that is committed."""
    if job_note:
        job_ids = sorted({work.job_id for work in JobOccupancy().work_on(node.pk)})
        for job in Job.objects.filter(pk__in=job_ids):
            lifecycle.note(job, JobEvent.Kind.EXECUTOR, job_note, actor=actor,
                           data={"node": node.name, "admin_state": node.admin_state})
    request_scheduling_pass()
