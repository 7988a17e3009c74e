"""Follow the pods of dispatched jobs and store what became of them.

``ClusterSync.watch(seconds)`` streams pod events from the resourceVersion stored on the Cluster row (so a
restarted worker resumes where the last one stopped); on ``410 Gone`` it lists again and goes on from the
list. It keeps the pods of each job in memory, filled by one list when it starts, and applies an event only
if it is newer than what it holds, so replayed events never move a job backwards. ``resync()`` lists and
reconciles everything: the periodic safety net for anything a watch missed.

A job is running only when every pod of its gang runs; it succeeded when every pod did; otherwise the
diagnosis decides: infrastructure failures (node, GPU, cross-node communication) are retried up to the
task type's limit on other nodes, resuming from the last checkpoint; anything else fails the job with its
category, sentence, evidence and advice.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass

from django.utils.translation import gettext_noop
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from fleet.models import Cluster, ExecutorKind
from gpuportal.text.phrases import Phrase
from scheduling import lifecycle
from scheduling.executors.failures import category_phrase
from scheduling.executors.kubernetes import KubernetesExecutor, manifests
from scheduling.executors.kubernetes.diagnosis import IMAGE_REASONS, Diagnosis, PodState, diagnose
from scheduling.models import Job, JobStatus

logger = logging.getLogger(__name__)
MANAGED = "app.kubernetes.io/managed-by=gpuportal"
FOLLOWED = (JobStatus.DISPATCHING, JobStatus.RUNNING)
#: Pause before the second relist of one watch (doubling after): 410s in a row must not spin.
RELIST_BACKOFF_SECONDS = 0.2


@dataclass
class SyncReport:
    events: int = 0
    changed: int = 0
    relists: int = 0
    resource_version: str = ""


def _inert(pod: dict, event_type: str) -> bool:
    """A pod that is merely pending (created, not yet started, no error) cannot change its job's state."""
    if event_type == "DELETED":
        return False
    state = PodState.from_pod(pod)
    return state.phase == "Pending" and not state.waiting_reason and not state.running


def _rv(obj: dict) -> int:
    return int(obj.get("metadata", {}).get("resourceVersion") or 0)


