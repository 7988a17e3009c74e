"""Following the portal's jobs on a Slurm cluster, and repairing where the portal and Slurm disagree.

``sync_cluster`` reads every job slurmctld knows with one ``GET /jobs`` and moves each dispatching or running
portal job to what its Slurm job says: running (on which nodes), succeeded, failed through the one retry rule
(``lifecycle.fail_or_retry``, with the exit code decoded from the raw wait status and the failure diagnosed
from the log tail where the portal can read it), cancelled in Slurm, or back in the queue when Slurm preempted
it. A job Slurm put back in its own queue after it had started (a requeue, which the portal's submissions
forbid but an administrator may force) ends its attempt as an infrastructure failure (the one retry rule):
cancelled there, and placed again by the portal while retries remain. Every write is a compare-and-set on
the job's status and Slurm job id under the row's lock, so a job the reconciler withdrew or requeued meanwhile
is left alone and the evidence others wrote meanwhile is kept. A Slurm job no longer in slurmctld's memory
(``MinJobAge``) is read from slurmdb; where the cluster keeps no accounting its outcome is unknown, and the job
ends saying exactly that, never guessed a success.

``reconcile_cluster`` is the reconciler's part: jobs Slurm keeps pending past ``SLURM["PENDING_SECONDS"]`` are
withdrawn (first in the portal, then in Slurm) and placed again, Slurm jobs the portal submitted for attempts
that are over (``ownership``: by the ids it stored, never by a comment alone) are cancelled, and
allocations that disagree with the GPUs Slurm gave a job are moved to those GPUs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_noop

from fleet.models import GPU, Cluster, ExecutorKind
from gpuportal.text.phrases import Phrase
from scheduling import lifecycle
from scheduling.executors.kubernetes.diagnosis import Diagnosis, PodState, diagnose
from scheduling.executors.slurm import states
from scheduling.executors.slurm.client import SlurmError
from scheduling.executors.slurm.executor import SlurmExecutor, read_tail
from scheduling.executors.slurm.ownership import portal_jobs_of
from scheduling.executors.slurm.script import portal_job_of
from scheduling.executors.slurm.shapes import AccountedJob, SlurmJob
from scheduling.models import ACTIVE_STATUSES, FailureCategory, Job, JobAllocation, JobEvent, JobStatus

logger = logging.getLogger(__name__)
FOLLOWED = (JobStatus.DISPATCHING, JobStatus.RUNNING)
#: Lines of the output read to diagnose a failure.
DIAGNOSIS_LINES = 50
#: Keys of the executor state a job keeps when it goes back to the queue (its failures, nodes to avoid, checkpoint).
KEPT_STATE = ("attempts", "avoid_nodes", "avoid_since", "resume_from")


@dataclass(frozen=True)
class Seen:
    """A Slurm job's end as the follower knows it, from slurmctld (``SlurmJob``) or slurmdb (``AccountedJob``)."""

    state: str
    reason: str
    exit_status: int | None
    signal: int | None
    nodes: tuple[str, ...]
    source: str  # "slurmctld", "slurmdb"

    @classmethod
    def of_job(cls, job: SlurmJob) -> Seen:
        return cls(job.state, job.reason, job.exit_status, job.signal, job.nodes, "slurmctld")

    @classmethod
    def of_record(cls, record: AccountedJob) -> Seen:
        # slurmdb of 22.05 may record return code 0 for a job that FAILED: then the code is unknown, not 0
        code = record.return_code if not (record.state == "FAILED" and not record.return_code) else None
        return cls(record.state, record.reason, code, record.signal, record.nodes, "slurmdb")


@dataclass
class SyncReport:
    cluster: str
    seen: int = 0
    changed: int = 0
    errors: list[str] = field(default_factory=list)


def followed_jobs(cluster: Cluster):
    return list(Job.objects.filter(cluster=cluster, status__in=FOLLOWED).select_related("task_type", "cluster"))


def slurm_id(job: Job) -> int | None:
    return slurm_id_in(job.executor_state)


def slurm_id_in(state: dict | None) -> int | None:
    value = (state or {}).get("slurm_job_id")
    return int(value) if value else None


