"""Executors run admitted jobs on a cluster. Each Cluster row names its executor kind."""

from fleet.models import ExecutorKind

from .base import Executor, ExecutorUpdate
from .kubernetes import KubernetesExecutor
from .simulated import SimulatedExecutor

EXECUTORS = {ExecutorKind.SIMULATED: SimulatedExecutor, ExecutorKind.KUBERNETES: KubernetesExecutor}


def executor_for(cluster) -> Executor:
    try:
        return EXECUTORS[cluster.executor](cluster)
    except KeyError:
        raise ValueError(f"unknown executor {cluster.executor!r} for cluster {cluster.name}") from None


__all__ = ["EXECUTORS", "Executor", "ExecutorUpdate", "KubernetesExecutor", "SimulatedExecutor", "executor_for"]
