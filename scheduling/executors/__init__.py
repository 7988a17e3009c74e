"""Executors run admitted jobs on a cluster. Each Cluster row names its executor kind."""

from .base import Executor, ExecutorUpdate
from .simulated import SimulatedExecutor


def executor_for(cluster) -> Executor:
    from ..models import ExecutorKind

    if cluster.executor == ExecutorKind.SIMULATED:
        return SimulatedExecutor(cluster)
    if cluster.executor == ExecutorKind.KUBERNETES:
        from .kubernetes import KubernetesExecutor

        return KubernetesExecutor(cluster)
    raise ValueError(f"unknown executor {cluster.executor!r} for cluster {cluster.name}")


__all__ = ["Executor", "ExecutorUpdate", "SimulatedExecutor", "executor_for"]
