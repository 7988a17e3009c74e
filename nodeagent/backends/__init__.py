"""Device backends: one per accelerator vendor.

A backend is any object with the methods of :class:`DeviceBackend`: NVIDIA through NVML (:mod:`.nvml`), AMD
Instinct through ``amdsmi`` (:mod:`.amd`), Huawei Ascend through ``npu-smi`` (:mod:`.ascend`), Cambricon
through ``cnmon`` (:mod:`.cambricon`) and Hygon through ``hy-smi`` (:mod:`.hygon`). Each returns the same
dictionaries, with the vendor and the catalogue's model name on every device, and carries the Kubernetes
resource name the vendor's device plugin advertises. To add a vendor, write such a class and a simulation of
its tool, and register both in :data:`BACKENDS` under the name the portal's record of the vendor gives as its
``agent_backend`` (``fleet/vendors.py``: the agent imports nothing of the portal, a test checks that the two
agree); the agent, its HTTP API, its metrics and the portal's poller stay as they are.

Each vendor's library or tool is loaded only when its backend is built, so a node needs only its own vendor's.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from collections.abc import Callable


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
        """Critical errors seen since the last call (``{"time", "gpu_index", "kind", "xid", "critical",
        "message"}``; kind: ``xid`` for NVIDIA, ``ecc``, ``alarm`` (with its ``code``) or ``device_fault`` for
        the vendors whose tools are read rather than listened to)."""
        raise NotImplementedError

    @property
    def simulation(self):
        """The simulated device behind this backend (it has ``inject``, ``set_load`` and ``count``), or None."""
        return None

    def inject(self, kind: str, gpu: int = 0) -> None:
        """Inject a fault into the simulated device (``ValueError`` on a real one or an unknown fault)."""
        if self.simulation is None:
            raise ValueError("fault injection needs a simulated device (--simulate N)")
        self.simulation.inject(kind, gpu)


#: name -> (module, backend class, keyword of the simulated device, module of the simulation, its class); the
#: name is the ``agent_backend`` of the vendor's record in the portal.
BACKENDS = {
    "nvidia": (".nvml", "NvmlBackend", "nvml", ".fake_nvml", "FakeNvml"),
    "amd": (".amd", "AmdSmiBackend", "amdsmi", ".fake_amdsmi", "FakeAmdSmi"),
    "ascend": (".ascend", "AscendBackend", "runner", ".fake_npusmi", "FakeNpuSmi"),
    "cambricon": (".cambricon", "CambriconBackend", "runner", ".fake_cnmon", "FakeCnmon"),
    "hygon": (".hygon", "HygonBackend", "runner", ".fake_hysmi", "FakeHySmi"),
}
#: What tells that a node has a vendor's devices, in the order detection tries them: (backend, kind, name).
#: Hygon before AMD: a DCU node may carry ROCm's libraries too; NVIDIA last: ``pynvml`` is installed everywhere
#: with the agent, so only the driver's own tool or library counts for it.
DETECTION = [("ascend", "tool", "npu-smi"), ("cambricon", "tool", "cnmon"), ("hygon", "tool", "hy-smi"),
             ("amd", "module", "amdsmi"), ("nvidia", "tool", "nvidia-smi"), ("nvidia", "library", "nvidia-ml")]
#: The backend a simulated node runs when none is named (the portal's default vendor's).
DEFAULT_BACKEND = "nvidia"


class NoBackendFound(RuntimeError):
    """No vendor's tool or library on this node: say what was looked for, and that ``--backend`` exists."""


def detect(which: Callable[[str], str | None] = shutil.which,
           has_module: Callable[[str], bool] | None = None,
           has_library: Callable[[str], bool] | None = None) -> str:
    """The backend for what this node has: the first vendor in :data:`DETECTION` whose tool is on PATH, whose
    Python module is importable or whose driver library is found. The probes are injectable for tests."""
    if has_module is None:
        def has_module(name):
            return importlib.util.find_spec(name) is not None
    if has_library is None:
        def has_library(name):
            import ctypes.util

            return ctypes.util.find_library(name) is not None
    probes = {"tool": lambda name: which(name) is not None, "module": has_module, "library": has_library}
    for backend, kind, name in DETECTION:
        if probes[kind](name):
            return backend
    looked = ", ".join(f"{name} ({kind})" for _b, kind, name in DETECTION)
    raise NoBackendFound(f"no accelerator found: none of {looked} is present; name one with --backend "
                         f"({'|'.join(BACKENDS)}) or use --simulate N")


def make_backend(name: str, simulate: int = 0, **options) -> DeviceBackend:
    """A backend by name (``nvidia``, ``amd``, ``ascend``, ``cambricon``, ``hygon``), on the real device, or on
    a simulated one with ``simulate`` devices (``options``: ``model``, ``seed``). ``"simulated"`` is the
    simulated NVIDIA node (``count``, ``model``, ``seed``), as the agent has always called it."""
    if name == "simulated":
        name, simulate = DEFAULT_BACKEND, options.pop("count", 8)
    if name not in BACKENDS:
        raise ValueError(f"unknown device backend {name!r}; known: {', '.join(BACKENDS)}, simulated")
    module, cls, keyword, fake_module, fake_cls = BACKENDS[name]
    backend_class = getattr(importlib.import_module(module, __name__), cls)
    if not simulate:
        return backend_class()
    fake = getattr(importlib.import_module(fake_module, __name__), fake_cls)
    if name == "nvidia" and options.get("model") is None:
        options.pop("model", None)  # FakeNvml's own default
    return backend_class(**{keyword: fake(simulate, **options)})