class Follower:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.executor = SlurmExecutor(cluster)
        self.client = self.executor.client()
        self._accounting: bool | None = None

    def sync(self) -> SyncReport:
        report = SyncReport(self.cluster.name)
        jobs = followed_jobs(self.cluster)
        if not jobs:
            return report
        by_id = {job.job_id: job for job in self.client.jobs()}
        report.seen = len(by_id)
        for job in jobs:
            try:
                report.changed += self.apply(job, by_id.get(slurm_id(job) or -1))
            except SlurmError as exc:
                report.errors.append(f"job {job.pk}: {exc}")
        return report

    # --- one job ----------------------------------------------------------------------------------------

    def apply(self, job: Job, seen: SlurmJob | None) -> bool:
        """Move ``job`` to what Slurm says of it; True when its status changed."""
        if slurm_id(job) is None:
            return False  # dispatched by an older portal or being dispatched: nothing to follow yet
        if seen is None:
            return self.vanished(job)
        if seen.restarts and seen.state in states.WAITING | states.RUNNING and seen.state != "COMPLETING":
            return self.requeued(job, seen)  # the portal submits with no_requeue: any restart is a forced requeue
        if seen.state in states.WAITING:
            if job.status == JobStatus.RUNNING and seen.state != "CONFIGURING":
                return self.requeued(job, seen)
            return self.pending(job, seen)
        if seen.state in states.RUNNING:
            return self.running(job, seen)
        return self.ended(job, Seen.of_job(seen), seen)

    def pending(self, job: Job, seen: SlurmJob) -> bool:
        """Still pending in Slurm: keep dispatching, and put Slurm's reason on the timeline when it changes."""
        if (job.executor_state or {}).get("slurm_reason") == seen.reason:
            return False
        with transaction.atomic():  # merged into the state as it is now, not the copy read before the request
            if job.status != JobStatus.DISPATCHING or not self.still_followed(job):
                return False
            job.executor_state = {**(job.executor_state or {}), "slurm_reason": seen.reason}
            Job.objects.filter(pk=job.pk).update(executor_state=job.executor_state)
            if seen.reason != "None":  # "None": the scheduler has not looked yet, which says nothing
                lifecycle.note(job, JobEvent.Kind.EXECUTOR, states.pending_phrase(seen.reason),
                               data={"slurm_job_id": seen.job_id, "slurm_reason": seen.reason})
        return False

    def requeued(self, job: Job, seen: SlurmJob) -> bool:
        """Slurm put the job back in its queue after it had started (a node failure or a preemption, under the
        same id): the attempt is over. It goes through the one retry rule as an infrastructure failure, and only
        then is it cancelled in Slurm, so that no follower reads that cancel as one of the user's, and Slurm
        never starts it again behind the portal's back."""
        state = job.executor_state or {}
        diagnosis = Diagnosis(FailureCategory.NODE_FAULT, Phrase(gettext_noop(
            "Slurm put job %(id)s back in its own queue after it had started (%(state)s, restarted %(n)d times): a "
            "node failure or a preemption in Slurm ended this attempt, and the portal cancelled it there."), {
            "id": seen.job_id, "state": seen.state, "n": seen.restarts}), Phrase(gettext_noop(
                "Nothing to fix in the job: the portal places it again itself while its task type allows retries.")),
            evidence={"slurm_job_id": seen.job_id, "slurm_state": seen.state, "slurm_reason": seen.reason,
                      "restarts": seen.restarts, "nodes": state.get("nodes") or [], "source": "slurmctld"})
        user = state.get("user") or None
        if not self.fail(job, diagnosis):
            return False
        self.executor.cancel(seen.job_id, user)
        return True

    def running(self, job: Job, seen: SlurmJob) -> bool:
        if job.status != JobStatus.DISPATCHING:
            return False
        return self.move(job, JobStatus.RUNNING, Phrase(gettext_noop("Slurm job %(id)s runs on %(nodes)s."), {
            "id": seen.job_id, "nodes": ", ".join(seen.nodes) or "-"}),
            add_state={"nodes": list(seen.nodes), "gpus": {node: list(ids) for node, ids in seen.gpus_by_node.items()}})

    def vanished(self, job: Job) -> bool:
        """slurmctld no longer knows the job: slurmdb's record says how it ended; without one, it is unknown."""
        record = None
        if self.has_accounting():
            record = self.client.db_job(slurm_id(job))
        if record is not None and record.state not in states.WAITING | states.RUNNING:
            return self.ended(job, Seen.of_record(record), None)
        accounting = (gettext_noop("the cluster keeps no accounting (no slurmdbd)") if not self.has_accounting()
                      else gettext_noop("slurmdb has no record of its end"))
        diagnosis = Diagnosis("exit_code", Phrase(gettext_noop(
            "Slurm no longer knows job %(id)s and %(why)s: its outcome is unknown. It is marked failed because the "
            "portal cannot tell that it succeeded."), {"id": slurm_id(job), "why": Phrase(accounting)}),
            Phrase(gettext_noop("Look for its output on the cluster, or submit it again.")),
            evidence={"slurm_job_id": slurm_id(job), "outcome": "unknown"})
        return self.fail(job, diagnosis)

    def ended(self, job: Job, seen: Seen, live: SlurmJob | None) -> bool:
        meaning = states.ending(seen.state, seen.exit_status, seen.signal, seen.nodes)
        if not meaning.outcome:
            return False
        evidence = {"slurm_job_id": slurm_id(job), "slurm_state": seen.state, "slurm_reason": seen.reason,
                    "source": seen.source, "exit": states.exit_words(seen.exit_status, seen.signal)}
        if meaning.outcome == "succeeded":
            if job.status == JobStatus.DISPATCHING:  # it ran and finished between two looks
                self.move(job, JobStatus.RUNNING, Phrase(gettext_noop("Slurm job %(id)s ran on %(nodes)s."), {
                    "id": slurm_id(job), "nodes": ", ".join(seen.nodes) or "-"}))
            return self.move(job, JobStatus.SUCCEEDED, Phrase(gettext_noop(
                "Slurm job %(id)s completed with exit code 0."), {"id": slurm_id(job)}), exit_code=0)
        if meaning.outcome == "cancelled":
            return self.move(job, JobStatus.CANCELLED, meaning.message, data=evidence)
        if meaning.outcome == "requeue" and job.requeue_on_preemption:
            return self.move(job, JobStatus.QUEUED, Phrase(gettext_noop("%(why)s Back in the queue."), {
                "why": meaning.message}), data=evidence, cluster=None, retry_count=job.retry_count + 1,
                keep_state=KEPT_STATE)
        return self.fail(job, self.diagnosis(job, seen, meaning, evidence))

    def diagnosis(self, job: Job, seen: Seen, meaning: states.Ending, evidence: dict) -> Diagnosis:
        node = seen.nodes[0] if seen.nodes else ""
        if meaning.category != "exit_code" or meaning.message:
            advice = {
                "timeout": gettext_noop("Ask for a longer max runtime, or save checkpoints and resume in a new job."),
                "node_fault": gettext_noop("Nothing to fix in the job: it is retried automatically without that "
                                           "node."),
                "out_of_memory": gettext_noop("Ask for more memory per node, or reduce the data loader workers and "
                                              "batch size."),
            }.get(meaning.category, gettext_noop("Read the last lines of its log; fix the program and submit "
                                                 "again."))
            return Diagnosis(meaning.category, meaning.message, Phrase(advice), node=node,
                             exit_code=seen.exit_status, evidence=evidence)
        name = f"slurm-{slurm_id(job)}"
        lines = read_tail((job.executor_state or {}).get("output") or "", DIAGNOSIS_LINES) or ()
        pod = PodState(name=name, node=node, phase="Failed", exit_code=seen.exit_status,
                       terminated_reason=f"signal {seen.signal}" if seen.signal else "Error")
        found = diagnose([pod], node_count=job.node_count, logs={name: "\n".join(lines)})
        found.evidence = {**{k: v for k, v in found.evidence.items() if k != "pod"}, **evidence}
        return found

    # --- writing ----------------------------------------------------------------------------------------

    def still_followed(self, job: Job) -> bool:
        """Lock the job's row (until the caller's transaction ends) and say whether it is still in the status the
        follower read and on the same Slurm job: a job the reconciler withdrew, or one cancelled, retried or
        dispatched again meanwhile, is no longer this attempt's. Takes the state as it is now (evidence written
        meanwhile), so that what the caller writes is merged into it."""
        row = Job.objects.select_for_update().filter(pk=job.pk).values("status", "executor_state").first()
        if row is None or row["status"] != job.status or slurm_id_in(row["executor_state"]) != slurm_id(job):
            return False
        job.executor_state = row["executor_state"]
        return True

    def move(self, job: Job, status: str, reason, *, add_state: dict | None = None,
             keep_state: tuple[str, ...] | None = None, **fields) -> bool:
        """Move the job if it still is this attempt's; ``add_state`` is merged into its state as it is now,
        ``keep_state`` names the only keys it keeps."""
        with transaction.atomic():
            if not self.still_followed(job):
                return False
            state = job.executor_state or {}
            if add_state is not None:
                fields["executor_state"] = {**state, **add_state}
            elif keep_state is not None:
                fields["executor_state"] = {key: state[key] for key in keep_state if key in state}
            try:
                lifecycle.transition(job, status, reason, **fields)
            except lifecycle.InvalidTransition:
                return False  # cancelled or preempted meanwhile
        return True

    def fail(self, job: Job, diagnosis: Diagnosis) -> bool:
        """Through the one retry rule of every executor (an infrastructure failure goes back to the queue), if
        the job still is this attempt's."""
        with transaction.atomic():
            if not self.still_followed(job):
                return False
            try:
                lifecycle.fail_or_retry(job, diagnosis.as_dict())
            except lifecycle.InvalidTransition:
                return False
        return True

    def has_accounting(self) -> bool:
        if self._accounting is None:
            self._accounting = self.client.has_accounting()
        return self._accounting


