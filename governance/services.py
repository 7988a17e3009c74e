"""Requests and decisions: one place for the rules, called by the pages, the API and the tasks.

Who decides (``scope``): the tenant's approvers decide requests that stay inside the tenant (a higher
priority that preempts nobody else, a longer runtime, the approval of a job); a platform approver (a
platform admin) decides those that affect other tenants: bursts above the limit, reservations, quota
changes, and any priority change the engine says would preempt another tenant's job. Nobody decides their
own request, whatever roles they hold.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypedDict

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet.catalogue import gpu_model_catalogue
from governance import impact as what_if
from governance.models import (
    ADMISSION_JUSTIFICATION,
    GROUP_ADMISSION_JUSTIFICATION,
    ApproverScope,
    NotificationKind,
    PriorityRequest,
    RequestKind,
    RequestState,
)
from governance.notifications.services import notify, platform_approvers, tenant_approvers
from gpuportal.text.phrases import Phrase
from gpuportal.web.validation import Refusals, keyed, parse_moment, parse_whole_number, refuse
from scheduling.jobs import actions as job_actions
from scheduling.models import Job, JobStatus, TaskType
from scheduling.passes import preview
from scheduling.triggers import request_scheduling_pass
from tenants import access, quotas
from tenants.models import Quota, Role, Tenant

K = RequestKind
#: Longest max runtime a runtime extension may ask for (30 days), and the longest burst or reservation.
MAX_EXTENDED_RUNTIME_MINUTES = 30 * 24 * 60
MAX_WINDOW = timedelta(days=90)
MIN_JUSTIFICATION, MAX_JUSTIFICATION = 10, 5000
#: The most GPUs a quota change may name as guaranteed or as the limit.
MAX_QUOTA_GPUS = 100000
#: The longest comment an approver may leave with a decision (refused above it, never cut).
MAX_COMMENT = 2000
PLATFORM_KINDS = (K.BURST, K.RESERVATION, K.QUOTA)


def requests_for(user):
    return PriorityRequest.objects.visible_to(user).select_related(
        "tenant", "requester", "decided_by", "job", "task_type")


# --- submitting --------------------------------------------------------------------------------------------


def _job(user, data) -> Job:
    raw = data.get("job")
    try:
        job = Job.objects.visible_to(user).select_related("task_type", "tenant").get(pk=int(str(raw)))
    except (TypeError, ValueError, Job.DoesNotExist):
        refuse("job", _("Give the id of one of your tenants' jobs."))
    if job.is_terminal:
        refuse("job", _("Job #%(id)d has already ended.") % {"id": job.pk})
    if not access.can_manage_job(user, job.tenant_id, job.owner_id):
        refuse("job", _("Only the job's owner or a tenant admin may ask for it."))
    return job


def _tenant(user, data, roles) -> Tenant:
    name = str(data.get("tenant", "")).strip()
    tenant = Tenant.objects.visible_to(user).filter(name=name).first() if name else None
    if tenant is None:
        mine = [t for t in Tenant.objects.visible_to(user) if access.has_role(user, t.pk, roles)]
        if not name and len(mine) == 1:
            return mine[0]
        refuse("tenant", _("Give one of your tenants."))
    if not access.has_role(user, tenant.pk, roles) and not access.is_platform_admin(user):
        refuse("tenant", _("You may not ask for tenant %(t)s.") % {"t": tenant.name})
    return tenant


def _gpu_model(data) -> tuple[str, int]:
    """The GPU model named and how many GPUs of it the fleet has."""
    model = str(data.get("gpu_model", "")).strip()
    catalogue = gpu_model_catalogue()
    if model not in catalogue:
        refuse("gpu_model", _("Unknown GPU model %(m)r; known: %(k)s.") % {
            "m": model, "k": ", ".join(catalogue) or "-"})
    return model, catalogue[model].total_gpus


def _window_end(start, end, now) -> None:
    if end <= start:
        refuse("end", _("End must be after the start."))
    if end <= now:
        refuse("end", _("End must be in the future."))
    if end - start > MAX_WINDOW:
        refuse("end", _("A window may last at most %(d)d days.") % {"d": MAX_WINDOW.days})


def _justification(data) -> str:
    justification = str(data.get("justification", "")).strip()
    if len(justification) < MIN_JUSTIFICATION:
        refuse("justification", _("Say why, in at least %(n)d characters: approvers decide from it.") % {
            "n": MIN_JUSTIFICATION})
    if len(justification) > MAX_JUSTIFICATION:
        refuse("justification", _("At most %(n)d characters (got %(got)d).") % {
            "n": MAX_JUSTIFICATION, "got": len(justification)})
    return justification


def _wanted_task_type(data, job: Job | None) -> TaskType:
    wanted = TaskType.objects.filter(code=str(data.get("task_type", "")).strip()).first()
    if wanted is None:
        refuse("task_type", _("Give the wanted task type (one of %(c)s).") % {
            "c": ", ".join(TaskType.objects.values_list("code", flat=True))})
    if job and wanted.priority <= job.priority:
        refuse("task_type", _("%(t)s (priority %(p)d) is not above the job's priority %(q)d.") % {
            "t": wanted.code, "p": wanted.priority, "q": job.priority})
    return wanted


def _quota_limit(guaranteed: int, limit: int) -> None:
    if limit < guaranteed:
        refuse("limit", _("The limit (%(l)d) must be at least the guaranteed GPUs (%(g)d).") % {
            "l": limit, "g": guaranteed})


class RequestFields(TypedDict, total=False):
    """A new request's fields, checked: those of its kind only (``PriorityRequest``'s columns)."""

    kind: str
    justification: str
    job: Job | None
    tenant: Tenant | None
    task_type: TaskType | None
    max_runtime_minutes: int | None
    gpu_model: str
    gpus: int | None
    start: datetime | None
    end: datetime | None
    guaranteed: int | None
    limit: int | None


def validate_request(user, data) -> RequestFields:
    """The fields of a new request from ``data`` (the form's text or the API's validated body), checked; one
    ValidationError naming each bad field otherwise (an unknown kind alone, since the kind says what else
    to check)."""
    refusals = Refusals()
    attempt = refusals.attempt
    kind = str(data.get("kind", "")).strip()
    if kind not in K.values or kind == K.ADMISSION:
        refuse("kind", _("kind must be one of priority, burst, reservation, runtime_extension, quota."))
    fields = RequestFields(kind=kind, justification=str(data.get("justification", "")).strip())
    attempt(_justification, data)
    if kind in (K.PRIORITY, K.RUNTIME_EXTENSION):
        job = attempt(_job, user, data)
        fields.update(job=job, tenant=job.tenant if job else None)
        if kind == K.PRIORITY:
            fields["task_type"] = attempt(_wanted_task_type, data, job)
        else:
            minimum = ((job.max_runtime_minutes or 0) + 1) if job else 1
            fields["max_runtime_minutes"] = attempt(
                keyed, "max_runtime_minutes", parse_whole_number, data.get("max_runtime_minutes"), minimum,
                MAX_EXTENDED_RUNTIME_MINUTES, _("Max runtime (minutes)"))
    elif kind in (K.BURST, K.RESERVATION):
        fields["tenant"] = attempt(_tenant, user, data, {Role.RESEARCHER, Role.APPROVER, Role.TENANT_ADMIN})
        model, total = attempt(_gpu_model, data) or ("", 0)
        fields["gpu_model"] = model
        fields["gpus"] = attempt(keyed, "gpus", parse_whole_number, data.get("gpus"), 1, max(total, 1),
                                 _("GPUs")) if model else None
        start = attempt(keyed, "start", parse_moment, data.get("start"), _("Start"))
        end = attempt(keyed, "end", parse_moment, data.get("end"), _("End"))
        if start and end:
            attempt(_window_end, start, end, timezone.now())
        fields.update(start=start, end=end)
    else:  # quota: tenant admins ask the platform
        fields["tenant"] = attempt(_tenant, user, data, {Role.TENANT_ADMIN})
        fields["gpu_model"] = (attempt(_gpu_model, data) or ("", 0))[0]
        guaranteed = attempt(keyed, "guaranteed", parse_whole_number, data.get("guaranteed"), 0, MAX_QUOTA_GPUS,
                             _("Guaranteed GPUs"))
        limit = attempt(keyed, "limit", parse_whole_number, data.get("limit"), 0, MAX_QUOTA_GPUS, _("Limit GPUs"))
        if guaranteed is not None and limit is not None:
            attempt(_quota_limit, guaranteed, limit)
        fields.update(guaranteed=guaranteed, limit=limit)
    refusals.raise_any()
    return fields


def impact_of(request: PriorityRequest, now=None) -> dict:
    """The engine's what-if for the request, if approved now (``change_of``)."""
    now = now or timezone.now()
    change = change_of(request, now)
    if change is None:
        return {}
    subject = request.job_id if request.kind in (K.PRIORITY, K.RUNTIME_EXTENSION) else None
    return what_if.what_if(change, request.tenant.name, now, subject_job=subject)


