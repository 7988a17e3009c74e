"""Import a Slurm cluster's own accounting (slurmdb) into ``ClusterAccountingDaily``.

The portal counts its own jobs from their allocations (``metering.usage.rollup``); work submitted to Slurm
directly (``sbatch`` by people who never open the portal) holds GPUs the portal never allocated. slurmdb has
both, so the import keeps what every job held, per day, account, user and GPU model, marked by whether the
portal submitted it (its comment carries the portal's tag, or its id is one the portal dispatched): the reports
add the jobs it did not submit to the portal's own figures, and compare slurmdb's figures of the portal's jobs
with the allocations.

How GPU-seconds are attributed: a job holds its allocated ``gres/gpu`` count from its start for its elapsed
time (slurmdb's own figure; a running job until now), cut at the portal's local midnights. The GPU model is
its nodes' model in the fleet (where they agree), else its GRES type as the inventory maps it (the cluster's
``slurm_models``, else the catalogue's model of that name in any case). A job the portal submitted belongs to
its portal job's tenant (as its allocations do, so a tenant's report compares like with like); any other job to
the cluster's ``slurm_accounts`` entry of its account; an account not named there is kept without a tenant and
shown as unmapped.

Idempotent: the window is widened to whole local days, every job slurmdb says overlaps it is read, and the
rows of those days are replaced in one transaction. A job is counted in ``jobs_started`` on the day it
started, so a month's sum counts each job once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from fleet.catalogue import accelerator_models
from fleet.models import Cluster, Node
from gpuportal.text.dates import day_start, local_day
from metering.models import ClusterAccountingDaily
from metering.usage.rollup import split_by_day
from scheduling.executors.slurm.client import SlurmClient
from scheduling.executors.slurm.inventory import model_for
from scheduling.executors.slurm.shapes import AccountedJob
from scheduling.models import Job, JobEvent, JobStatus
from tenants.models import Tenant

#: How far slurmctld's clock may run ahead of the portal's: a dispatch event is looked for from this long before
#: the earliest submit time slurmdb gives (Slurm ids are reused after a reset, so the search is bounded).
SUBMIT_CLOCK_SLACK = timedelta(hours=1)


@dataclass
class AccountingImport:
    """What one import read and wrote: the whole local days it replaced, the jobs slurmdb returned and those
    that held GPUs in the window, the rows written, the GPU-seconds of outside and portal jobs, and the
    accounts no tenant is mapped to."""

    cluster: str
    first_day: date
    last_day: date
    jobs_read: int = 0
    jobs_counted: int = 0
    rows: int = 0
    outside_gpu_seconds: float = 0.0
    portal_gpu_seconds: float = 0.0
    unmapped_accounts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"cluster": self.cluster, "first_day": self.first_day.isoformat(),
                "last_day": self.last_day.isoformat(), "jobs_read": self.jobs_read,
                "jobs_counted": self.jobs_counted, "rows": self.rows,
                "outside_gpu_seconds": round(self.outside_gpu_seconds, 3),
                "portal_gpu_seconds": round(self.portal_gpu_seconds, 3),
                "unmapped_accounts": self.unmapped_accounts}


@dataclass(frozen=True)
class _Key:
    day: date
    account: str
    user_name: str
    gpu_model: str
    from_portal: bool
    #: The tenant of the portal job a Slurm job ran for (None: none in the portal's records).
    portal_tenant_id: int | None = None


def portal_jobs(cluster: Cluster, jobs: list[AccountedJob]) -> dict[int, int | None]:
    """The Slurm job ids among ``jobs`` that the portal submitted, each with its portal job's tenant, by the
    portal's own records whatever became of the job since. slurmdb keeps a job's comment only where the cluster
    sets ``AccountingStoreFlags=job_comment``, so the comment alone cannot say; and anyone can write a comment, so
    only these records name the tenant.

    The durable record is the dispatch event: every dispatch stores the cluster's name and the Slurm id in it.
    A preempted, retried or withdrawn job is requeued with no cluster and an empty executor state, and may run
    on another cluster next, so neither the job's current cluster nor its state can be joined on: the earlier
    attempts' ids would be missed and their GPU time counted again as work submitted directly. Other events
    naming a Slurm id are not read: they do not say which cluster, and the same id on another cluster is
    another job. The job's own state still names its current attempt's id."""
    ids = sorted({str(job.job_id) for job in jobs})
    if not ids:
        return {}
    keys = [*ids, *map(int, ids)]  # an id stored as a number is the same id
    found = list(Job.objects.filter(cluster=cluster, executor_state__slurm_job_id__in=ids)
                 .values_list("executor_state__slurm_job_id", "tenant_id"))
    events = JobEvent.objects.filter(to_status=JobStatus.DISPATCHING, data__cluster=cluster.name,
                                     data__slurm_job_id__in=keys)
    submitted = [job.submit_time for job in jobs if job.submit_time is not None]
    if len(submitted) == len(jobs):  # a dispatch event follows its submit: older events name other jobs
        events = events.filter(at__gte=min(submitted) - SUBMIT_CLOCK_SLACK)
    found += events.values_list("data__slurm_job_id", "job__tenant_id")
    return {int(value): tenant for value, tenant in found if str(value).isdigit()}


class ModelMap:
    """The catalogue model of a Slurm job's GPUs, as the inventory names a node's: the fleet's nodes of the
    cluster first (they were imported with their model), then the GRES type as the inventory maps it (the
    cluster's ``slurm_models``, else the catalogue's name in any case). slurmdb counts ``gres/gpu`` untyped
    unless the cluster lists the typed TRES, so a job on nodes of two models takes its first node's."""

    def __init__(self, cluster: Cluster):
        self.nodes = dict(Node.objects.filter(cluster=cluster).values_list("name", "gpu_model"))
        self.overrides = {str(k).lower(): str(v) for k, v in (cluster.slurm_models or {}).items()}
        self.catalogue = {name.lower(): name for name in accelerator_models()}

    def of(self, job: AccountedJob) -> str:
        models = [self.nodes[name] for name in job.nodes if name in self.nodes]
        if models and len(set(models)) == 1 and len(models) == len(job.nodes):
            return models[0]
        if job.gpu_type or not models:
            return model_for(job.gpu_type, self.overrides, self.catalogue)
        return models[0]


