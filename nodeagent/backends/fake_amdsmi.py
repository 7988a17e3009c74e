"""A simulated ``amdsmi`` module: the functions of AMD's Python library the AMD backend calls, answering in
the library's shapes (dicts keyed as amdsmi keys them, ``AmdSmiLibraryException`` on failure).

``AmdSmiBackend(amdsmi=FakeAmdSmi(8))`` runs the backend's real code without an Instinct GPU. A device that
``offbus`` failed keeps its processor handle but every call on it raises (``AMDSMI_STATUS_DRM_ERROR``, what a
GPU that fell off the bus gives); a ``lost`` one is no longer among the processor handles.
"""

from __future__ import annotations

import enum
from types import SimpleNamespace

from .simulation import SimulatedDevices

MODELS = {  # market name, VRAM MiB, max socket power W
    "MI300X": ("AMD Instinct MI300X", 196592, 750),
    "MI250X": ("AMD Instinct MI250X", 131072, 500),
    "MI210": ("AMD Instinct MI210", 65520, 300),
}


class AmdSmiException(Exception):  # noqa: N818 - the library's name
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int, message: str = ""):
        super().__init__(f"Error code:\n\t{err_code} | {message}")
        self.err_code = err_code

    def get_error_code(self) -> int:
        return self.err_code


AMDSMI_STATUS_NOT_INIT = 32
AMDSMI_STATUS_DRM_ERROR = 52
AMDSMI_STATUS_INVAL = 1


