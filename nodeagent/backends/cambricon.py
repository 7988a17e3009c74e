"""Cambricon MLUs through ``cnmon info``: inventory, utilisation, memory, power, temperature and ECC health.

One ``cnmon info`` per snapshot reads every card. A card that is listed with ``N/A`` memory is failed
(reported ``lost`` with a critical error); a card that stops being listed is lost silently. cnmon's process
and MLU-Link views are not read yet: ``processes()`` and ``topology()`` are empty.
"""

from __future__ import annotations

from .parsers import cnmon
from .tools import Runner, TrackedBackend, command_runner


class CambriconBackend(TrackedBackend):
    vendor = "cambricon"
    resource_name = "cambricon.com/mlu"
    device_word = "MLU"

    def __init__(self, runner: Runner | None = None, timeout: float = 10.0):
        super().__init__()
        self.run = runner or command_runner("cnmon", timeout)
        self._driver: str | None = None

    @property
    def simulation(self):
        return self.run if hasattr(self.run, "inject") else None

    def _start(self) -> None:
        self.run(["info"])

    def system_info(self) -> dict:
        return {"driver_version": self._driver, "cuda_version": None,
                **({"error": self.init_error} if self.init_error else {})}

    def _read(self) -> list[dict]:
        devices = []
        for index, fields in sorted(cnmon.parse_info(self.run(["info"])).items()):
            reading = cnmon.card_reading(fields)
            self._driver = reading.pop("driver_version") or self._driver
            name = reading["name"] or ""
            base = {"index": index, "name": f"Cambricon {name}".strip(), "model": cnmon.mlu_model(name)}
            if reading["memory_total_mb"] is None:
                devices.append({**base, "state": "lost", "listed": True, "health": reading["health"],
                                "error": "cnmon lists the card without readings (N/A)"})
                continue
            uuid = reading.pop("uuid") or (f"MLU-{reading['serial']}" if reading["serial"] else None)
            devices.append({**reading, **base, "uuid": uuid, "state": "ok", "utilization_memory": None,
                            "energy_j": None, "retired_pages_dbe": None, "remapped_rows_pending": None,
                            "remapped_rows_failure": None, "mig_mode": None, "last_xid": None})
        return devices

    def processes(self) -> list[dict]:
        return []

    def topology(self) -> list[dict]:
        return []

