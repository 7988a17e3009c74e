"""A simulated NVML library: the functions of ``pynvml`` the agent calls, answering like a real node.

``NvmlBackend(nvml=FakeNvml(8))`` runs the agent's real NVML code path without a GPU, for demos, tests and
benchmarks. Faults can be injected while it runs (:meth:`FakeNvml.inject`):

* ``xid79`` — the GPU falls off the bus: an XID 79 event, then every call on it fails with GPU_IS_LOST;
* ``dbe`` — a double-bit ECC error: volatile DBE count and retired pages go up, an XID 48 event;
* ``lost`` — the GPU stops answering, with no event;
* ``hang`` — every NVML call blocks (a wedged driver), so the agent stops answering;
* ``clear`` — all faults gone (a repaired node);
* ``offbus`` (the other vendors' name for ``xid79``) and ``alarm`` (single-bit ECC errors rising, a warning):
  the same fault names work on every vendor's simulation.
"""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import pynvml

MODELS = {  # name, memory MiB, max power W
    "H100": ("NVIDIA H100 80GB HBM3", 81559, 700),
    "A100": ("NVIDIA A100-SXM4-80GB", 81920, 400),
    "L40S": ("NVIDIA L40S", 46068, 350),
    "H200": ("NVIDIA H200", 143771, 700),
}
FAULTS = ("xid79", "offbus", "dbe", "alarm", "lost", "hang", "clear")


class _Handle:
    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return f"<fake nvml handle {self.index}>"


