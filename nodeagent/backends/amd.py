"""AMD Instinct GPUs through ``amdsmi``, AMD's Python library for its SMI (shipped with ROCm).

``amdsmi`` is imported only when this backend is built for a real node, so the agent runs without it
elsewhere; the simulation (:mod:`.fake_amdsmi`) is a module-like object with the same functions. Every call is
guarded like the NVML backend's: an optional reading that fails leaves its field ``None``; a GPU whose identity
or VRAM calls fail is ``lost`` (still among the processor handles: a failed device, reported with an error; gone
from them: lost silently). RAS (uncorrectable ECC) errors are found by comparing readings.
"""

from __future__ import annotations

import contextlib
import re

from .tools import ToolError, TrackedBackend


def amd_model(market_name: str) -> str:
    """The catalogue's model for amdsmi's market name: ``AMD Instinct MI300X`` -> ``MI300X``."""
    found = re.search(r"\b(MI\d+[A-Z]*)\b", market_name or "")
    return found.group(1) if found else (market_name or "").strip()


def _value(reading):
    """amdsmi says ``"N/A"`` for a value the device does not report."""
    return reading if isinstance(reading, (int, float)) and not isinstance(reading, bool) else None


def _key(handle):
    value = getattr(handle, "value", None)
    return value if isinstance(value, int) else id(handle)


class AmdSmiBackend(TrackedBackend):
    vendor = "amd"
    resource_name = "amd.com/gpu"
    device_word = "GPU"

    def __init__(self, amdsmi=None):
        super().__init__()
        if amdsmi is None:
            import amdsmi  # noqa: PLC0415 - optional: present only on AMD nodes
        self.amdsmi = amdsmi
        self._known_handles: dict[int, object] = {}

    @property
    def simulation(self):
        return self.amdsmi if hasattr(self.amdsmi, "inject") else None

    def _start(self) -> None:
        lib = self.amdsmi
        try:
            lib.amdsmi_init(lib.AmdSmiInitFlags.INIT_AMD_GPUS)
        except lib.AmdSmiException as exc:
            raise ToolError(f"amdsmi_init failed: {exc}") from exc

    def stop(self) -> None:
        if self.started:
            with contextlib.suppress(self.amdsmi.AmdSmiException):
                self.amdsmi.amdsmi_shut_down()
            self.started = False

    def _call(self, fn, *args, default=None):
        try:
            return fn(*args)
        except self.amdsmi.AmdSmiException:
            return default

    def _handles(self) -> dict[int, object]:
        """Handles by index. amdsmi has no stable index of its own, so the order of the first listing is kept
        and a handle that later goes missing leaves its index empty. Handles are ctypes pointers, new objects
        at each call: they are matched by the address they hold."""
        handles = self._call(self.amdsmi.amdsmi_get_processor_handles, default=[]) or []
        known = {_key(h): i for i, h in self._known_handles.items()}
        current = {}
        for handle in handles:
            index = known.get(_key(handle))
            if index is None:  # first listing, or a device that appeared later (hot-add, back from a reset)
                index = max(self._known_handles, default=-1) + 1
            self._known_handles[index] = current[index] = handle
        return current

    def system_info(self) -> dict:
        if not self.started:
            return {"driver_version": None, "cuda_version": None, "error": self.init_error}
        driver = None
        for handle in self._handles().values():
            driver = (self._call(self.amdsmi.amdsmi_get_gpu_driver_info, handle) or {}).get("driver_version")
            if driver:
                break
        return {"driver_version": driver, "cuda_version": None}

    def _read(self) -> list[dict]:
        return [self._gpu(index, handle) for index, handle in sorted(self._handles().items())]

    def _gpu(self, index: int, handle) -> dict:
        lib = self.amdsmi
        try:
            asic = lib.amdsmi_get_gpu_asic_info(handle)
            uuid = lib.amdsmi_get_gpu_device_uuid(handle)
            vram = lib.amdsmi_get_gpu_vram_usage(handle)
        except lib.AmdSmiException as exc:
            return {"index": index, "state": "lost", "listed": True, "error": " ".join(str(exc).split())}
        activity = self._call(lib.amdsmi_get_gpu_activity, handle) or {}
        power = self._call(lib.amdsmi_get_power_info, handle) or {}
        watts = _value(power.get("average_socket_power")) or _value(power.get("current_socket_power"))
        energy = self._call(lib.amdsmi_get_energy_count, handle) or {}
        accumulated = _value(energy.get("energy_accumulator", energy.get("power")))
        resolution = _value(energy.get("counter_resolution"))
        ecc = self._call(lib.amdsmi_get_gpu_total_ecc_count, handle) or {}
        bad_pages = self._call(lib.amdsmi_get_gpu_bad_page_info, handle)
        temperature = None
        for sensor in (lib.AmdSmiTemperatureType.EDGE, lib.AmdSmiTemperatureType.HOTSPOT):
            temperature = self._call(lib.amdsmi_get_temp_metric, handle, sensor,
                                     lib.AmdSmiTemperatureMetric.CURRENT)
            if temperature is not None:
                break
        name = asic.get("market_name") or ""
        return {
            "index": index, "uuid": str(uuid), "name": name, "model": amd_model(name), "state": "ok",
            "bus_id": self._call(lib.amdsmi_get_gpu_device_bdf, handle),
            "memory_total_mb": _value(vram.get("vram_total")), "memory_used_mb": _value(vram.get("vram_used")),
            "utilization_gpu": _value(activity.get("gfx_activity")),
            "utilization_memory": _value(activity.get("umc_activity")),
            "temperature_c": _value(temperature), "power_w": watts,
            "energy_j": round(accumulated * resolution / 1e6, 1) if accumulated and resolution else None,
            "ecc_volatile_sbe": _value(ecc.get("correctable_count")),
            "ecc_volatile_dbe": _value(ecc.get("uncorrectable_count")),
            "ecc_deferred": _value(ecc.get("deferred_count")),
            "retired_pages_dbe": len(bad_pages) if isinstance(bad_pages, list) else None,
            "remapped_rows_pending": None, "remapped_rows_failure": None, "mig_mode": None, "last_xid": None,
        }

    def processes(self) -> list[dict]:
        if not self.started:
            return []
        rows = []
        for index, handle in sorted(self._handles().items()):
            for proc in self._call(self.amdsmi.amdsmi_get_gpu_process_list, handle, default=[]) or []:
                if not isinstance(proc, dict):  # amdsmi before 6.1 listed bare handles
                    continue
                vram = _value((proc.get("memory_usage") or {}).get("vram_mem"))
                rows.append({"gpu_index": index, "pid": proc.get("pid"),
                             "memory_used_mb": vram // 2**20 if vram is not None else None})
        return rows

    def topology(self) -> list[dict]:
        if not self.started:
            return []
        lib = self.amdsmi
        handles = sorted(self._handles().items())
        xgmi = getattr(getattr(lib, "AmdSmiIoLinkType", None), "XGMI", 2)
        links = []
        for n, (a, handle_a) in enumerate(handles):
            for b, handle_b in handles[n + 1:]:
                found = self._call(lib.amdsmi_topo_get_link_type, handle_a, handle_b) or {}
                kind = found.get("type")
                hops = found.get("hops")
                if kind == xgmi or str(kind).upper().endswith("XGMI"):
                    link = "XGMI"
                elif kind is None:
                    link = "UNKNOWN"
                else:
                    link = "PCIE_SWITCH" if hops == 1 else "SYSTEM"
                links.append({"a": a, "b": b, "link": link})
        return links
