"""The invariants every fault scenario must leave behind, stated once: the fault-injection suite
(``tests/faults/faultlib.check_invariants``) asserts them after each scenario and the chaos soak
(``manage.py chaos_soak``) reports them after its drain.

Why one statement: each scenario injects a different fault, but what "nothing stuck, nothing lost, nothing
twice" means is the same everywhere (docs/reliability.md); one copy keeps the suite and the soak honest and
comparable. Each finding names its job, so the soak can say which jobs broke which rule.

* every job's status is legal and its status events form a legal path through ``ALLOWED_TRANSITIONS``;
* no open GPU allocation belongs to a job that is not active, and no GPU is held more than once over;
* no job is ``admitted`` past the reconcile bound, nor ``dispatching`` past it without its objects on its
  cluster (after a reconcile that ran past every bound: ``settle``);
* every submission answered 201 is stored exactly once, and every stored job is one of them;
* the audit chain verifies.

``waits_forever`` adds what only a long run can show: a queued job that no capacity freed later can start.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from audit.log import Verification, verify
from fleet.models import ExecutorKind, Node
from scheduling.engine.reasons import WaitReason
from scheduling.executors import KubernetesExecutor
from scheduling.executors.kubernetes.sync import resync_all
from scheduling.lifecycle import ALLOWED_TRANSITIONS
from scheduling.models import ACTIVE_STATUSES, Job, JobAllocation, JobEvent, JobStatus
from scheduling.passes.reconcile import ReconcileReport, reconcile
from scheduling.tasks import sync_job_status

#: Beyond every reconcile bound (docs/reliability.md: 120 s admitted, 300 s dispatching).
LATER = timedelta(hours=1)
#: Wait reasons no capacity freed later cures: the job needs what the cluster does not have, or what is broken.
HOPELESS_REASONS = (WaitReason.HOST_RESOURCES, WaitReason.NEVER_FITS, WaitReason.NO_HEALTHY_NODE)


@dataclass
class Finding:
    """One broken rule: the job (or GPU) it concerns and what is wrong, in the words the suite prints."""

    job: int | None
    problem: str


@dataclass
class Findings:
    """What ``examine`` found, rule by rule, plus what it read to find it (for the summaries)."""

    jobs: list[Job]
    illegal: list[Finding] = field(default_factory=list)  # unknown statuses, illegal or broken status paths
    stuck: list[Finding] = field(default_factory=list)  # admitted or dispatching past the reconcile bound
    held: list[Finding] = field(default_factory=list)  # GPUs allocated to jobs that are not active
    overcommitted: list[Finding] = field(default_factory=list)  # GPUs held more than once over
    submissions: list[Finding] = field(default_factory=list)  # answered with several ids, lost, or never answered
    chain: Verification | None = None
    per_job: list[Finding] = field(default_factory=list)  # illegal and stuck in the order found, job by job

    def problems(self) -> list[str]:
        """Every finding, in the order the fault suite has always reported them: job by job, then GPUs, then
        submissions, then the audit chain."""
        lines = [f.problem for f in self.per_job + self.held + self.overcommitted + self.submissions]
        if self.chain is not None and not self.chain.ok:
            lines.append(f"audit chain broken: {self.chain.problem}")
        return lines


def path_problems(job: Job, events: list[JobEvent]) -> list[str]:
    """A job's status events must chain from "" through allowed moves to its current status."""
    problems, at = [], ""
    for event in events:
        if event.from_status != at:
            problems.append(f"job {job.pk}: event {event.pk} starts at {event.from_status!r}, job was {at!r}")
        if event.to_status not in ALLOWED_TRANSITIONS.get(event.from_status, ()):
            problems.append(f"job {job.pk}: illegal move {event.from_status!r} -> {event.to_status!r}")
        at = event.to_status
    if at != job.status:
        problems.append(f"job {job.pk}: events end at {at!r} but the job is {job.status!r}")
    return problems


def stuck_problem(job: Job, now: datetime, has_objects) -> str:
    """Why ``job`` is admitted or dispatching past the reconcile bound ("" when it is not)."""
    if job.status == JobStatus.ADMITTED and job.admitted_at < now - timedelta(
            seconds=settings.RECONCILE["ADMITTED_SECONDS"]):
        return f"job {job.pk} still admitted since {job.admitted_at:%H:%M:%S} after a reconcile past the bound"
    if job.status == JobStatus.DISPATCHING:
        state = job.executor_state or {}
        sent = state.get("dispatched_at")
        if not sent:
            return f"job {job.pk} dispatching without a dispatch time"
        if datetime.fromisoformat(sent) < now - timedelta(seconds=settings.RECONCILE["DISPATCHING_SECONDS"]) \
                and not has_objects(job):
            return f"job {job.pk} dispatching past the bound and its objects are not on its cluster"
    return ""


