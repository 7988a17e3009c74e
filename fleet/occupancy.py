"""What the fleet must know of the work on it, answered by the layer above.

The fleet sits below scheduling, so it never reads the job tables: which GPUs are held (for the inventory,
the capacity summary and the simulated agents' load) and by whom is asked of the provider that scheduling
registers in its ``AppConfig.ready()``. News travels the other way as signals (``fleet.signals``). With no
provider (the fleet alone), nothing is held.
"""

from __future__ import annotations

from typing import Protocol


class Occupancy(Protocol):
    def held_gpus(self) -> dict[int, set[int]]:
        """Node id -> indices of its GPUs that active work holds."""

    def holders(self, user, gpu_ids) -> dict[int, dict]:
        """GPU id -> {"job": the job or None when ``user`` may not see it, "hidden": bool}."""


class _NothingHeld:
    def held_gpus(self) -> dict[int, set[int]]:
        return {}

    def holders(self, user, gpu_ids) -> dict[int, dict]:
        return {}


_provider: Occupancy = _NothingHeld()


def register(provider: Occupancy) -> None:
    global _provider
    _provider = provider


def held_gpus() -> dict[int, set[int]]:
    return _provider.held_gpus()


def held_gpu_count(node_id: int) -> int:
    return len(held_gpus().get(node_id, ()))


def holders(user, gpu_ids) -> dict[int, dict]:
    return _provider.holders(user, list(gpu_ids))