def held_interval(job: AccountedJob, now: datetime) -> tuple[datetime, datetime] | None:
    """When the job held its GPUs: from its start for slurmdb's elapsed time (a running job: until now); None
    for a job that never started or held no GPU."""
    if job.start_time is None or job.gpus <= 0:
        return None
    if job.end_time is None:
        return job.start_time, max(job.start_time, now)
    return job.start_time, job.start_time + timedelta(seconds=max(job.elapsed_seconds, 0))


def daily_pieces(jobs: Iterable[AccountedJob], t0: datetime, t1: datetime, now: datetime, model_of,
                 portal: dict[int, int | None] | None = None) -> dict[_Key, list[float]]:
    """GPU-seconds and jobs started per day and key, of the parts of ``jobs`` inside ``[t0, t1)``. A job is the
    portal's when ``portal`` (``portal_jobs``: the portal's own records) has its id, with the tenant it ran for;
    its comment alone does not make it so (``scheduling.executors.slurm.ownership`` says why)."""
    portal = portal or {}
    totals: dict[_Key, list[float]] = defaultdict(lambda: [0.0, 0])
    for job in jobs:
        interval = held_interval(job, now)
        if interval is None:
            continue
        start, end = max(interval[0], t0), min(interval[1], t1)
        model, tenant = model_of(job), portal.get(job.job_id)
        mine = job.job_id in portal  # a comment alone proves nothing: anyone may write the portal's tag
        started = t0 <= interval[0] < t1
        if started:  # counted on its first day even when it ended within the second it started
            totals[_Key(local_day(interval[0]), job.account, job.user, model, mine, tenant)][1] += 1
        for day, piece_start, piece_end in split_by_day(start, end):
            totals[_Key(day, job.account, job.user, model, mine, tenant)][0] += job.gpus * (
                piece_end - piece_start).total_seconds()
    return totals


def tenants_of(cluster: Cluster) -> dict[str, Tenant]:
    """The cluster's accounts mapped to tenants that exist (an entry naming no tenant counts as unmapped)."""
    names = {str(account): str(tenant) for account, tenant in (cluster.slurm_accounts or {}).items()}
    by_name = Tenant.objects.in_bulk(set(names.values()), field_name="name")
    return {account: by_name[name] for account, name in names.items() if name in by_name}


def import_accounting(cluster: Cluster, start: datetime, end: datetime, now: datetime | None = None,
                      jobs: list[AccountedJob] | None = None) -> AccountingImport:
    """Replace the accounting rows of the whole local days ``start``..``end`` touch with what slurmdb says.

    ``jobs`` stands in for slurmdb's answer (the pure tests); otherwise ``SlurmClient.db_jobs`` reads it, and its
    ``SlurmError`` (no slurmdbd, slurmrestd down) propagates with nothing written."""
    now = now or timezone.now()
    first_day, last_day = local_day(start), local_day(max(start, end - timedelta(microseconds=1)))
    t0, t1 = day_start(first_day), day_start(last_day + timedelta(days=1))
    if jobs is None:
        jobs = SlurmClient(cluster).db_jobs(t0, min(t1, now))
    models = ModelMap(cluster)
    totals = daily_pieces(jobs, t0, t1, now, models.of, portal_jobs(cluster, jobs))
    tenants = {account: tenant.pk for account, tenant in tenants_of(cluster).items()}
    result = AccountingImport(cluster.name, first_day, last_day, jobs_read=len(jobs))
    result.jobs_counted = sum(1 for job in jobs if _inside(held_interval(job, now), t0, t1))
    rows = [ClusterAccountingDaily(cluster=cluster, day=key.day, account=key.account, user_name=key.user_name,
                                   tenant_id=key.portal_tenant_id or tenants.get(key.account), gpu_model=key.gpu_model,
                                   from_portal=key.from_portal, gpu_seconds=seconds, jobs_started=int(started))
            for key, (seconds, started) in sorted(totals.items(), key=lambda item: _sort_key(item[0]))]
    with transaction.atomic():
        ClusterAccountingDaily.objects.filter(cluster=cluster, day__gte=first_day, day__lte=last_day).delete()
        ClusterAccountingDaily.objects.bulk_create(rows, batch_size=1000)
    result.rows = len(rows)
    for row in rows:
        if row.from_portal:
            result.portal_gpu_seconds += row.gpu_seconds
        else:
            result.outside_gpu_seconds += row.gpu_seconds
    result.unmapped_accounts = sorted({row.account for row in rows if row.tenant_id is None})
    return result


def _inside(interval: tuple[datetime, datetime] | None, t0: datetime, t1: datetime) -> bool:
    return interval is not None and interval[0] < t1 and interval[1] > t0


def _sort_key(key: _Key) -> tuple:
    return key.day, key.account, key.user_name, key.gpu_model, key.from_portal, key.portal_tenant_id or 0