class AmdSmiInitFlags(enum.IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_GPUS = 0x2


class AmdSmiTemperatureType(enum.IntEnum):
    EDGE = 0
    HOTSPOT = 1
    VRAM = 2


class AmdSmiTemperatureMetric(enum.IntEnum):
    CURRENT = 0


class AmdSmiGpuBlock(enum.IntEnum):
    UMC = 1
    SDMA = 2
    GFX = 4


class AmdSmiIoLinkType(enum.IntEnum):
    UNDEFINED = 0
    PCIEXPRESS = 1
    XGMI = 2


class _Handle:
    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return f"<fake amdsmi processor handle {self.index}>"


class FakeAmdSmi(SimulatedDevices):
    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiTemperatureType = AmdSmiTemperatureType
    AmdSmiTemperatureMetric = AmdSmiTemperatureMetric
    AmdSmiGpuBlock = AmdSmiGpuBlock
    AmdSmiIoLinkType = AmdSmiIoLinkType

    def __init__(self, count: int = 8, model: str | None = None, seed: int = 0, driver: str = "6.7.0"):
        self.model = model or "MI300X"
        self.market_name, memory_mb, max_power = MODELS.get(self.model, (self.model, 65536, 500))
        super().__init__(count, seed=seed, memory_mb=memory_mb, max_power=max_power)
        self.driver = driver
        self.handles = [_Handle(i) for i in range(count)]
        self.initialised = False
        self.energy_uj = [self.rng.randint(10**11, 10**12) for _ in range(count)]

    # -- guards -----------------------------------------------------------------------------------
    def _enter(self):
        self.wait_while_hung()
        if not self.initialised:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT, "AMDSMI_STATUS_NOT_INIT")

    def _device(self, handle) -> int:
        self._enter()
        if not isinstance(handle, _Handle):
            raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL, "AMDSMI_STATUS_INVAL")
        if self.lost[handle.index] or self.failed[handle.index]:
            raise AmdSmiLibraryException(AMDSMI_STATUS_DRM_ERROR, "AMDSMI_STATUS_DRM_ERROR")
        return handle.index

    # -- amdsmi API -------------------------------------------------------------------------------
    def amdsmi_init(self, flag=AmdSmiInitFlags.INIT_AMD_GPUS):
        self.initialised = True

    def amdsmi_shut_down(self):
        self.initialised = False

    def amdsmi_get_processor_handles(self):
        self._enter()
        return [self.handles[i] for i in self.visible()]

    def amdsmi_get_gpu_device_uuid(self, handle):
        i = self._device(handle)
        return f"{self.seed & 0xFFFFFFFF:08x}-{i:04x}-4000-8000-{0x74A1:04x}{i:08x}"

    def amdsmi_get_gpu_device_bdf(self, handle):
        i = self._device(handle)
        return f"0000:{0x0C + 0x20 * i & 0xFF:02x}:00.0"

    def amdsmi_get_gpu_asic_info(self, handle):
        self._device(handle)
        return {"market_name": self.market_name, "vendor_id": "0x1002", "vendor_name": "Advanced Micro Devices Inc.",
                "subvendor_id": "0x1002", "device_id": "0x74a1", "rev_id": "0x00", "asic_serial": "0x2A8C4E0F",
                "oam_id": handle.index, "num_of_compute_units": 304, "target_graphics_version": "gfx942"}

    def amdsmi_get_gpu_driver_info(self, handle):
        self._device(handle)
        return {"driver_name": "amdgpu", "driver_version": self.driver, "driver_date": "2015/01/01 00:00"}

    def amdsmi_get_gpu_activity(self, handle):
        i = self._device(handle)
        gfx = self.util(i)
        return {"gfx_activity": gfx, "umc_activity": gfx // 2, "mm_activity": "N/A"}

    def amdsmi_get_gpu_vram_usage(self, handle):
        i = self._device(handle)
        return {"vram_total": self.memory_mb, "vram_used": self.memory_used_mb(i)}

    def amdsmi_get_temp_metric(self, handle, sensor, metric):
        i = self._device(handle)
        if sensor == AmdSmiTemperatureType.EDGE and self.model == "MI300X":  # MI300X has no edge sensor
            raise AmdSmiLibraryException(2, "AMDSMI_STATUS_NOT_SUPPORTED")
        return self.temperature(i) + (8 if sensor == AmdSmiTemperatureType.HOTSPOT else 0)

    def amdsmi_get_power_info(self, handle):
        i = self._device(handle)
        watts = int(self.power_w(i))
        return {"current_socket_power": watts, "average_socket_power": "N/A", "gfx_voltage": 800,
                "soc_voltage": 900, "mem_voltage": 1100, "power_limit": self.max_power * 10**6}

    def amdsmi_get_energy_count(self, handle):
        i = self._device(handle)
        self.energy_uj[i] += int(self.power_w(i) * 10**6)
        return {"energy_accumulator": self.energy_uj[i] * 1000 // 15259, "counter_resolution": 15.259,
                "timestamp": 0}

    def amdsmi_get_gpu_total_ecc_count(self, handle):
        i = self._device(handle)
        return {"correctable_count": self.corrected[i], "uncorrectable_count": self.uncorrected[i],
                "deferred_count": 0}

    def amdsmi_get_gpu_ecc_count(self, handle, block):
        i = self._device(handle)
        umc = block == AmdSmiGpuBlock.UMC
        return {"correctable_count": self.corrected[i] if umc else 0,
                "uncorrectable_count": self.uncorrected[i] if umc else 0, "deferred_count": 0}

    def amdsmi_get_gpu_bad_page_info(self, handle):
        i = self._device(handle)
        return [{"value": n, "page_address": 0x1000 * n, "page_size": 4096, "status": "RESERVED"}
                for n in range(self.retired[i])]

    def amdsmi_get_gpu_process_list(self, handle):
        i = self._device(handle)
        if not self.load[i]:
            return []
        vram = (self.memory_used_mb(i) - 300) * 2**20
        return [{"name": "python3", "pid": 40000 + i, "mem": vram, "engine_usage": {"gfx": 0, "enc": 0},
                 "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": vram}}]

    def amdsmi_topo_get_link_type(self, handle_a, handle_b):
        self._device(handle_a)
        self._device(handle_b)
        return {"hops": 1, "type": AmdSmiIoLinkType.XGMI}

    def amdsmi_get_lib_version(self):
        return SimpleNamespace(year=24, major=6, minor=2, release=0)