def sync_cluster(cluster: Cluster) -> SyncReport:
    return Follower(cluster).sync()


def sync_all() -> int:
    """Follow every Slurm cluster's jobs; one unreachable cluster does not stop the others."""
    changed = 0
    for cluster in Cluster.objects.filter(executor=ExecutorKind.SLURM):
        try:
            changed += sync_cluster(cluster).changed
        except Exception:  # a cluster that cannot be asked is followed again at the next beat
            logger.exception("following the jobs of Slurm cluster %s failed", cluster.name)
    return changed


# --- reconciliation -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmRepair:
    """One repair the reconciler made on a Slurm cluster: ``kind`` withdrawn, cancelled or reallocated."""

    kind: str
    job: int | None
    detail: Phrase | str


def reconcile_cluster(cluster: Cluster, now: datetime | None = None) -> list[SlurmRepair]:
    now = now or timezone.now()
    follower = Follower(cluster)
    slurm_jobs = follower.client.jobs()
    repairs: list[SlurmRepair] = []
    repairs += withdraw_stuck_pending(follower, slurm_jobs, now)
    repairs += cancel_orphans(follower, slurm_jobs, now)
    repairs += repair_allocations(follower, slurm_jobs, now)
    return repairs


def _note(job: Job, reason, data: dict, at: datetime) -> None:
    lifecycle.note(job, JobEvent.Kind.RECONCILE, reason, data=data, at=at)