class FakeNvml:
    NVMLError = pynvml.NVMLError
    NVMLError_Timeout = pynvml.NVMLError_Timeout

    def __init__(self, count: int = 8, model: str = "H100", seed: int = 0, driver: str = "550.90.07",
                 cuda: int = 12040):
        self.count = count
        self.name, self.memory_mb, self.max_power = MODELS.get(model, (model, 81920, 400))
        self.driver, self.cuda = driver, cuda
        self.rng = random.Random(seed)
        self.seed = seed
        self.handles = [_Handle(i) for i in range(count)]
        self.load = [self.rng.choice([0, 0, 35, 80, 95]) for _ in range(count)]
        self.lost = [False] * count
        self.dbe = [0] * count
        self.sbe = [0] * count
        self.retired = [0] * count
        self.energy_mj = [self.rng.randint(10**8, 10**9) for _ in range(count)]
        self.hung = threading.Event()
        self.initialised = False
        self._events: list = []
        self._event_ready = threading.Condition()
        self._last = time.monotonic()

    def __getattr__(self, name):
        if name.startswith(("NVML_", "nvmlEventType", "NVMLError_")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    # -- faults -----------------------------------------------------------------------------------
    def inject(self, kind: str, gpu: int = 0) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")
        if kind != "clear" and kind != "hang" and not 0 <= gpu < self.count:
            raise ValueError(f"gpu must be 0..{self.count - 1}")
        if kind in ("xid79", "offbus"):
            self._event(gpu, 79)
            self.lost[gpu] = True
        elif kind == "dbe":
            self.dbe[gpu] += 1
            self.retired[gpu] += 1
            self._event(gpu, 48)
        elif kind == "alarm":
            self.sbe[gpu] += 8
        elif kind == "lost":
            self.lost[gpu] = True
        elif kind == "hang":
            self.hung.set()
        else:
            self.hung.clear()
            self.lost = [False] * self.count
            self.dbe = [0] * self.count

    def set_load(self, index: int, percent: int) -> None:
        self.load[index] = max(0, min(100, int(percent)))

    def _event(self, gpu, xid):
        with self._event_ready:
            self._events.append(SimpleNamespace(
                device=self.handles[gpu], eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid))
            self._event_ready.notify_all()

    # -- guards -----------------------------------------------------------------------------------
    def _enter(self):
        while self.hung.is_set():
            time.sleep(0.05)
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _device(self, handle):
        self._enter()
        if not isinstance(handle, _Handle):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self.lost[handle.index]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return handle.index

    # -- pynvml API -------------------------------------------------------------------------------
    def nvmlInit(self):
        self.initialised = True

    def nvmlShutdown(self):
        self.initialised = False

    def nvmlSystemGetDriverVersion(self):
        self._enter()
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        self._enter()
        return self.cuda

    def nvmlDeviceGetCount(self):
        self._enter()
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        self._enter()
        if not 0 <= index < self.count:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.handles[index]

    def nvmlDeviceGetUUID(self, handle):
        i = self._device(handle)
        return f"GPU-{self.seed:08x}-{i:04x}-4000-8000-{i:012x}"

    def nvmlDeviceGetName(self, handle):
        self._device(handle)
        return self.name

    def _util(self, i):
        base = self.load[i]
        return max(0, min(100, base + self.rng.randint(-5, 5))) if base else self.rng.randint(0, 1)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        i = self._device(handle)
        total = self.memory_mb * 2**20
        used = int(total * (0.15 + 0.8 * self.load[i] / 100)) if self.load[i] else 400 * 2**20
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle):
        i = self._device(handle)
        gpu = self._util(i)
        return SimpleNamespace(gpu=gpu, memory=gpu // 2)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        i = self._device(handle)
        return 32 + self.load[i] // 2 + self.rng.randint(0, 3)

    def nvmlDeviceGetPowerUsage(self, handle):
        i = self._device(handle)
        return int((70 + (self.max_power - 70) * self.load[i] / 100) * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        self._device(handle)
        return self.max_power * 1000

    def nvmlDeviceGetEccMode(self, handle):
        self._device(handle)
        return [1, 1]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        i = self._device(handle)
        now = time.monotonic()
        self.energy_mj[i] += int(self.nvmlDeviceGetPowerUsage(handle) * (now - self._last))
        self._last = now
        return self.energy_mj[i]

    def nvmlDeviceGetMigMode(self, handle):
        self._device(handle)
        return [0, 0]

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        i = self._device(handle)
        return self.dbe[i] if error_type == pynvml.NVML_DOUBLE_BIT_ECC else self.sbe[i]

    def nvmlDeviceGetRetiredPages(self, handle, cause):
        i = self._device(handle)
        return [0x1000 * n for n in range(self.retired[i])]

    def nvmlDeviceGetRemappedRows(self, handle):
        i = self._device(handle)
        return (0, self.dbe[i], int(self.dbe[i] > 0), 0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        i = self._device(handle)
        if not self.load[i]:
            return []
        used = self.nvmlDeviceGetMemoryInfo(handle).used - 300 * 2**20
        return [SimpleNamespace(pid=40000 + i, usedGpuMemory=used)]

    def nvmlDeviceGetPciInfo(self, handle):
        i = self._device(handle)
        return SimpleNamespace(busId=f"00000000:{0x18 + i * 0x10:02X}:00.0")

    def nvmlDeviceGetNvLinkState(self, handle, link):
        i = self._device(handle)
        if link >= self.count or link == i:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        self._device(handle)
        return self.nvmlDeviceGetPciInfo(self.handles[link])

    def nvmlDeviceGetTopologyCommonAncestor(self, handle_a, handle_b):
        a, b = self._device(handle_a), self._device(handle_b)
        return pynvml.NVML_TOPOLOGY_SINGLE if a // 4 == b // 4 else pynvml.NVML_TOPOLOGY_SYSTEM

    def nvmlEventSetCreate(self):
        self._enter()
        return object()

    def nvmlDeviceRegisterEvents(self, handle, event_types, event_set):
        self._device(handle)

    def nvmlEventSetWait(self, event_set, timeout_ms):
        with self._event_ready:
            if not self._events:
                self._event_ready.wait(timeout_ms / 1000)
            if not self._events:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
            return self._events.pop(0)
