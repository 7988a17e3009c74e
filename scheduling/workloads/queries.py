"""Reading notebooks, services and arrays: who may open what, live state, per-state counts, endpoints."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count
from django.shortcuts import get_object_or_404
from django.urls import reverse

from scheduling.executors import LiveState, executor_for
from scheduling.models import TERMINAL_STATUSES, Job, JobGroup, JobStatus, NamedPort, WorkloadKind, label_of
from scheduling.workloads import origin as workload_origin
from tenants import access

logger = logging.getLogger(__name__)


def may_open(user, job: Job) -> bool:
    """Who may reach a notebook: its owner, the tenant's admins and platform admins (the same people who may
    stop it). Nobody else, whatever they can read."""
    return access.can_manage_job(user, job.tenant_id, job.owner_id)


def may_call(user, group: JobGroup) -> bool:
    """Who may call a service: those who may submit jobs in its tenant (researchers, approvers, tenant admins)
    and platform admins. Read-only roles (managers, viewers) may not: a call can change what the service holds
    or does, and reading a tenant's pages is no right to act in it."""
    return access.can_submit(user, group.tenant_id)


def live_state(job: Job) -> LiveState:
    """What the executor sees of a running notebook or replica now; nothing when it cannot be asked."""
    if job.status != JobStatus.RUNNING or job.cluster_id is None:
        return LiveState()
    try:
        return executor_for(job.cluster).probe(job)
    except Exception:  # an unreachable cluster: the page and the API still answer, with nothing live
        logger.exception("probing job %s failed", job.pk)
        return LiveState()


def service_url(group_id: int) -> str:
    """A service's address for programs (with an API token): on the workload origin, where it is served (the
    portal's own path, which only sends browsers on, while no workload origin is configured)."""
    if workload_origin.configured():
        return workload_origin.url(workload_origin.Workload(workload_origin.SERVICE, group_id))
    return reverse("scheduling:service-endpoint-root", args=[group_id], urlconf=settings.ROOT_URLCONF)


def job_url(job: Job) -> str | None:
    """Where a running notebook opens (the portal's address, which signs the reader in to the workload origin)
    or a replica's service is called; None for other jobs."""
    if job.kind == WorkloadKind.NOTEBOOK and job.status == JobStatus.RUNNING:
        return reverse("scheduling:notebook-open-root", args=[job.pk], urlconf=settings.ROOT_URLCONF)
    if job.kind == WorkloadKind.SERVICE and job.group_id:
        return service_url(job.group_id)
    return None


def port_links(job: Job) -> list[tuple[NamedPort, str | None]]:
    """Each named port of ``job`` with where it opens while the job runs (the portal's address, which signs the
    reader in to the workload origin); None while it does not run."""
    running = job.status == JobStatus.RUNNING
    return [(port, reverse("scheduling:port-open-root", args=[job.pk, port["name"]], urlconf=settings.ROOT_URLCONF)
             if running else None) for port in job.ports or []]


def named_port(job: Job, name: str) -> NamedPort | None:
    return next((port for port in job.ports or [] if port["name"] == name), None)


def port_refusal(job: Job, port: NamedPort) -> str:
    """Why the proxy must not reach ``port`` of the running ``job`` now (the executor says; "" when it may)."""
    if job.status != JobStatus.RUNNING or job.cluster_id is None:
        return ""
    return executor_for(job.cluster).port_refusal(job, port)


def port_upstream(job: Job, port: NamedPort) -> str:
    """Where the proxy reaches a running job's named port now ("" when nothing can be reached: not running, a
    cluster that cannot be asked)."""
    if job.status != JobStatus.RUNNING or job.cluster_id is None:
        return ""
    try:
        return executor_for(job.cluster).port_upstream(job, port)
    except Exception:  # an unreachable cluster: the proxy answers 503, never a traceback
        logger.exception("finding port %s of job %s failed", port["name"], job.pk)
        return ""


@dataclass
class Member:
    job: Job
    live: LiveState = field(default_factory=LiveState)


@dataclass
class GroupView:
    """A service or an array as its page and its JSON show it."""

    group: JobGroup
    members: list[Member]
    counts: dict[str, int]

    @property
    def ready_replicas(self) -> int:
        return sum(1 for m in self.members if m.live.ready and m.job.revision == self.group.revision)

    @property
    def updated_replicas(self) -> int:
        return sum(1 for m in self.members if m.job.revision == self.group.revision and not m.job.is_terminal)

    @property
    def rolling_out(self) -> bool:
        return any(m.job.revision != self.group.revision and not m.job.is_terminal for m in self.members)

    @property
    def failed_of_revision(self) -> int:
        return sum(1 for m in self.members if m.job.revision == self.group.revision
                   and m.job.status == JobStatus.FAILED)

    @property
    def counts_text(self) -> str:
        return ", ".join(f"{label_of(JobStatus, status)} {n}" for status, n in self.counts.items())


def group_view(group: JobGroup, probe: bool = True) -> GroupView:
    members = list(group.members.select_related("cluster", "task_type").order_by("group_index", "id"))
    counts = Counter(job.status for job in members)
    ordered = {s: counts[s] for s in JobStatus.values if counts[s]}
    live = [Member(job, live_state(job) if probe and group.kind == JobGroup.Kind.SERVICE else LiveState())
            for job in members]
    if group.kind == JobGroup.Kind.SERVICE:  # ended replicas are history: the page shows the live ones first
        live.sort(key=lambda m: (m.job.is_terminal, m.job.group_index or 0, m.job.pk))
    return GroupView(group, live, ordered)


def visible_group(user, pk: int, kind: str) -> JobGroup:
    """One service or array of the user's tenants; 404 for any other, as if it did not exist."""
    return get_object_or_404(JobGroup.objects.visible_to(user).select_related("tenant", "project", "owner"),
                             pk=pk, kind=kind)


def visible_groups(user, limit: int) -> list[JobGroup]:
    """The newest ``limit`` services and arrays the user may see, each with the count of its members in every
    state (``n_<status>``), in two plain queries: a count filtered by each of the thirteen states, in one query,
    cost more to build than both, on every job list, also where there is no group at all."""
    groups = list(JobGroup.objects.visible_to(user).select_related("tenant", "project", "owner")[:limit])
    counts: dict[int, Counter] = defaultdict(Counter)
    if groups:
        for group_id, status, members in (Job.objects.filter(group_id__in=[group.pk for group in groups]).order_by()
                                          .values_list("group_id", "status").annotate(members=Count("id"))):
            counts[group_id][status] = members
    for group in groups:
        for status in JobStatus.values:
            setattr(group, f"n_{status}", counts[group.pk][status])
    return groups


def count_pairs(group) -> list[tuple[str, int]]:
    """(status label, count) of an annotated group, in lifecycle order, zeros left out."""
    return [(label_of(JobStatus, s), getattr(group, f"n_{s}")) for s in JobStatus.values
            if getattr(group, f"n_{s}", 0)]


def ended(group) -> bool:
    return group.stopped_at is not None or all(
        getattr(group, f"n_{s}", 0) == 0 for s in JobStatus.values if s not in TERMINAL_STATUSES)
