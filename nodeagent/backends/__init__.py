"""Device backends: one per accelerator vendor.

A backend is any object with the methods of :class:`DeviceBackend`. To add a vendor (AMD through
ROCm SMI, Huawei Ascend through DCMI/npu-smi, other domestic cards), write a class that returns the same
dictionaries, give it the Kubernetes resource name the vendor's device plugin advertises
(``amd.com/gpu``, ``huawei.com/Ascend910``…), and register it in :data:`BACKENDS`. The agent, its HTTP
API, its metrics and the portal's poller stay as they are.
"""

from __future__ import annotations


class DeviceBackend:
    """What the agent needs from a vendor's management library."""

    #: Vendor name reported in the snapshot.
    vendor = "unknown"
    #: The extended resource the vendor's Kubernetes device plugin advertises.
    resource_name = "unknown"

    def start(self) -> None:
        """Initialise the library (and any event listener). Must not raise: record the error instead."""

    def stop(self) -> None:
        """Release the library."""

    def system_info(self) -> dict:
        """``{"driver_version", "cuda_version"}`` (or the vendor's equivalents)."""
        raise NotImplementedError

    def gpus(self) -> list[dict]:
        """Inventory and live readings per device; a device that stops answering has ``state: "lost"``."""
        raise NotImplementedError

    def processes(self) -> list[dict]:
        """``{"gpu_index", "pid", "memory_used_mb"}`` for each process on a device."""
        raise NotImplementedError

    def topology(self) -> list[dict]:
        """``{"a", "b", "link"}`` per device pair (link: NVLINK, SAME_BOARD, PCIE_SWITCH, PCIE_HOST_BRIDGE,
        NUMA_NODE, SYSTEM)."""
        raise NotImplementedError

    def drain_errors(self) -> list[dict]:
        """Critical errors seen since the last call (``{"time", "gpu_index", "kind", "xid", "message"}``)."""
        raise NotImplementedError


def make_backend(name: str, **options) -> DeviceBackend:
    # nvml.py imports DeviceBackend from this package, and the simulation is loaded only when asked for.
    from .nvml import NvmlBackend

    if name == "nvidia":
        return NvmlBackend()
    if name == "simulated":
        from .fake_nvml import FakeNvml

        return NvmlBackend(nvml=FakeNvml(**options))
    raise ValueError(f"unknown device backend {name!r}; known: nvidia, simulated")
