"""NVIDIA GPUs through NVML (the ``pynvml`` module of ``nvidia-ml-py``).

Every NVML call is guarded: an error on an optional reading leaves that field ``None``; a GPU whose
identity or memory calls fail (``GPU_IS_LOST`` and friends) is reported with ``state: "lost"``. The agent
never crashes on an NVML error. Critical XIDs arrive through an NVML event set read by a background thread.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections import deque

from . import DeviceBackend

logger = logging.getLogger(__name__)

#: XIDs that mean the hardware, not the program, is at fault (see NVIDIA's XID catalogue).
CRITICAL_XIDS = {48: "double-bit ECC error", 63: "ECC page retirement failure", 64: "ECC page retirement failure",
                 74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
                 94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout",
                 120: "GSP error"}
APPLICATION_XIDS = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing"}

_LINK_NAMES = {0: "SAME_BOARD", 10: "PCIE_SWITCH", 20: "PCIE_MULTIPLE_SWITCHES", 30: "PCIE_HOST_BRIDGE",
               40: "NUMA_NODE", 50: "SYSTEM"}


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def nvidia_model(name: str) -> str:
    """The catalogue's model for NVML's product name: ``NVIDIA H100 80GB HBM3`` -> ``H100``, ``NVIDIA
    A100-SXM4-80GB`` -> ``A100``, ``Tesla V100-SXM2-32GB`` -> ``V100``, ``NVIDIA RTX A6000`` -> ``RTX A6000``."""
    words = [w for w in (name or "").split() if w not in ("NVIDIA", "Tesla", "GeForce", "Quadro")]
    if not words:
        return (name or "").strip()
    first = re.split(r"-", words[0])[0]
    if first in ("RTX", "GTX", "TITAN") and len(words) > 1:
        return f"{first} {words[1].split('-')[0]}"
    return first


class NvmlBackend(DeviceBackend):
    vendor = "nvidia"
    resource_name = "nvidia.com/gpu"

    def __init__(self, nvml=None):
        if nvml is None:
            import pynvml as nvml
        self.nvml = nvml
        self.started = False
        self.init_error: str | None = None
        self._errors: deque = deque(maxlen=200)
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_xid: dict[int, int] = {}
        self._models: dict[int, str] = {}

    @property
    def simulation(self):
        return self.nvml if hasattr(self.nvml, "inject") else None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self.nvml.nvmlInit()
            self.started = True
        except self.nvml.NVMLError as exc:
            self.init_error = f"nvmlInit failed: {exc}"
            logger.error(self.init_error)
            return
        self._listener = threading.Thread(target=self._listen_for_xids, name="nvml-xid", daemon=True)
        self._listener.start()

    def stop(self) -> None:
        self._stop.set()
        if self.started:
            with contextlib.suppress(self.nvml.NVMLError):
                self.nvml.nvmlShutdown()
            self.started = False

    def _call(self, fn, *args, default=None):
        try:
            return fn(*args)
        except self.nvml.NVMLError:
            return default

    def _count(self) -> int:
        return self._call(self.nvml.nvmlDeviceGetCount, default=0) if self.started else 0

    def _handle(self, index):
        return self._call(self.nvml.nvmlDeviceGetHandleByIndex, index)

    # -- readings ---------------------------------------------------------------------------------
    def system_info(self) -> dict:
        if not self.started:
            return {"driver_version": None, "cuda_version": None, "error": self.init_error}
        cuda = self._call(self.nvml.nvmlSystemGetCudaDriverVersion)
        return {"driver_version": _text(self._call(self.nvml.nvmlSystemGetDriverVersion)),
                "cuda_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None}

    def gpus(self) -> list[dict]:
        return [self._gpu(index) for index in range(self._count())]

    def _gpu(self, index: int) -> dict:
        nvml = self.nvml
        handle = self._handle(index)
        try:
            if handle is None:
                raise nvml.NVMLError(nvml.NVML_ERROR_GPU_IS_LOST)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            name = _text(nvml.nvmlDeviceGetName(handle))
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        except nvml.NVMLError as exc:
            lost = {"index": index, "state": "lost", "error": str(exc), "last_xid": self._last_xid.get(index),
                    "vendor": self.vendor}
            return {**lost, "model": self._models[index]} if index in self._models else lost
        self._models[index] = nvidia_model(name)
        utilization = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
        power = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
        power_limit = self._call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        ecc = self._call(nvml.nvmlDeviceGetEccMode, handle)  # (current, pending); NOT_SUPPORTED on most consumer cards
        energy = self._call(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        mig = self._call(nvml.nvmlDeviceGetMigMode, handle)
        remapped = self._call(nvml.nvmlDeviceGetRemappedRows, handle)
        retired = self._call(nvml.nvmlDeviceGetRetiredPages, handle,
                             nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        return {
            "index": index, "uuid": uuid, "name": name, "model": self._models[index], "vendor": self.vendor,
            "state": "ok",
            "memory_total_mb": memory.total // 2**20, "memory_used_mb": memory.used // 2**20,
            "utilization_gpu": getattr(utilization, "gpu", None),
            "utilization_memory": getattr(utilization, "memory", None),
            "temperature_c": self._call(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": round(power / 1000, 1) if power is not None else None,
            "power_limit_w": round(power_limit / 1000, 1) if power_limit is not None else None,
            "energy_j": round(energy / 1000, 1) if energy is not None else None,
            "mig_mode": mig[0] if isinstance(mig, (list, tuple)) else mig,
            "ecc_mode": ecc[0] if isinstance(ecc, (list, tuple)) else ecc,
            "ecc_volatile_sbe": self._call(nvml.nvmlDeviceGetTotalEccErrors, handle, nvml.NVML_SINGLE_BIT_ECC,
                                           nvml.NVML_VOLATILE_ECC),
            "ecc_volatile_dbe": self._call(nvml.nvmlDeviceGetTotalEccErrors, handle, nvml.NVML_DOUBLE_BIT_ECC,
                                           nvml.NVML_VOLATILE_ECC),
            "retired_pages_dbe": len(retired) if retired is not None else None,
            "remapped_rows_pending": bool(remapped[2]) if remapped else None,
            "remapped_rows_failure": bool(remapped[3]) if remapped else None,
            "last_xid": self._last_xid.get(index),
        }

    def processes(self) -> list[dict]:
        rows = []
        for index in range(self._count()):
            handle = self._handle(index)
            for proc in self._call(self.nvml.nvmlDeviceGetComputeRunningProcesses, handle, default=[]) or []:
                used = getattr(proc, "usedGpuMemory", None)
                rows.append({"gpu_index": index, "pid": proc.pid,
                             "memory_used_mb": used // 2**20 if isinstance(used, int) else None})
        return rows

    def topology(self) -> list[dict]:
        count = self._count()
        handles = [self._handle(i) for i in range(count)]
        links = []
        for a in range(count):
            for b in range(a + 1, count):
                if handles[a] is None or handles[b] is None:
                    continue
                link = self._nvlink_between(handles[a], handles[b])
                if link is None:
                    level = self._call(self.nvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])
                    link = _LINK_NAMES.get(level, "UNKNOWN")
                links.append({"a": a, "b": b, "link": link})
        return links

    def _nvlink_between(self, handle_a, handle_b):
        """NVLINK when any active link of A reaches B's PCI bus."""
        nvml = self.nvml
        target = self._call(nvml.nvmlDeviceGetPciInfo, handle_b)
        if target is None:
            return None
        for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
            if self._call(nvml.nvmlDeviceGetNvLinkState, handle_a, link) != 1:
                continue
            remote = self._call(nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle_a, link)
            if remote is not None and _text(remote.busId) == _text(target.busId):
                return "NVLINK"
        return None

    # -- XID events -------------------------------------------------------------------------------
    def drain_errors(self) -> list[dict]:
        errors = []
        while self._errors:
            errors.append(self._errors.popleft())
        return errors

    def _listen_for_xids(self) -> None:
        nvml = self.nvml
        try:
            event_set = nvml.nvmlEventSetCreate()
            for index in range(self._count()):
                handle = self._handle(index)
                try:
                    nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
                except nvml.NVMLError as exc:
                    logger.warning("GPU %d: XID events unavailable (%s)", index, exc)
        except nvml.NVMLError as exc:
            logger.warning("XID event set unavailable: %s", exc)
            return
        uuids = {}
        while not self._stop.is_set():
            try:
                data = nvml.nvmlEventSetWait(event_set, 500)
            except nvml.NVMLError_Timeout:
                continue
            except nvml.NVMLError as exc:
                logger.warning("nvmlEventSetWait: %s", exc)
                time.sleep(1)
                continue
            xid = int(data.eventData)
            index = self._index_of(data.device, uuids)
            self._last_xid[index] = xid
            meaning = CRITICAL_XIDS.get(xid) or APPLICATION_XIDS.get(xid) or "see NVIDIA's XID catalogue"
            self._errors.append({"time": time.time(), "gpu_index": index, "kind": "xid", "xid": xid,
                                 "critical": xid in CRITICAL_XIDS, "message": f"XID {xid}: {meaning}"})

    def _index_of(self, handle, cache) -> int:
        for index in range(self._count()):
            if cache.get(index) is None:
                cache[index] = self._handle(index)
            if cache[index] == handle:
                return index
        return -1
