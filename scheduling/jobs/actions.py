"""Changes to existing jobs: cancel, hold and release, a new task type (priority), a longer runtime, an idle
job reclaimed, a note on the timeline; and reservations of capacity.

Every change is an event on the job's timeline with its reason (status changes go through ``lifecycle``).
Governance carries out approved requests through these functions and never writes ``Job`` or ``JobEvent``
rows itself. Functions taking ``user`` check permissions and ask for a scheduling pass; the others are
called by services that checked, inside their transaction, and that ask for the pass once for all.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet.models import Node
from gpuportal.text.phrases import Phrase
from gpuportal.web.conflicts import StateConflict
from scheduling import lifecycle
from scheduling.executors import executor_for
from scheduling.lifecycle import note
from scheduling.models import ACTIVE_STATUSES, WAITING_STATUSES, HeldBy, Job, JobEvent, JobStatus, Reservation, TaskType
from scheduling.triggers import request_scheduling_pass
from tenants import access


def _ended(job: Job) -> ValidationError:
    return ValidationError({"status": _("Job #%(id)d has already ended (%(status)s).") % {
        "id": job.pk, "status": job.get_status_display()}})


def _cancel(job: Job, text: str, actor=None, audited=None) -> str:
    """Cancel ``job`` from whatever state it is in now (a pass or a dispatch may move it meanwhile), with
    ``audited(before)`` in the same transaction; returns the state it was cancelled from."""
    for _attempt in range(3):
        before = job.status
        try:
            with transaction.atomic():
                lifecycle.transition(job, JobStatus.CANCELLED, text, actor=actor)
                if audited is not None:
                    audited(before)
            return before
        except lifecycle.InvalidTransition:
            job.refresh_from_db()
            if job.is_terminal:
                raise _ended(job) from None
    raise ValidationError({"status": _("Job #%(id)d keeps changing state; reload and retry.") % {"id": job.pk}})


def cancel_job(user, job: Job, reason: str = "") -> Job:
    """Cancel a waiting or running job; the executor stops it and its GPUs are released."""
    if not access.can_manage_job(user, job.tenant_id, job.owner_id):
        raise PermissionDenied(_("You may not cancel this job."))
    if job.is_terminal:
        raise _ended(job)
    text = Phrase(gettext_noop("Cancelled by %(user)s. %(note)s") if reason else gettext_noop("Cancelled by %(user)s."),
                  {"user": user.get_username(), **({"note": reason} if reason else {})})

    def audited(before: str) -> None:
        if user.pk != job.owner_id:  # the owner cancelling their own job is not a governance action
            audit.record(AuditAction.JOB_CANCEL, job, actor=user, reason=text, before={"status": before},
                         after={"status": job.status})

    before = _cancel(job, text, actor=user, audited=audited)
    was_active = job.cluster_id is not None and before in ACTIVE_STATUSES
    if was_active:
        executor_for(job.cluster).stop(job)
    request_scheduling_pass()
    return job


def approve_admission(jobs: list[Job], reason: str, actor) -> int:
    """Queue the jobs that waited for approval (an array's tasks are decided at once); returns how many moved."""
    return _decide_admission(jobs, JobStatus.QUEUED, reason, actor)


def refuse_admission(jobs: list[Job], reason: str, actor=None) -> int:
    """Cancel the jobs whose approval was refused or expired; returns how many moved."""
    return _decide_admission(jobs, JobStatus.CANCELLED, reason, actor)


def _decide_admission(jobs: list[Job], to_status: str, reason: str, actor) -> int:
    """Move the jobs that still wait for approval (one cancelled meanwhile no longer does) in one update."""
    waiting = [job for job in jobs if job.status == JobStatus.PENDING]
    return len(lifecycle.transition_many(waiting, to_status, dict.fromkeys((job.pk for job in waiting), reason),
                                         actor=actor, skip_moved=True))


def stop_with_service(job: Job, reason: str) -> None:
    """Cancel a replica of a service that was stopped (``workloads.finish_stops``): the portal acts, on the stop
    a person asked for; the executor stops it."""
    _cancel(job, reason)
    if job.cluster_id:
        executor_for(job.cluster).stop(job)


def reclaim_job(job: Job, reason: str, at, data: dict) -> None:
    """Stop a running job that stayed idle (governance decided, with its evidence in ``data``). The executor
    stops it once the caller's transaction commits; the caller asks for the pass that reuses its GPUs."""
    lifecycle.transition(job, JobStatus.CANCELLED, reason, at=at, data=data)
    if job.cluster_id:
        transaction.on_commit(lambda: executor_for(job.cluster).stop(job))


def set_hold(user, job: Job, hold: bool) -> Job:
    """Hold a waiting job (it keeps its place but is not started) or release it. Owners hold as "user";
    tenant and platform admins as "admin"; only an admin releases an admin hold.

    The job's row is locked and read afresh before anything is decided: a scheduling pass admits only jobs that
    are still queued and not held, under the same lock (``lifecycle.transition_many``), so a hold and an
    admission racing on one job are serialised — the hold wins if it locks first, else it is refused with the
    state the pass moved the job to (a ``StateConflict``, 409 in the API), never answered "held" for a job that
    starts anyway."""
    if not access.can_manage_job(user, job.tenant_id, job.owner_id):
        raise PermissionDenied(_("You may not hold or release this job."))
    is_admin = job.owner_id != user.pk or access.is_platform_admin(user)
    with transaction.atomic():
        locked = Job.objects.select_for_update().only("status", "held_by").get(pk=job.pk)
        if locked.status not in WAITING_STATUSES:
            raise StateConflict({"status": _(
                "Only a waiting job can be held or released; job #%(id)d is %(s)s now.") % {
                "id": job.pk, "s": locked.get_status_display()}})
        if not hold and locked.held_by == HeldBy.ADMIN and not access.can_manage_tenant(user, job.tenant_id):
            raise PermissionDenied(_("An admin hold can only be released by an admin."))
        new = (HeldBy.ADMIN if is_admin else HeldBy.USER) if hold else ""
        Job.objects.filter(pk=job.pk).update(held_by=new)
        job.refresh_from_db(fields=["status", "held_by"])  # the timeline says the state it was held in
        note(job, JobEvent.Kind.HOLD, Phrase(gettext_noop("Held by %(user)s.") if hold
                                             else gettext_noop("Released by %(user)s."), {"user": user.get_username()}),
             actor=user, data={"held_by": new})
        request_scheduling_pass()
    return job


def clear_avoidance(user, job: Job) -> Job:
    """Let a waiting job run again on the nodes its earlier attempts failed on (a platform admin who knows the
    nodes are repaired; without this the avoidance lasts ``SCHEDULER["AVOID_NODE_HOURS"]``). Audited: it
    overrides a rule the portal applied to protect the job."""
    if not access.is_platform_admin(user):
        raise PermissionDenied(_("Only a platform admin may clear a job's node avoidance."))
    with transaction.atomic():
        locked = Job.objects.select_for_update().only("status", "executor_state").get(pk=job.pk)
        if locked.status not in WAITING_STATUSES:
            raise StateConflict({"status": _(
                "Only a waiting job's node avoidance can be cleared; job #%(id)d is %(s)s now.") % {
                "id": job.pk, "s": locked.get_status_display()}})
        state = dict(locked.executor_state or {})
        before = state.get("avoid_nodes", [])
        if not before:
            raise ValidationError({"avoid_nodes": _("Job #%(id)d avoids no node.") % {"id": job.pk}})
        names = ", ".join(sorted(Node.objects.filter(pk__in=before).values_list("name", flat=True)))
        state.update(avoid_nodes=[], avoid_since={})
        Job.objects.filter(pk=job.pk).update(executor_state=state)
        job.refresh_from_db(fields=["status", "executor_state"])
        note(job, JobEvent.Kind.RETRY, Phrase(gettext_noop(
            "%(user)s cleared the node avoidance: it may run on %(nodes)s again."), {
            "user": user.get_username(), "nodes": names}), actor=user, data={"avoided": before})
        audit.record(AuditAction.JOB_CLEAR_AVOIDANCE, job, actor=user, before={"avoid_nodes": before},
                     after={"avoid_nodes": []})
        request_scheduling_pass()
    return job


def change_task_type(job: Job, task_type: TaskType, reason: str, actor=None, data: dict | None = None) -> dict:
    """Give a job another task type and that type's priority; returns what it had before."""
    before = {"task_type": job.task_type.code, "priority": job.priority}
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(task_type=task_type, priority=task_type.priority)
        note(job, JobEvent.Kind.APPROVAL, reason, actor=actor, data={**(data or {}), "before": before})
    job.task_type, job.priority = task_type, task_type.priority
    return before


def extend_runtime(job: Job, minutes: int, reason: str, actor=None, data: dict | None = None) -> int:
    """Set a job's maximum runtime; returns the one it had before."""
    before = job.max_runtime_minutes
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(max_runtime_minutes=minutes)
        note(job, JobEvent.Kind.APPROVAL, reason, actor=actor, data=data)
    job.max_runtime_minutes = minutes
    return before


def create_reservation(tenant, gpu_model: str, gpus: int, start, end, created_by=None) -> Reservation:
    """Hold capacity for a tenant (an approved reservation request); the next pass keeps it free."""
    return Reservation.objects.create(tenant=tenant, gpu_model=gpu_model, gpus=gpus, start=start, end=end,
                                      created_by=created_by)