def change_of(request: PriorityRequest, now) -> what_if.Change | None:
    """The request's change of the next pass's snapshot, made as ``_carry_out`` would make it in the database
    (None for a kind that changes no snapshot)."""
    tenant = request.tenant.name
    if request.kind == K.PRIORITY and request.job_id:
        change = what_if.with_priority(request.job_id, **preview.task_type_fields(request.job, request.task_type, now))
    elif request.kind == K.RUNTIME_EXTENSION and request.job_id:
        change = what_if.with_runtime(request.job_id, request.max_runtime_minutes * 60.0)
    elif request.kind == K.BURST:
        # a burst raises the limit of a quota row while in force; without a row, or before its start, the next
        # pass sees no change (``tenants.quotas.effective_quotas``)
        row = next((q for q in quotas.effective_quotas(Quota.objects.filter(
            tenant=request.tenant, gpu_model=request.gpu_model), now)), None)
        if row is None or not (request.start <= now < request.end):
            change = what_if.unchanged
        else:
            change = what_if.with_limit(tenant, request.gpu_model, row.guaranteed, row.effective_limit + request.gpus,
                                        row.department)
    elif request.kind == K.RESERVATION:
        change = what_if.with_reservation(tenant, request.gpu_model, request.gpus, request.start.timestamp(),
                                          request.end.timestamp())
    elif request.kind == K.QUOTA:
        burst = quotas.active_bursts(now, {tenant}).get((tenant, request.gpu_model), 0)
        department = request.tenant.department.name if request.tenant.department_id else ""
        change = what_if.with_limit(tenant, request.gpu_model, request.guaranteed, request.limit + burst, department)
    else:
        return None
    return change