def withdraw_stuck_pending(follower: Follower, slurm_jobs: list[SlurmJob], now: datetime) -> list[SlurmRepair]:
    """Dispatched jobs Slurm kept pending longer than the bound (their node was taken meanwhile): back in the
    portal's queue first (a compare-and-set on dispatching and the same Slurm job), then cancelled in Slurm, so
    that a follower between the two finds the job no longer this attempt's instead of reading the cancel as one
    made in Slurm. Placed again by the portal, with Slurm's reason in the event."""
    bound = timedelta(seconds=float(settings.SLURM["PENDING_SECONDS"]))
    pending = {job.job_id: job for job in slurm_jobs if job.state in states.WAITING}
    repairs = []
    for job in Job.objects.filter(cluster=follower.cluster, status=JobStatus.DISPATCHING).select_related("cluster"):
        seen = pending.get(slurm_id(job) or -1)
        sent = parse_datetime((job.executor_state or {}).get("dispatched_at") or "")
        if seen is None or sent is None or sent > now - bound:
            continue
        reason = Phrase(gettext_noop(
            "Slurm kept job %(id)s pending for over %(s)d s (%(why)s): withdrawn from Slurm and placed again."), {
            "id": seen.job_id, "s": int(bound.total_seconds()), "why": states.pending_phrase(seen.reason)})
        user = (job.executor_state or {}).get("user") or None
        if not follower.move(job, JobStatus.QUEUED, reason, at=now, cluster=None, keep_state=KEPT_STATE,
                             data={"repair": "withdrawn", "slurm_job_id": seen.job_id, "slurm_reason": seen.reason}):
            continue
        repairs.append(SlurmRepair("withdrawn", job.pk, reason))
        try:
            follower.executor.cancel(seen.job_id, user)
        except SlurmError:  # still the portal's by its stored id: ``cancel_orphans`` cancels it at the next look
            logger.exception("cancelling withdrawn Slurm job %s on cluster %s failed", seen.job_id,
                             follower.cluster.name)
    return repairs


