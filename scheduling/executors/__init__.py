"""Executors run admitted jobs on a cluster. Each Cluster row names its executor kind."""

import logging

from django.utils.translation import gettext as _

from fleet.models import ExecutorKind
from scheduling.executors.base import Executor, ExecutorUpdate, LiveState
from scheduling.executors.kubernetes import KubernetesExecutor
from scheduling.executors.logs import LogTail, stored_tail
from scheduling.executors.simulated.executor import SimulatedExecutor
from scheduling.executors.slurm.executor import SlurmExecutor

logger = logging.getLogger(__name__)
EXECUTORS = {ExecutorKind.SIMULATED: SimulatedExecutor, ExecutorKind.KUBERNETES: KubernetesExecutor,
             ExecutorKind.SLURM: SlurmExecutor}


def executor_for(cluster) -> Executor:
    try:
        return EXECUTORS[cluster.executor](cluster)
    except KeyError:
        raise ValueError(f"unknown executor {cluster.executor!r} for cluster {cluster.name}") from None


def read_job_log(job, tail: int) -> LogTail:
    """The last ``tail`` lines of the job's current (or last) attempt, for the job page and the API. A job
    back in the queue has no cluster: what was kept of its last attempt. A cluster that cannot be asked
    (unreachable, its kubeconfig unreadable) is said in ``error``, never raised to the reader."""
    if job.cluster_id is None:
        return stored_tail(job, tail)
    try:
        return executor_for(job.cluster).read_log(job, tail)
    except Exception:  # whatever a cluster's client raises, the page and the API still answer
        logger.exception("reading the log of job %s failed", job.pk)
        return LogTail(job.retry_count + 1, error=_("The cluster %(c)s could not be asked for the log; the "
                                                    "portal's log says why.") % {"c": job.cluster.name})


__all__ = ["EXECUTORS", "Executor", "ExecutorUpdate", "KubernetesExecutor", "LiveState", "LogTail", "SimulatedExecutor",
           "SlurmExecutor", "executor_for", "read_job_log"]