def _scope(kind: str, impact: dict) -> str:
    if kind in PLATFORM_KINDS or impact.get("other_tenants_preempted"):
        return ApproverScope.PLATFORM
    return ApproverScope.TENANT


def own_jobs_preempted(request: PriorityRequest) -> list[Job]:
    """The requester's own running jobs that approving ``request`` now would preempt (from its preview)."""
    ids = [entry["job"] for entry in request.impact.get("preempts", ()) if isinstance(entry.get("job"), int)]
    return list(Job.objects.filter(pk__in=ids, owner_id=request.requester_id).order_by("pk")) if ids else []


def submit_request(user, data, confirm=None) -> PriorityRequest | None:
    """Check and store a request with its preview. ``confirm`` (the page's) sees the previewed request before
    it is stored and may stop it (returning False): the page first names the requester's own jobs it would
    stop."""
    fields = validate_request(user, data)
    request = PriorityRequest(requester=user, expires_at=timezone.now() + timedelta(
        hours=settings.GOVERNANCE["REQUEST_TTL_HOURS"]), **fields)
    request.impact = impact_of(request)
    if confirm is not None and not confirm(request):
        return None
    request.scope = _scope(request.kind, request.impact)
    request.save()
    _announce_submitted(request)
    return request


#: Why a job that waited for approval was cancelled: its requester is told of the request's decision (or expiry),
#: so the jobs are not each announced again (an array of 10,000 tasks would be 10,000 notices).
NOT_APPROVED = gettext_noop("Not approved by %(u)s.")
NOT_APPROVED_SAYING = gettext_noop("Not approved by %(u)s. %(c)s")
UNAPPROVED_IN_TIME = gettext_noop("Nobody approved it within %(h)g hours; the request expired.")
ADMISSION_ENDINGS = frozenset({NOT_APPROVED, NOT_APPROVED_SAYING, UNAPPROVED_IN_TIME})


def request_admission(jobs: list[Job]) -> PriorityRequest:
    """Jobs whose task type needs approval wait in ``pending`` with this request for the tenant's approvers: one
    job, or the jobs of one group (an array's tasks, a service's replicas) submitted together, which one decision
    covers (``jobs_of``). An array of 10,000 tasks is one request for the approvers, not 10,000."""
    job = min(jobs, key=lambda j: j.pk)
    text = GROUP_ADMISSION_JUSTIFICATION if len(jobs) > 1 else ADMISSION_JUSTIFICATION
    request = PriorityRequest.objects.create(
        kind=K.ADMISSION, scope=ApproverScope.TENANT, tenant=job.tenant, requester=job.owner, job=job,
        jobs=len(jobs), task_type=job.task_type, justification=text % {"t": job.task_type.name, "n": len(jobs)},
        expires_at=timezone.now() + timedelta(hours=settings.GOVERNANCE["REQUEST_TTL_HOURS"]))
    _announce_submitted(request)
    return request


