"""Hygon DCUs through ``hy-smi`` (ROCm-SMI-like): inventory, utilisation, VRAM, temperature, power, RAS/ECC
health and the xGMI topology.

One ``hy-smi`` call per snapshot with every ``--show`` option the agent needs. A DCU listed with ``N/A`` VRAM
is failed (``lost`` with a critical error); one no longer listed is lost silently. Process attribution per DCU
is not read yet: ``processes()`` is empty.
"""

from __future__ import annotations

from .parsers import hy_smi
from .tools import Runner, ToolError, TrackedBackend, command_runner, link_name

QUERY = ["--showproductname", "--showuniqueid", "--showmeminfo", "vram", "--showuse", "--showtemp", "--showpower",
         "--showrasinfo", "all"]


class HygonBackend(TrackedBackend):
    vendor = "hygon"
    resource_name = "hygon.com/dcu"
    device_word = "DCU"

    def __init__(self, runner: Runner | None = None, timeout: float = 10.0):
        super().__init__()
        self.run = runner or command_runner("hy-smi", timeout)

    @property
    def simulation(self):
        return self.run if hasattr(self.run, "inject") else None

    def _start(self) -> None:
        self.run(["--showproductname"])

    def system_info(self) -> dict:
        return {"driver_version": None, "cuda_version": None,
                **({"error": self.init_error} if self.init_error else {})}

    def _read(self) -> list[dict]:
        devices = []
        for index, device in sorted(hy_smi.parse_devices(self.run(QUERY)).items()):
            reading = hy_smi.device_reading(device)
            series = reading.pop("name") or ""
            base = {"index": index, "name": f"Hygon {series}".strip(), "model": hy_smi.dcu_model(series)}
            if reading["memory_total_mb"] is None:
                devices.append({**base, "state": "lost", "listed": True,
                                "error": "hy-smi lists the DCU without readings (N/A)"})
                continue
            uuid = reading.pop("uuid")
            devices.append({**reading, **base, "uuid": f"DCU-{uuid}" if uuid else None, "state": "ok",
                            "utilization_memory": None, "energy_j": None, "retired_pages_dbe": None,
                            "remapped_rows_pending": None, "remapped_rows_failure": None, "mig_mode": None,
                            "last_xid": None})
        return devices

    def processes(self) -> list[dict]:
        return []

    def topology(self) -> list[dict]:
        if not self.started:
            return []
        try:
            text = self.run(["--showtopotype"])
        except ToolError:
            return []
        return [{"a": a, "b": b, "link": link_name(code)} for a, b, code in hy_smi.parse_matrix(text)]