class ClusterSync:
    def __init__(self, cluster):
        self.cluster = cluster
        self.executor = KubernetesExecutor(cluster)
        self.pods: dict[int, dict[str, dict]] = defaultdict(dict)
        self.listed = False

    # --- reading the cluster ----------------------------------------------------------------------------

    def _list(self) -> str:
        data = self.executor.raw(self.executor.core.list_pod_for_all_namespaces, label_selector=MANAGED)
        self.pods.clear()
        for pod in data.get("items", []):
            self._remember(pod)
        self.listed = True
        return data.get("metadata", {}).get("resourceVersion", "")

    def _remember(self, pod: dict, deleted: bool = False) -> int | None:
        labels = pod.get("metadata", {}).get("labels", {})
        try:
            job_id = int(labels.get(manifests.JOB_LABEL, ""))
        except ValueError:
            return None
        name = pod["metadata"]["name"]
        held = self.pods[job_id].get(name)
        if held is not None and _rv(held) >= _rv(pod):
            return None  # a replayed, older event
        if deleted:
            self.pods[job_id].pop(name, None)
        else:
            self.pods[job_id][name] = pod
        return job_id

    def _save_rv(self, rv: str) -> None:
        if rv:
            type(self.cluster).objects.filter(pk=self.cluster.pk).update(watch_resource_version=rv)
            self.cluster.watch_resource_version = rv

    # --- the loops --------------------------------------------------------------------------------------

    def resync(self) -> SyncReport:
        report = SyncReport(resource_version=self._list())
        report.changed = self.reconcile()
        if not self.cluster.watch_resource_version:
            self._save_rv(report.resource_version)
        return report

    def reconcile(self, job_ids=None) -> int:
        jobs = Job.objects.filter(cluster=self.cluster, status__in=FOLLOWED).select_related(
            "task_type", "tenant", "project", "cluster")
        if job_ids is not None:
            jobs = jobs.filter(pk__in=list(job_ids))
        return sum(1 for job in jobs if self.apply(job))

    def watch(self, seconds: float) -> SyncReport:
        report = SyncReport()
        rv = self.cluster.watch_resource_version
        if not self.listed:
            listed_rv = self._list()
            report.changed += self.reconcile()
            rv = rv or listed_rv
        deadline = time.monotonic() + seconds

        def list_pods(**kwargs):  # no return annotation: the watch yields plain dicts, no model parsing
            return self.executor.core.list_pod_for_all_namespaces(**kwargs)

        while (remaining := deadline - time.monotonic()) > 0:
            try:
                stream = watch.Watch().stream(list_pods, label_selector=MANAGED, resource_version=rv,
                                              timeout_seconds=max(1, int(remaining)), _request_timeout=remaining + 5)
                for event in stream:
                    pod = event["raw_object"]
                    report.events += 1
                    rv = pod.get("metadata", {}).get("resourceVersion", rv)
                    job_id = self._remember(pod, deleted=event["type"] == "DELETED")
                    if job_id is not None and not _inert(pod, event["type"]):  # stored as it comes
                        report.changed += self.reconcile([job_id])
                    if report.events % 200 == 0:
                        self._save_rv(rv)
            except ApiException as exc:
                if exc.status != 410:
                    raise
                report.relists += 1  # the history we asked for is gone: list, reconcile, watch from there
                if report.relists > 1:  # a server that keeps answering 410: back off instead of a tight loop
                    time.sleep(min(RELIST_BACKOFF_SECONDS * 2 ** (report.relists - 2), 5.0,
                                   max(deadline - time.monotonic(), 0)))
                rv = self._list()
                report.changed += self.reconcile()
            self._save_rv(rv)
        report.resource_version = rv
        return report

    # --- one job ----------------------------------------------------------------------------------------

    def apply(self, job: Job) -> bool:
        """Move ``job`` to what its pods say; True when its status changed."""
        attempt = str((job.executor_state or {}).get("attempt", job.retry_count))
        pods = [p for p in self.pods.get(job.pk, {}).values()
                if p["metadata"].get("labels", {}).get(manifests.ATTEMPT_LABEL) == attempt]
        states = sorted((PodState.from_pod(p) for p in pods), key=lambda s: s.index)
        if job.kind == "service":
            return self.apply_replica(job, states, pods)
        if len(states) == job.node_count and all(s.phase == "Succeeded" for s in states):
            if job.status == JobStatus.DISPATCHING:  # it ran and finished between two looks
                self._move(job, JobStatus.RUNNING, Phrase(gettext_noop("All %(n)d pod(s) ran on %(nodes)s."), {
                    "n": len(states), "nodes": ", ".join(sorted({s.node for s in states}))}))
            finished = Phrase(gettext_noop("All %(n)d pod(s) finished with exit code 0."), {"n": len(states)})
            return self._move(job, JobStatus.SUCCEEDED, finished, exit_code=0)
        if any(s.phase == "Failed" or s.waiting_reason in IMAGE_REASONS for s in states) or (
                not states and self._gone(job)):
            diagnosis = self._diagnose(job, states, pods)
            if diagnosis is not None:
                return self.fail_or_retry(job, diagnosis)
        if job.status == JobStatus.DISPATCHING and len(states) == job.node_count and all(s.running for s in states):
            return self._move(job, JobStatus.RUNNING, Phrase(gettext_noop("All %(n)d pod(s) running on %(nodes)s."), {
                "n": len(states), "nodes": ", ".join(sorted({s.node for s in states}))}))
        return False

    def apply_replica(self, job: Job, states: list[PodState], pods: list[dict]) -> bool:
        """A service replica runs once its pod does (phase Running: its container started, perhaps restarting).
        A container that exits is restarted by its Deployment, as Kubernetes does: the replica stays running and
        ``probe`` shows the crash loop. Only what no restart mends ends it: an image that does not come, or a pod
        failed as a whole (an eviction, a lost node), diagnosed like a batch job's."""
        if any(s.phase == "Failed" or s.waiting_reason in IMAGE_REASONS for s in states):
            diagnosis = self._diagnose(job, states, pods, read_job=False)
            if diagnosis is not None:
                return self.fail_or_retry(job, diagnosis)
        live = [s for s in states if s.phase == "Running"]
        if job.status == JobStatus.DISPATCHING and live:
            return self._move(job, JobStatus.RUNNING, Phrase(gettext_noop("The replica's pod runs on %(nodes)s."), {
                "nodes": ", ".join(sorted({s.node for s in live}))}))
        return False

    def _gone(self, job: Job) -> bool:
        """No pods: did the Job fail as a whole (deadline)?"""
        dispatched = (job.executor_state or {}).get("dispatched_at")
        return bool(dispatched) and job.status == JobStatus.RUNNING

    def _diagnose(self, job: Job, states: list[PodState], pods: list[dict], read_job: bool = True) -> Diagnosis | None:
        state = job.executor_state or {}
        namespace, name = state.get("namespace", ""), state.get("object", "")
        conditions = []
        try:
            if read_job:  # a replica has no batch Job: its pods say it all
                conditions = (self.executor.raw(self.executor.batch.read_namespaced_job, name, namespace)
                              .get("status", {}).get("conditions") or [])
        except ApiException as exc:
            if exc.status != 404:
                raise
        if not states and not conditions:
            return None
        not_ready = set()
        for node in {s.node for s in states if s.node}:
            try:
                node_obj = self.executor.raw(self.executor.core.read_node, node)
            except ApiException:
                not_ready.add(node)
                continue
            ready = next((c for c in node_obj.get("status", {}).get("conditions", []) if c.get("type") == "Ready"), {})
            if ready.get("status") != "True":
                not_ready.add(node)
        interesting = states if job.node_count > 1 else [s for s in states if s.phase == "Failed"]
        logs = {s.name: self.executor.pod_log(namespace, s.name) for s in interesting}
        return diagnose(states, node_count=job.node_count, conditions=conditions, not_ready_nodes=not_ready,
                        agent_fault=state.get("fault"), logs=logs)

    def _move(self, job: Job, status: str, reason: str, **fields) -> bool:
        try:
            lifecycle.transition(job, status, reason, **fields)
        except lifecycle.InvalidTransition:
            return False  # cancelled or preempted meanwhile
        return True

    def fail_or_retry(self, job: Job, diagnosis: Diagnosis) -> bool:
        """Retry infrastructure failures on other nodes (up to the task type's limit); fail the rest
        (``lifecycle.fail_or_retry``, the rule of every executor), then delete the attempt's objects."""
        state = dict(job.executor_state or {})
        try:
            lifecycle.fail_or_retry(job, diagnosis.as_dict())
        except lifecycle.InvalidTransition:
            return False  # cancelled or preempted meanwhile
        job.executor_state = {**state, **(job.executor_state or {})}
        self.executor.stop(job, Phrase(gettext_noop("The attempt failed: %(c)s."), {
            "c": category_phrase(diagnosis.category)}))
        return True


def resync_all() -> int:
    changed = 0
    for cluster in Cluster.objects.filter(executor=ExecutorKind.KUBERNETES):
        try:
            changed += ClusterSync(cluster).resync().changed
        except Exception:  # one unreachable cluster must not stop the others
            logger.exception("resync of cluster %s failed", cluster.name)
    return changed