def status_moves() -> dict[int, list[JobEvent]]:
    """Every job's status events (moves, not notes), in the order they were written."""
    events = defaultdict(list)
    for event in JobEvent.objects.exclude(from_status=F("to_status")).order_by("pk"):
        events[event.job_id].append(event)
    return events


def settle(now: datetime | None = None) -> ReconcileReport:
    """Reconcile at ``now`` (default: past every bound), then read the clusters once: the state the
    invariants are checked on, as the beat's reconcile and syncs would leave it."""
    repaired = reconcile(now or timezone.now() + LATER)
    sync_job_status()  # what the simulated cluster says now (the beat's sync)
    resync_all()  # and the Kubernetes clusters
    return repaired


def examine(now: datetime | None = None, submitted: dict[str, list[int]] | None = None) -> Findings:
    """Check the invariants (see the module) on the database as it is; ``submitted`` maps each submission
    to the ids it was answered with (201). Changes nothing: call ``settle`` first."""
    now = now or timezone.now() + LATER
    findings = Findings(jobs=list(Job.objects.select_related("cluster").order_by("pk")))
    events = status_moves()
    executors: dict[int, KubernetesExecutor] = {}

    def has_objects(job):
        if job.cluster is None or job.cluster.executor != ExecutorKind.KUBERNETES:
            return bool((job.executor_state or {}).get("plan"))
        executor = executors.setdefault(job.cluster_id, KubernetesExecutor(job.cluster))
        return executor.has_objects(job)

    def add(rule: list[Finding], job: int, problem: str) -> None:
        finding = Finding(job, problem)
        rule.append(finding)
        findings.per_job.append(finding)

    for job in findings.jobs:
        if job.status not in JobStatus.values:
            add(findings.illegal, job.pk, f"job {job.pk}: unknown status {job.status!r}")
        for problem in path_problems(job, events[job.pk]):
            add(findings.illegal, job.pk, problem)
        if stuck := stuck_problem(job, now, has_objects):
            add(findings.stuck, job.pk, stuck)
    held = JobAllocation.objects.filter(released_at__isnull=True)
    for allocation in held.exclude(job__status__in=ACTIVE_STATUSES).select_related("job"):
        findings.held.append(Finding(allocation.job_id, f"GPU {allocation.gpu_id} still allocated to job "
                                                        f"{allocation.job_id} ({allocation.job.status})"))
    load = defaultdict(float)
    for gpu_id, fraction in held.values_list("gpu_id", "fraction"):
        load[gpu_id] += float(fraction)
    findings.overcommitted = [Finding(None, f"GPU {gpu} held {share:g} times over")
                              for gpu, share in load.items() if share > 1.0001]
    if submitted is not None:
        findings.submissions = submission_findings(submitted, {job.pk for job in findings.jobs})
    findings.chain = verify()
    return findings


def submission_findings(submitted: dict[str, list[int]], stored: set[int]) -> list[Finding]:
    """Every submission answered 201 is stored exactly once, and every stored job was answered."""
    found = []
    for what, ids in submitted.items():
        if len(set(ids)) != 1:
            found.append(Finding(min(ids, default=None), f"submission {what} answered with several ids: "
                                                         f"{sorted(set(ids))}"))
    answered = {ids[0] for ids in submitted.values() if ids}
    if answered - stored:
        found.append(Finding(min(answered - stored), f"answered 201 but not stored: {sorted(answered - stored)}"))
    if stored - answered:
        found.append(Finding(min(stored - answered),
                             f"stored but never answered 201 (duplicates?): {sorted(stored - answered)}"))
    return found


def waits_forever(jobs: list[Job]) -> list[Finding]:
    """Queued jobs no freed capacity will ever start: the scheduler says they cannot fit (``HOPELESS_REASONS``),
    or the retries of infrastructure failures avoid so many nodes of their GPU model that fewer are left than
    they need (a job faulted once on each node of a two-node pool)."""
    pools: dict[str, set[int]] = defaultdict(set)
    for node_id, model in Node.objects.values_list("pk", "gpu_model"):
        pools[model].add(node_id)
    found = []
    for job in jobs:
        if job.status != JobStatus.QUEUED:
            continue
        reason = job.wait_reason
        if reason in HOPELESS_REASONS:
            found.append(Finding(job.pk, f"job {job.pk} queued: {reason} ({job.wait_reason_message})"))
            continue
        avoided = set((job.executor_state or {}).get("avoid_nodes") or ())
        left = pools[job.gpu_model] - avoided
        if avoided and len(left) < job.node_count:
            found.append(Finding(job.pk, f"job {job.pk} queued ({reason or 'no wait reason'}) avoiding "
                                         f"{len(avoided & pools[job.gpu_model])} of the {len(pools[job.gpu_model])} "
                                         f"{job.gpu_model} nodes after {job.retry_count} infrastructure failures; "
                                         f"it needs {job.node_count}"))
    return found
