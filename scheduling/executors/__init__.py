"""Executors run admitted jobs on a cluster. Each Cluster row names its executor kind."""

from .base import Executor, ExecutorUpdate
from .simulated import SimulatedExecutor


def executor_for(cluster) -> Executor:
    from ..models import ExecutorKind

    if cluster.executor == ExecutorKind.SIMULATED:
        return SimulatedExecutor(cluster)
    raise NotImplementedError(f"executor {cluster.executor!r} arrives with the Kubernetes dispatch issue")


__all__ = ["Executor", "ExecutorUpdate", "SimulatedExecutor", "executor_for"]
