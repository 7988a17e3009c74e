"""Operating services and arrays: scale, roll out, stop, cancel; and keeping a service at its desired replicas.

A service's replicas and an array's tasks are jobs of their own (``submission.create_member``), so adding a
replica goes through the scheduler like any job (quota, fair share, reservations) and removing one frees
its GPUs like any cancel. A rolling update adds one replica of the new revision at a time and stops an old
one only once a new one answers its readiness check, so the old version serves until the new one is ready;
a revision whose replicas keep failing stalls the rollout, and the old replicas keep serving.
``advance_services`` is the level-triggered part: run after every status sync, it brings each service back to
its desired replicas of its current revision, whatever message was lost on the way.
"""

from __future__ import annotations

from dataclasses import replace

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from gpuportal.text.phrases import Phrase
from gpuportal.web.validation import keyed, parse_whole_number
from scheduling.executors import executor_for
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.jobs.limits import MAX_REPLICAS
from scheduling.models import TERMINAL_STATUSES, Job, JobEvent, JobGroup, JobStatus
from scheduling.triggers import request_scheduling_pass
from tenants import access
from tenants.quotas import quota_gpus

#: Replicas of one revision that may fail before its rollout (or its replacements) stop being tried.
FAILURES_BEFORE_STALL = 3


def _may_operate(user, group: JobGroup) -> None:
    if not access.can_manage_job(user, group.tenant_id, group.owner_id):
        raise PermissionDenied(_("You may not change %(name)s.") % {"name": group.name})
    if group.stopped_at is not None:
        raise ValidationError({"status": _("%(name)s was stopped at %(at)s.") % {
            "name": group.name, "at": timezone.localtime(group.stopped_at).strftime("%Y-%m-%d %H:%M")}})


def _live(group: JobGroup):
    return group.members.exclude(status__in=TERMINAL_STATUSES)


def _clean_request(user, group: JobGroup) -> submission.JobRequest:
    """The group's request validated again (as its owner's would be now): a replica added later obeys today's
    rules, and what no longer validates is said field by field."""
    return submission.validate_job_request(user, {**group.request, "replicas": 1})


def _add_replicas(user, group: JobGroup, count: int, why: str) -> list[Job]:
    clean = _clean_request(user, group)
    clean = replace(clean, image=group.image or clean.image)
    taken = set(group.members.values_list("group_index", flat=True))
    now, added, index = timezone.now(), [], 0
    while len(added) < count:
        if index not in taken:
            job = submission.create_member(user, clean, group.name, now, group, index, revision=group.revision)
            job_actions.note(job, JobEvent.Kind.EXECUTOR, why)
            added.append(job)
        index += 1
    return added


def scale_service(user, group: JobGroup, data: dict) -> JobGroup:
    """Set the desired replicas: added ones queue (the scheduler places them), removed ones stop and free their
    GPUs (not-yet-running ones first, then the highest replica numbers)."""
    _may_operate(user, group)
    replicas = keyed("replicas", parse_whole_number, data.get("replicas"), 1, MAX_REPLICAS,
                     str(submission.FIELDS["replicas"].label))
    sample = group.members.order_by("-id").first()
    if sample is not None:  # the replicas wanted, together, within the tenant's quota: submission's rule
        problem = submission.quota_problem(group.tenant, sample.gpu_model, replicas * quota_gpus(
            sample.gpus_per_node, sample.node_count), sample.node_count)
        if problem:
            raise ValidationError({"replicas": problem[1]})
    before = group.size
    why = Phrase(gettext_noop("%(user)s scaled %(name)s from %(a)d to %(b)d replicas."), {
        "user": user.get_username(), "name": group.name, "a": before, "b": replicas})
    with transaction.atomic():
        group.size = replicas
        group.save(update_fields=["size", "last_updated"])
        current = list(_live(group).filter(revision=group.revision).order_by("group_index"))
        if replicas > len(current):
            _add_replicas(user, group, replicas - len(current), why)
    if replicas < len(current):
        running_last = sorted(current, key=lambda j: (j.status == JobStatus.RUNNING, -(j.group_index or 0)))
        for job in running_last[: len(current) - replicas]:
            job_actions.cancel_job(user, job, str(why))
    request_scheduling_pass()
    group.refresh_from_db()
    return group


def rollout_service(user, group: JobGroup, data: dict) -> JobGroup:
    """Roll out a new image: a new revision whose replicas replace the old ones one by one (see the module)."""
    _may_operate(user, group)
    image = data.get("image").strip() if isinstance(data.get("image"), str) else ""
    limit = submission.FIELDS["image"].max_length
    if not image or len(image) > limit or any(c.isspace() for c in image):
        raise ValidationError({"image": _("Image must be one reference without spaces, at most %(max)d "
                                          "characters.") % {"max": limit}})
    if image == group.image:
        raise ValidationError({"image": _("%(image)s is already the image of revision %(r)d.") % {
            "image": image, "r": group.revision}})
    with transaction.atomic():
        group.revision += 1
        group.image = image
        group.request = {**group.request, "image": image}
        group.save(update_fields=["revision", "image", "request", "last_updated"])
    advance_service(group, actor=user)
    group.refresh_from_db()
    return group