def jobs_of(request: PriorityRequest) -> list[Job]:
    """The jobs an admission request decides: its job, and with it the rest of the group's jobs submitted together
    (the next ``jobs`` members of its group from it on, by id: replicas added later have requests of their own)."""
    if request.jobs > 1 and request.job.group_id:
        return list(Job.objects.filter(group_id=request.job.group_id, tenant_id=request.tenant_id,
                                       pk__gte=request.job_id).order_by("pk")[:request.jobs])
    return [request.job]


def _announce_submitted(request: PriorityRequest) -> None:
    approvers = tenant_approvers(request.tenant_id) if request.scope == ApproverScope.TENANT else platform_approvers()
    notify([u for u in approvers if u.pk != request.requester_id], NotificationKind.REQUEST_SUBMITTED,
           lambda: _("%(user)s asks: %(kind)s (%(tenant)s)") % {"user": request.requester.get_username(),
                                                     "kind": request.get_kind_display(), "tenant": request.tenant.name},
           lambda: request.justification_text, request.get_absolute_url())


# --- deciding ----------------------------------------------------------------------------------------------


def decision_refusal(user, request: PriorityRequest) -> str:
    """Why ``user`` may not decide ``request`` ("" when they may)."""
    if request.state != RequestState.PENDING:
        return _("This request is already %(s)s.") % {"s": request.get_state_display().lower()}
    if user.pk == request.requester_id:
        return _("Nobody decides their own request, whatever roles they hold.")
    if request.job_id and request.job.owner_id == user.pk:  # asked by someone else, it still favours them
        return _("Nobody decides a request about their own job, whatever roles they hold.")
    if access.can_decide(user, request.tenant_id, platform_wide=request.scope == ApproverScope.PLATFORM):
        return ""
    if request.scope == ApproverScope.PLATFORM:
        return _("This request affects other tenants: a platform approver decides it.")
    return _("Only an approver of tenant %(t)s decides this request.") % {"t": request.tenant.name}


def decide(user, request: PriorityRequest, approve: bool, comment: str = "") -> PriorityRequest:
    """Approve (and carry out) or deny a pending request, with a comment the requester will read."""
    now = timezone.now()
    if request.is_pending and request.expires_at <= now:
        expire(request, now)
    comment = (comment or "").strip()
    if len(comment) > MAX_COMMENT:
        raise ValidationError({"comment": _("At most %(n)d characters (got %(got)d).") % {
            "n": MAX_COMMENT, "got": len(comment)}})
    with transaction.atomic():
        request = PriorityRequest.objects.select_for_update(of=("self",)).select_related(
            "tenant", "requester", "job", "task_type").get(pk=request.pk)
        refusal = decision_refusal(user, request)
        if refusal:
            raise PermissionDenied(refusal)
        if approve and request.kind == K.PRIORITY:  # the queue may have moved since it was asked
            request.impact = impact_of(request)
            if _scope(request.kind, request.impact) == ApproverScope.PLATFORM:
                request.scope = ApproverScope.PLATFORM
                request.save(update_fields=["impact", "scope", "last_updated"])
                if not access.can_decide(user, request.tenant_id, platform_wide=True):
                    others = ", ".join(request.impact["other_tenants_preempted"])
                    raise PermissionDenied(_("Approving it now would preempt jobs of %(t)s: a platform approver "
                                             "decides it.") % {"t": others})
        effect = _carry_out(user, request, comment) if approve else _refuse(user, request, comment)
        request.state = RequestState.APPROVED if approve else RequestState.DENIED
        request.decided_by, request.decided_at, request.comment = user, now, comment
        request.save(update_fields=["state", "decided_by", "decided_at", "comment", "impact", "scope",
                                    "last_updated"])
        audit.record(AuditAction.REQUEST_APPROVE if approve else AuditAction.REQUEST_DENY, request, actor=user,
                     reason=comment or request.justification, before={"state": RequestState.PENDING},
                     after={"state": request.state, "kind": request.kind, **effect})
    notify([request.requester], NotificationKind.REQUEST_DECIDED,
           lambda: _("Your request #%(id)d was %(state)s by %(user)s") % {
               "id": request.pk, "state": request.get_state_display().lower(), "user": user.get_username()},
           comment, request.get_absolute_url(), event=f"request:{request.pk}:{request.state}")
    request_scheduling_pass()
    return request