def cancel_orphans(follower: Follower, slurm_jobs: list[SlurmJob], now: datetime) -> list[SlurmRepair]:
    """Slurm jobs the portal submitted (by the ids it stored, ``ownership``) for an attempt that is over: cancelled
    in Slurm. A job whose comment merely names a portal job is work submitted to Slurm directly: left alone."""
    live = [job for job in slurm_jobs if job.state in states.WAITING | states.RUNNING]
    owners = portal_jobs_of(follower.cluster, live)
    portal = Job.objects.in_bulk(set(owners.values()))
    grace = timedelta(seconds=settings.RECONCILE["ADMITTED_SECONDS"])
    repairs = []
    for seen in live:
        if seen.job_id not in owners:
            continue
        job, (_named, attempt) = portal.get(owners[seen.job_id]), portal_job_of(seen.comment)
        if seen.submit_time and seen.submit_time > now - grace:
            continue  # a dispatch may be storing it right now
        current = (job is not None and job.status in ACTIVE_STATUSES and job.cluster_id == follower.cluster.pk
                   and slurm_id(job) == seen.job_id)
        if current:
            continue
        if seen.state == "COMPLETING" or not follower.executor.cancel(seen.job_id, seen.user or None):
            continue  # ending already (a stop the portal sent a moment ago)
        reason = Phrase(gettext_noop(
            "Cancelled Slurm job %(id)s (attempt %(a)d) on cluster %(c)s: it belongs to no running attempt of this "
            "job."), {"id": seen.job_id, "a": attempt, "c": follower.cluster.name})
        if job is not None:
            _note(job, reason, {"repair": "cancelled", "slurm_job_id": seen.job_id}, now)
        repairs.append(SlurmRepair("cancelled", job.pk if job else None, reason))
    return repairs


def repair_allocations(follower: Follower, slurm_jobs: list[SlurmJob], now: datetime) -> list[SlurmRepair]:
    """Running jobs whose allocations name other GPUs than those Slurm gave them: the allocations follow Slurm
    (it is Slurm that holds the devices)."""
    running = {job.job_id: job for job in slurm_jobs if job.state == "RUNNING" and job.gpus_by_node}
    repairs = []
    jobs = Job.objects.filter(cluster=follower.cluster, status=JobStatus.RUNNING)
    for job in jobs:
        seen = running.get(slurm_id(job) or -1)
        if seen is None:
            continue
        wanted = {(node, index) for node, indices in seen.gpus_by_node.items() for index in indices}
        allocations = list(JobAllocation.objects.filter(job=job, released_at__isnull=True).select_related(
            "gpu__node"))
        held = {(a.gpu.node.name, a.gpu.index) for a in allocations}
        if held == wanted:
            continue
        gpus = list(GPU.objects.filter(node__cluster=follower.cluster, node__name__in=seen.gpus_by_node)
                    .select_related("node"))
        chosen = [gpu for gpu in gpus if (gpu.node.name, gpu.index) in wanted]
        if len(chosen) != len(wanted):
            continue  # the inventory does not know these GPUs yet: its next import will
        names = sorted(f"{node}/gpu{index}" for node, index in wanted)
        reason = Phrase(gettext_noop(
            "Its allocation named %(held)s but Slurm gave job %(id)s %(gpus)s: the allocation now follows Slurm."), {
            "held": ", ".join(sorted(f"{n}/gpu{i}" for n, i in held)) or "-", "id": seen.job_id,
            "gpus": ", ".join(names)})
        with transaction.atomic():
            JobAllocation.objects.filter(pk__in=[a.pk for a in allocations]).update(released_at=now)
            fraction = allocations[0].fraction if allocations else 1
            JobAllocation.objects.bulk_create(JobAllocation(job=job, gpu=gpu, fraction=fraction, allocated_at=now)
                                              for gpu in chosen)
            _note(job, reason, {"repair": "reallocated", "slurm_job_id": seen.job_id, "gpus": names}, now)
        repairs.append(SlurmRepair("reallocated", job.pk, reason))
    return repairs
