"""What the fleet must know of the work on it, answered by the layer above.

The fleet sits below scheduling, so it never reads the job tables: which GPUs are held (for the inventory,
the capacity summary and the simulated agents' load) and by whom is asked of the provider that scheduling
registers in its ``AppConfig.ready()``. News travels the other way as signals (``fleet.signals``). With no
provider (the fleet alone), nothing is held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Headroom:
    """What one of the reader's tenants holds of a GPU model and may hold, and what other tenants'
    reservations keep from it now (``reserved_by``: the tenant whose reservation ends last, and when)."""

    tenant: str
    gpu_model: str
    used: int
    guaranteed: int
    limit: int
    reserved_for_others: int = 0
    reserved_by: str = ""
    reserved_until: float = 0.0


@dataclass(frozen=True)
class NodeWork:
    """One active job holding GPUs of a node: what a cordon or drain of the node would touch."""

    job_id: int
    name: str
    tenant: str
    owner: str
    status: str
    gpus: int  # of this node


class Occupancy(Protocol):
    def held_gpus(self) -> dict[int, set[int]]:
        """Node id -> indices of its GPUs that active work holds."""

    def holders(self, user, gpu_ids) -> dict[int, dict]:
        """GPU id -> {"job": the job or None when ``user`` may not see it, "hidden": bool}."""

    def headroom(self, user) -> list[Headroom]:
        """For each quota of ``user``'s tenants: what is held, the guarantee, the limit, others' reservations."""

    def work_on(self, node_id: int) -> list[NodeWork]:
        """The active jobs holding GPUs of the node, with how many of its GPUs each holds."""


class _NothingHeld:
    def held_gpus(self) -> dict[int, set[int]]:
        return {}

    def holders(self, user, gpu_ids) -> dict[int, dict]:
        return {}

    def headroom(self, user) -> list[Headroom]:
        return []

    def work_on(self, node_id: int) -> list[NodeWork]:
        return []


_provider: Occupancy = _NothingHeld()


def register(provider: Occupancy) -> None:
    global _provider
    _provider = provider


def held_gpus() -> dict[int, set[int]]:
    return _provider.held_gpus()


def holders(user, gpu_ids) -> dict[int, dict]:
    return _provider.holders(user, list(gpu_ids))


def headroom(user) -> list[Headroom]:
    return _provider.headroom(user)


def work_on(node_id: int) -> list[NodeWork]:
    return _provider.work_on(node_id)
