"""Which Slurm jobs are the portal's: those whose id the portal stored for the portal job their comment names.

The comment (``gpuportal job N attempt M``) only names a candidate: anyone may submit a job with that comment
through ``sbatch``, and a job the portal trusted by its comment would be hidden from the inventory and
cancelled by the reconciler. So a Slurm job is the portal's only when the portal stored its id for job N on
this cluster: in the job's ``executor_state`` (its current attempt) or in the data of the event that marked that
attempt dispatching (it keeps the id and the cluster's name after a requeue empties the job's state). Everything
else is work submitted to Slurm directly, whatever its comment says."""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.executors.slurm.script import portal_job_of
from scheduling.executors.slurm.shapes import SlurmJob
from scheduling.models import Job, JobEvent


def portal_jobs_of(cluster, slurm_jobs: Iterable[SlurmJob]) -> dict[int, int]:
    """Slurm job id → portal job id, for the given Slurm jobs of ``cluster`` that are the portal's (one query
    for all)."""
    named = {job.job_id: found[0] for job in slurm_jobs if (found := portal_job_of(job.comment))}
    if not named:
        return {}
    # the id is stored as text by the executor and as a number in some events' data: ask for both
    ids = [*named, *(str(slurm_id) for slurm_id in named)]
    owners = set(named.values())
    current = Job.objects.filter(pk__in=owners, cluster=cluster, executor_state__slurm_job_id__in=ids).values_list(
        "pk", "executor_state__slurm_job_id")
    past = JobEvent.objects.filter(job_id__in=owners, data__cluster=cluster.name, data__slurm_job_id__in=ids
                                   ).values_list("job_id", "data__slurm_job_id")
    stored = {(owner, int(slurm_id)) for owner, slurm_id in current.union(past)}
    return {slurm_id: owner for slurm_id, owner in named.items() if (owner, slurm_id) in stored}
