"""Hand admitted jobs to their clusters' executors, many at once.

The objects of each job are created concurrently (a thread pool; the executors only talk HTTP in the
threads, every database read happens before), then the jobs that made it are marked ``dispatching`` in one
compare-and-set with an event each, and the ones the cluster refused fail with the cluster's own message
(category ``dispatch``). A job that is no longer admitted is skipped, so running
this twice for the same job does nothing the second time.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from fleet.models import ExecutorKind
from gpuportal.observability import telemetry
from gpuportal.storage.db import bulk_set
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from scheduling import lifecycle
from scheduling.executors import executor_for
from scheduling.models import ACTIVE_STATUSES, FailureCategory, Job, JobAllocation, JobStatus

logger = logging.getLogger(__name__)
#: Keys of the executor state that outlive one attempt (its failures, nodes to avoid and since when, the checkpoint).
KEPT_STATE = ("attempts", "avoid_nodes", "avoid_since", "resume_from")
#: Keys of the executor state that name the job on its cluster (a Slurm job id, a Kubernetes Job). The dispatch
#: event keeps them with the cluster's name: a requeue empties the job's state and its cluster, the event stays,
#: so accounting can tell every job the portal ever submitted to a cluster from work submitted there directly.
NAMING_STATE = ("slurm_job_id", "namespace", "object")


def fail_dispatch(job: Job, exc: Exception) -> int:
    """Fail a job the cluster refused (dispatch, or the reconciler making its objects again); 0 when it
    changed state meanwhile (a cancel wins)."""
    telemetry.increment("gpuportal_dispatch_errors_total", cluster=job.cluster.name)
    if job.cluster.executor == ExecutorKind.SLURM:  # one submit, never retried, and no objects
        message = Phrase(gettext_noop("Dispatch failed: Slurm cluster %(c)s did not take the job: %(error)s"), {
            "c": job.cluster.name, "error": str(exc)})
        advice = Phrase(gettext_noop("Check the job's settings against what the message says; if it names the "
                                     "cluster's accounts, token or configuration, tell the platform admins."))
    else:
        message = Phrase(gettext_noop(
            "Dispatch failed: the cluster %(c)s refused the job's objects after every retry: %(error)s"), {
            "c": job.cluster.name, "error": str(exc)})
        advice = Phrase(gettext_noop("Check the image name and the job's settings; if the message names the "
                                     "cluster (quota, admission webhook), tell the platform admins."))
    events = lifecycle.transition_many(
        [job], JobStatus.FAILED, {job.pk: message}, skip_moved=True, failure_category=FailureCategory.DISPATCH,
        failure_message=message, executor_state={**job.executor_state, "diagnosis": {
            "category": FailureCategory.DISPATCH, "message": message, "evidence": {"error": str(exc)},
            "advice": advice}})
    return len(events)


def _mark_dispatching(cluster, executor, ready: list[Job], now) -> list[Job]:
    """Mark each sent job ``dispatching`` on its own: a job cancelled meanwhile is left cancelled (and its
    fresh objects are deleted again) while the others of the batch go on."""
    if not ready:
        return []
    reason = Phrase(gettext_noop("Sent to cluster %(c)s (%(kind)s executor)."), {
        "c": cluster.name, "kind": phrases.label(ExecutorKind(cluster.executor).label)})
    with transaction.atomic():
        named = {job.pk: {"cluster": cluster.name, **{key: job.executor_state[key] for key in NAMING_STATE
                                                      if key in (job.executor_state or {})}} for job in ready}
        events = lifecycle.transition_many(ready, JobStatus.DISPATCHING, {job.pk: reason for job in ready}, at=now,
                                           data=named, skip_moved=True)
        moved_ids = {event.job_id for event in events}
        moved = [job for job in ready if job.pk in moved_ids]
        bulk_set(Job, moved, ["executor_state"])
    for job in ready:
        if job.pk in moved_ids:
            continue
        job.refresh_from_db(fields=["status"])
        if job.status in ACTIVE_STATUSES:
            continue  # another worker dispatched it first (a duplicate message): its objects are the same ones
        logger.info("job %s was %s while it was dispatched; deleting its objects again", job.pk, job.status)
        executor.stop(job, _("The job changed state while it was being dispatched."))
    return moved


def dispatch_many(job_ids, workers: int | None = None) -> dict:
    began = time.perf_counter()
    jobs = list(Job.objects.filter(pk__in=list(job_ids), status=JobStatus.ADMITTED)
                .select_related("cluster", "tenant", "project", "task_type").prefetch_related("tenant__quotas"))
    placed: dict[int, set[str]] = defaultdict(set)  # node names only: one narrow query, no model rows
    for job_id, node in JobAllocation.objects.filter(job__in=jobs, released_at__isnull=True).values_list(
            "job_id", "gpu__node__name"):
        placed[job_id].add(node)
    for job in jobs:
        job.placement_nodes = tuple(sorted(placed[job.pk]))
    by_cluster: dict = defaultdict(list)
    for job in jobs:
        by_cluster[job.cluster].append(job)
    summary = {"dispatched": 0, "failed": 0, "skipped": len(list(job_ids)) - len(jobs),
               "load_seconds": time.perf_counter() - began, "send_seconds": 0.0, "store_seconds": 0.0}
    for cluster, cluster_jobs in by_cluster.items():
        executor = executor_for(cluster)
        prepare = getattr(executor, "prepare", None)
        results: list[tuple[Job, dict | None, Exception | None]] = []
        sending = time.perf_counter()
        try:
            if prepare is not None:
                prepare(cluster_jobs)  # namespaces and priority classes, before the threads
        except Exception as exc:  # the cluster refused the tenant's objects: every job here fails with it
            logger.exception("preparing cluster %s failed", cluster.name)
            results = [(job, None, exc) for job in cluster_jobs]
        if not results:
            def run(job, executor=executor):
                try:
                    return job, executor.dispatch(job), None
                except Exception as exc:
                    logger.exception("dispatch of job %s failed", job.pk)
                    return job, None, exc

            size = workers or settings.KUBERNETES["DISPATCH_WORKERS"]
            if len(cluster_jobs) == 1 or size <= 1:
                results = [run(job) for job in cluster_jobs]
            else:
                with ThreadPoolExecutor(max_workers=min(size, len(cluster_jobs))) as pool:
                    results = list(pool.map(run, cluster_jobs))
        summary["send_seconds"] += time.perf_counter() - sending
        sent = [(job, state) for job, state, error in results if error is None]
        stored = time.perf_counter()
        now = timezone.now()
        for job, state in sent:
            kept = {k: v for k, v in (job.executor_state or {}).items() if k in KEPT_STATE}
            job.executor_state = {**kept, **state, "dispatched_at": now.isoformat()}
        moved = _mark_dispatching(cluster, executor, [job for job, _state in sent], now)
        failed = 0
        for job, _state, error in results:
            if error is not None:
                failed += fail_dispatch(job, error)
        summary["store_seconds"] += time.perf_counter() - stored
        summary["dispatched"] += len(moved)
        summary["failed"] += failed
        summary["skipped"] += len(results) - len(moved) - failed
    return summary
