"""Read-side questions about jobs: quota use per tenant and model, the cluster queue, fair share.

Nothing here writes. Quota limits come from the one effective-quota rule (``tenants.quotas``), fair share
from the same snapshots the pass decides on (``snapshots``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q
from django.utils import timezone

from fleet.models import Cluster
from scheduling.engine.passes import decayed_usage, tenant_shares
from scheduling.models import Job, JobQueueState, JobStatus
from scheduling.passes.snapshots import load_snapshots
from tenants.models import Quota
from tenants.quotas import effective_quotas, quota_gpus


@dataclass(frozen=True)
class QuotaUse:
    tenant: str
    gpu_model: str
    guaranteed: int
    limit: int  # effective: the configured limit plus active bursts
    used: int  # GPUs held, a share counting as one (tenants.quotas)
    queued: int
    burst: int = 0

    @property
    def configured_limit(self) -> int:
        return self.limit - self.burst

    @property
    def used_pct(self) -> float:
        return min(100.0, 100.0 * self.used / self.limit) if self.limit else 0.0

    @property
    def guaranteed_pct(self) -> float:
        return 100.0 * self.guaranteed / self.limit if self.limit else 0.0

    @property
    def borrowing(self) -> int:
        return max(0, self.used - self.guaranteed)


def quota_usage(user) -> list[QuotaUse]:
    """Each visible tenant's quota per GPU model, with GPUs in use and GPUs asked for by queued jobs."""
    jobs = Job.objects.visible_to(user)
    used = {(r["tenant__name"], r["gpu_model"]): r["gpus"] for r in jobs.active()
            .values("tenant__name", "gpu_model")
            .annotate(gpus=Count("allocations", filter=Q(allocations__released_at__isnull=True)))}
    queued: dict[tuple[str, str], int] = {}
    for job in jobs.filter(status=JobStatus.QUEUED).values("tenant__name", "gpu_model", "gpus_per_node", "node_count"):
        key = (job["tenant__name"], job["gpu_model"])
        queued[key] = queued.get(key, 0) + quota_gpus(job["gpus_per_node"], job["node_count"])
    return [QuotaUse(q.tenant, q.gpu_model, q.guaranteed, q.effective_limit, used.get((q.tenant, q.gpu_model), 0),
                     queued.get((q.tenant, q.gpu_model), 0), q.burst)
            for q in effective_quotas(Quota.objects.visible_to(user))]


def size_text(nodes: int, gpus_per_node: int, gpu_milli: int, gpu_model: str) -> str:
    """``nodes x GPUs per node [x share] model``: how the queue shows a job, also other tenants' jobs."""
    share = f" x {gpu_milli / 1000:g}" if gpu_milli < 1000 else ""
    return f"{nodes} x {gpus_per_node:g}{share} {gpu_model}"


def cluster_queue(user, cluster_name: str | None = None) -> list[dict]:
    """The waiting jobs in queue order; other tenants' jobs show their tenant, size and reason code only."""
    visible = set(Job.objects.visible_to(user).waiting().values_list("pk", flat=True))
    states = (JobQueueState.objects.select_related("job__tenant", "job__task_type", "job__owner", "job__cluster")
              .filter(job__status__in=("pending", "queued")).order_by("queue_position", "job__submitted_at"))
    clusters = {c.name for c in Cluster.objects.all()}
    rows = []
    for state in states:
        job = state.job
        home = job.cluster.name if job.cluster else None
        if cluster_name and cluster_name in clusters and home and home != cluster_name:
            continue
        mine = job.pk in visible
        rows.append({"position": state.queue_position, "tenant": job.tenant.name, "job": job if mine else None,
                     "id": job.pk if mine else None, "task_type": job.task_type.code,
                     "size": size_text(job.node_count, job.gpus_per_node, job.gpu_milli, job.gpu_model),
                     "priority": job.priority, "reason": state.wait_reason,
                     "message": job.wait_reason_message if mine else "", "estimated_start": state.estimated_start,
                     "earliest_start": state.earliest_start, "latest_start": state.latest_start,
                     "likely_start": job.likely_start})
    return rows


def fair_share_report() -> list:
    """Each tenant's weight, fair share, decayed usage and running GPUs: why another tenant goes first.

    Read from the snapshot the pass would schedule the first cluster with (every snapshot holds every
    tenant's running jobs and usage), so the page shows what the pass uses."""
    snapshots, _nodes, _gpus = load_snapshots(timezone.now())
    if not snapshots:
        return []
    snapshot = snapshots[min(snapshots)]
    return tenant_shares(snapshot, decayed_usage(snapshot))
