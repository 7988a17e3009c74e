"""Idle-GPU reclamation: a running job whose GPUs all stay below a utilisation threshold for a while is
warned, and stopped after a grace period unless it gets busy again, with the readings as evidence.

A job counts as idle only with evidence: every one of its GPUs has readings covering the whole window
(the first at most two poll intervals, or a tenth of the window, after it opens) and none of them reached the threshold.
A job without readings (no agent, simulated cluster) is never reclaimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, Max, Min
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet.models import GpuReading
from governance.models import IdlePolicy, IdleWatch, NotificationKind
from governance.notifications.services import notify
from gpuportal.text.phrases import Phrase
from scheduling.jobs import actions as job_actions
from scheduling.models import Job, JobAllocation, JobEvent, JobStatus, WorkloadKind
from scheduling.triggers import request_scheduling_pass
from scheduling.workloads.queries import live_state


@dataclass(frozen=True)
class Rule:
    exempt: bool
    threshold_pct: int
    idle_minutes: int
    grace_minutes: int
    source: str


def rule_for(job: Job, policies: list[IdlePolicy]) -> Rule:
    """The most specific policy for the job (tenant > task type > cluster), else the settings."""
    best, best_score = None, -1
    for policy in policies:
        if ((policy.tenant_id and policy.tenant_id != job.tenant_id)
                or (policy.task_type_id and policy.task_type_id != job.task_type_id)
                or (policy.cluster_id and policy.cluster_id != job.cluster_id)):
            continue
        score = 4 * bool(policy.tenant_id) + 2 * bool(policy.task_type_id) + bool(policy.cluster_id)
        if score > best_score:
            best, best_score = policy, score
    if best is not None:
        return Rule(best.exempt, best.threshold_pct, best.idle_minutes, best.grace_minutes, str(best))
    defaults = settings.GOVERNANCE
    return Rule(job.task_type.code in defaults["IDLE_EXEMPT_TASK_TYPES"], defaults["IDLE_THRESHOLD_PCT"],
                defaults["IDLE_MINUTES"], defaults["IDLE_GRACE_MINUTES"], "settings")


def idle_evidence(job: Job, rule: Rule, now) -> dict | None:
    """Per-GPU readings over the window when the job is idle, else None."""
    window_start = now - timedelta(minutes=rule.idle_minutes)
    if (job.started_at or now) > window_start:
        return None
    gpu_ids = list(JobAllocation.objects.filter(job=job, released_at__isnull=True).values_list("gpu_id", flat=True))
    if not gpu_ids:
        return None
    rows = {r["gpu_id"]: r for r in GpuReading.objects.filter(gpu_id__in=gpu_ids, at__gte=window_start, at__lte=now)
            .values("gpu_id").annotate(peak=Max("utilization_pct"), mean=Avg("utilization_pct"), n=Count("id"),
                                       first=Min("at"))}
    # the first reading must come soon after the window opens: two polls, or a tenth of the window
    slack = timedelta(seconds=max(2 * settings.SCHEDULER["POLL_INTERVAL_SECONDS"], rule.idle_minutes * 6))
    for gpu_id in gpu_ids:
        row = rows.get(gpu_id)
        if row is None or row["first"] > window_start + slack or row["peak"] is None:
            return None  # not enough evidence
        if row["peak"] >= rule.threshold_pct:
            return None
    notebook = {}
    if job.kind == WorkloadKind.NOTEBOOK:  # a notebook is idle only when its kernels are too
        activity = live_state(job).last_activity
        if activity is not None and activity > window_start:
            return None
        notebook = {"last_kernel_activity": activity.isoformat() if activity else None}
    return {**notebook, "window_minutes": rule.idle_minutes, "threshold_pct": rule.threshold_pct,
            "policy": rule.source,
            "gpus": [{"gpu": gpu_id, "max_pct": rows[gpu_id]["peak"], "mean_pct": round(rows[gpu_id]["mean"], 1),
                      "readings": rows[gpu_id]["n"]} for gpu_id in gpu_ids]}


def check_idle_jobs(now=None) -> dict:
    """Warn newly idle jobs, reclaim those idle past their grace, withdraw warnings of busy ones."""
    now = now or timezone.now()
    policies = list(IdlePolicy.objects.all())
    summary = {"warned": 0, "reclaimed": 0, "withdrawn": 0}
    jobs = Job.objects.filter(status=JobStatus.RUNNING).select_related("task_type", "owner", "cluster", "tenant")
    watches = {w.job_id: w for w in IdleWatch.objects.filter(job__status=JobStatus.RUNNING, reclaimed_at__isnull=True)}
    for job in jobs:
        rule = rule_for(job, policies)
        watch = watches.get(job.pk)
        # a service waits for requests by design: it runs until stopped, idle or not
        exempt = rule.exempt or job.kind == WorkloadKind.SERVICE
        evidence = None if exempt else idle_evidence(job, rule, now)
        if evidence is None:
            if watch is not None:
                watch.delete()
                job_actions.note(job, JobEvent.Kind.RECLAMATION,
                                 Phrase(gettext_noop("Busy again: the idle warning is withdrawn.")), at=now)
                summary["withdrawn"] += 1
            continue
        if watch is None:
            _warn(job, rule, evidence, now)
            summary["warned"] += 1
        elif watch.warned_at + timedelta(minutes=rule.grace_minutes) <= now:
            _reclaim(job, watch, evidence, now)
            summary["reclaimed"] += 1
    return summary


def _warn(job: Job, rule: Rule, evidence: dict, now) -> None:
    deadline = now + timedelta(minutes=rule.grace_minutes)
    text = Phrase(gettext_noop("Idle: its %(n)d GPU(s) stayed below %(t)d %% utilisation for %(m)d minutes (highest "
                               "%(p)s %%)%(kernels)s. It will be stopped at %(at)s unless it gets busy."), {
        "kernels": Phrase(gettext_noop(" and its notebook's kernels did nothing"))
        if "last_kernel_activity" in evidence else "",
        "n": len(evidence["gpus"]), "t": rule.threshold_pct, "m": rule.idle_minutes,
        "p": max(g["max_pct"] for g in evidence["gpus"]),
        "at": timezone.localtime(deadline).strftime("%Y-%m-%d %H:%M %Z")})
    with transaction.atomic():
        IdleWatch.objects.create(job=job, warned_at=now, evidence=evidence)
        job_actions.note(job, JobEvent.Kind.RECLAMATION, text, data=evidence, at=now)
    notify([job.owner], NotificationKind.RECLAMATION_WARNING, lambda: _("Job #%(id)d %(name)s is idle") % {
        "id": job.pk, "name": job.name}, text, job.get_absolute_url())


def _reclaim(job: Job, watch: IdleWatch, evidence: dict, now) -> None:
    text = Phrase(gettext_noop(
        "Reclaimed: its GPUs stayed idle (below %(t)d %%) through the warning and the grace period."), {
        "t": evidence["threshold_pct"]})
    with transaction.atomic():
        job_actions.reclaim_job(job, text, now, {"reclaimed": True, "evidence": evidence})
        watch.reclaimed_at, watch.evidence = now, evidence
        watch.save(update_fields=["reclaimed_at", "evidence"])
        audit.record(AuditAction.JOB_RECLAIM, job, actor=None, reason=text, before={"status": JobStatus.RUNNING},
                     after={"status": JobStatus.CANCELLED, "evidence": evidence})
    notify([job.owner], NotificationKind.RECLAMATION_ACTION, lambda: _("Job #%(id)d %(name)s was reclaimed") % {
        "id": job.pk, "name": job.name}, text, job.get_absolute_url())
    request_scheduling_pass()