def stop_service(user, group: JobGroup) -> JobGroup:
    """Stop every replica (their GPUs are freed) and remove what they shared on the cluster."""
    _may_operate(user, group)
    why = _("%(user)s stopped the service.") % {"user": user.get_username()}
    group.stopped_at = timezone.now()
    group.save(update_fields=["stopped_at", "last_updated"])
    clusters = set()
    for job in _live(group):
        if job.cluster_id:
            clusters.add(job.cluster)
        try:
            job_actions.cancel_job(user, job, why)
        except ValidationError:  # it ended meanwhile (the status sync stops what a stopped service still runs)
            continue
    for cluster in clusters:
        executor_for(cluster).release_group(group)
    return group


def cancel_array(user, group: JobGroup) -> int:
    """Cancel every task of an array that has not ended; returns how many."""
    if not access.can_manage_job(user, group.tenant_id, group.owner_id):
        raise PermissionDenied(_("You may not change %(name)s.") % {"name": group.name})
    why = _("The whole array was cancelled.")
    count = 0
    for job in _live(group).order_by("group_index"):
        try:
            job_actions.cancel_job(user, job, why)
            count += 1
        except ValidationError:  # it ended meanwhile
            continue
    return count


def _ready(job: Job) -> bool:
    try:
        return bool(executor_for(job.cluster).probe(job).ready) if job.cluster_id else False
    except Exception:  # an unreachable cluster: not known to be ready, so nothing old is stopped
        return False


def advance_service(group: JobGroup, actor=None) -> dict:
    """One step towards ``size`` ready replicas of the current revision (see the module): start a new replica
    (one at a time while old ones serve), stop old ones that ready new ones replace."""
    if group.stopped_at is not None:
        return {}
    live = list(_live(group).select_related("cluster", "tenant", "owner"))
    new = [j for j in live if j.revision == group.revision]
    old = [j for j in live if j.revision != group.revision]
    new_ready = [j for j in new if j.status == JobStatus.RUNNING and _ready(j)]
    failed = group.members.filter(revision=group.revision, status=JobStatus.FAILED).count()
    done = {"started": 0, "retired": 0, "stalled": failed >= FAILURES_BEFORE_STALL}
    retire = max(0, len(old) + len(new_ready) - group.size)
    if retire:
        why = _("Replaced by a ready replica of revision %(r)d (rolling update).") % {"r": group.revision}
        for job in sorted(old, key=lambda j: (j.status == JobStatus.RUNNING, j.group_index))[:retire]:
            try:
                job_actions.cancel_job(group.owner, job, why)
                done["retired"] += 1
            except (ValidationError, PermissionDenied):  # ended meanwhile, or the owner left the tenant
                continue
    missing = group.size - len(new)
    if missing > 0 and not done["stalled"]:
        in_flight = len(new) - len(new_ready)
        count = missing if not old else (1 if in_flight == 0 else 0)  # one at a time while old ones serve
        if count:
            why = Phrase(gettext_noop("Replica of %(name)s, revision %(r)d (%(image)s)."), {
                "name": group.name, "r": group.revision, "image": group.image})
            try:
                _add_replicas(actor or group.owner, group, count, why)
                done["started"] = count
                request_scheduling_pass()
            except ValidationError:
                done["stalled"] = True
    return done


def finish_stops() -> int:
    """Stop the replicas of services that were stopped but still run: ``stop_service`` marks the service
    stopped, then cancels its replicas one by one, and a worker or a database connection that dies in between
    leaves the rest running for ever. Level-triggered, as everything the status sync does: the wanted state
    (stopped) is read from the service, and each repair is an event with its reason. Returns how many."""
    stopped = 0
    for job in Job.objects.filter(group__kind=JobGroup.Kind.SERVICE, group__stopped_at__isnull=False).exclude(
            status__in=TERMINAL_STATUSES).select_related("cluster", "group"):
        reason = Phrase(gettext_noop("Stopped with its service %(name)s (the service's stop had not reached this "
                                     "replica)."), {"name": job.group.name})
        try:
            job_actions.stop_with_service(job, reason)
        except ValidationError:  # it ended meanwhile
            continue
        stopped += 1
    return stopped


def advance_services() -> int:
    """Stop what belongs to stopped services, then advance every service that is not at its desired ready
    replicas of its current revision."""
    changed = finish_stops()
    for group in JobGroup.objects.filter(kind=JobGroup.Kind.SERVICE, stopped_at__isnull=True):
        live = _live(group)
        if live.filter(revision=group.revision).count() == group.size and not live.exclude(
                revision=group.revision).exists():
            continue
        step = advance_service(group)
        if step.get("started") or step.get("retired"):
            changed += 1
    if changed:
        request_scheduling_pass()
    return changed