def _carry_out(user, request: PriorityRequest, comment: str) -> dict:
    """Make the approved change; returns what changed, for the audit record."""
    who = user.get_username()
    if request.kind == K.ADMISSION:
        moved = job_actions.approve_admission(jobs_of(request), Phrase(
            gettext_noop("Approved by %(u)s. %(c)s") if comment else gettext_noop("Approved by %(u)s."),
            {"u": who, "c": comment}), user)
        return {"job": request.job_id, "queued": moved}
    if request.kind == K.PRIORITY:
        job = Job.objects.select_related("task_type").get(pk=request.job_id)
        before = job_actions.change_task_type(
            job, request.task_type, Phrase(gettext_noop(
                "Priority raised to %(t)s (%(p)d) by %(u)s's approval of request #%(r)d."), {
                "t": request.task_type.name_phrase, "p": request.task_type.priority, "u": who, "r": request.pk}),
            actor=user, data={"request": request.pk})
        return {"job": job.pk, "before": before, "task_type": request.task_type.code,
                "priority": request.task_type.priority}
    if request.kind == K.RUNTIME_EXTENSION:
        job = Job.objects.get(pk=request.job_id)
        before = job_actions.extend_runtime(
            job, request.max_runtime_minutes,
            Phrase(gettext_noop("Max runtime extended from %(a)d to %(b)d minutes by %(u)s (request #%(r)d)."), {
                "a": job.max_runtime_minutes, "b": request.max_runtime_minutes, "u": who, "r": request.pk}),
            actor=user, data={"request": request.pk})
        return {"job": job.pk, "max_runtime_minutes_before": before,
                "max_runtime_minutes": request.max_runtime_minutes}
    if request.kind == K.BURST:
        burst = quotas.grant_burst(request.tenant, request.gpu_model, request.gpus, request.start, request.end,
                                   granted_by=user)
        return {"burst": burst.pk, "gpu_model": request.gpu_model, "extra_gpus": request.gpus,
                "start": request.start.isoformat(), "end": request.end.isoformat()}
    if request.kind == K.RESERVATION:
        reservation = job_actions.create_reservation(request.tenant, request.gpu_model, request.gpus,
                                                     request.start, request.end, created_by=user)
        return {"reservation": reservation.pk}
    quota = quotas.set_quota(request.tenant, request.gpu_model, request.guaranteed, request.limit)
    return {"quota": quota.pk, "guaranteed": request.guaranteed, "limit": request.limit}


def _refuse(user, request: PriorityRequest, comment: str) -> dict:
    if request.kind == K.ADMISSION:
        cancelled = job_actions.refuse_admission(jobs_of(request), Phrase(
            NOT_APPROVED_SAYING if comment else NOT_APPROVED, {"u": user.get_username(), "c": comment}), user)
        if cancelled:
            return {"job": request.job_id, "cancelled": cancelled, "status": JobStatus.CANCELLED}
    return {}


def expire(request: PriorityRequest, now=None) -> bool:
    """Mark an undecided request expired (a job awaiting approval is cancelled with it)."""
    now = now or timezone.now()
    with transaction.atomic():
        if not PriorityRequest.objects.filter(pk=request.pk, state=RequestState.PENDING).update(
                state=RequestState.EXPIRED, decided_at=now, last_updated=now):
            return False
        request.state = RequestState.EXPIRED
        if request.kind == K.ADMISSION and request.job:
            job_actions.refuse_admission(jobs_of(request), Phrase(UNAPPROVED_IN_TIME, {
                "h": settings.GOVERNANCE["REQUEST_TTL_HOURS"]}))
        audit.record(AuditAction.REQUEST_EXPIRE, request, actor=None, before={"state": RequestState.PENDING},
                     after={"state": RequestState.EXPIRED}, reason=Phrase(gettext_noop("Undecided until %(t)s."), {
                         "t": request.expires_at.isoformat(timespec="minutes")}))
    notify([request.requester], NotificationKind.REQUEST_DECIDED,
           lambda: _("Your request #%(id)d expired undecided") % {"id": request.pk}, "", request.get_absolute_url(),
           event=f"request:{request.pk}:{RequestState.EXPIRED}")
    return True


def expire_due(now=None) -> int:
    now = now or timezone.now()
    due = PriorityRequest.objects.filter(state=RequestState.PENDING, expires_at__lte=now).select_related(
        "job", "requester", "tenant")
    return sum(1 for request in due if expire(request, now))


def pending_for(user):
    """Pending requests ``user`` may decide."""
    return [r for r in requests_for(user).filter(state=RequestState.PENDING) if not decision_refusal(user, r)]
