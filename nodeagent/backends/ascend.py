"""Huawei Ascend NPUs through ``npu-smi``: inventory, AI-core utilisation, HBM, health and alarm codes, ECC and
the HCCS topology.

One ``npu-smi info`` per snapshot lists every chip with its health, power, temperature, AI-core use and HBM;
each chip then gets ``-t usages`` (HBM bandwidth) and ``-t ecc`` (HBM error counts), and ``-t health`` only
when its health is not OK (the query that names the alarm codes). ``-t board`` (the chip's identity) is read
once per chip. The runner is injectable: the simulation (:mod:`.fake_npusmi`) answers with canned text.
"""

from __future__ import annotations

import contextlib

from .parsers import npu_smi
from .tools import Runner, ToolError, TrackedBackend, command_runner, link_name, number


class AscendBackend(TrackedBackend):
    vendor = "huawei"
    resource_name = "huawei.com/Ascend910"
    device_word = "NPU"

    def __init__(self, runner: Runner | None = None, timeout: float = 10.0):
        super().__init__()
        self.run = runner or command_runner("npu-smi", timeout)
        self._identity: dict[tuple[int, int], dict] = {}
        self._places: dict[int, tuple[int, int]] = {}
        self._version: str | None = None

    @property
    def simulation(self):
        return self.run if hasattr(self.run, "inject") else None

    def _start(self) -> None:
        text = self.run(["info"])
        for line in text.splitlines()[:3]:
            if "Version:" in line:
                self._version = line.split("Version:", 1)[1].strip(" |") or None

    def system_info(self) -> dict:
        return {"driver_version": self._version, "cuda_version": None, "cann_version": None,
                **({"error": self.init_error} if self.init_error else {})}

    def _identity_of(self, npu: int, chip: int) -> dict:
        if (npu, chip) not in self._identity:
            board = npu_smi.parse_key_values(self.run(["info", "-t", "board", "-i", str(npu), "-c", str(chip)]))
            vdie = (board.get("VDie ID") or "").replace(" ", "")
            serial = board.get("Serial Number") or ""
            self._identity[(npu, chip)] = {
                "uuid": f"Ascend-{vdie}" if vdie else (f"Ascend-{serial}-{chip}" if serial else None),
                "serial": serial or None, "firmware_version": board.get("Firmware Version")}
        return self._identity[(npu, chip)]

    def _index_of(self, place: tuple[int, int]) -> int:
        """The agent's index of a chip: chips in the order first listed, kept when others disappear (npu-smi
        numbers NPUs and their chips; a card with two chips gives two devices)."""
        for index, known in self._places.items():
            if known == place:
                return index
        index = len(self._places)
        self._places[index] = place
        return index

    def _read(self) -> list[dict]:
        devices = []
        for chip in npu_smi.parse_info(self.run(["info"])):
            where = ["-i", str(chip["npu"]), "-c", str(chip["chip"])]
            index = self._index_of((chip["npu"], chip["chip"]))
            health = (chip["health"] or "").strip()
            alarm = {"health": health or None, "codes": [], "text": ""}
            if health.upper() != "OK":
                with contextlib.suppress(ToolError):
                    alarm = npu_smi.parse_health(self.run(["info", "-t", "health", *where]))
            base = {"index": index, "npu_id": chip["npu"], "chip_id": chip["chip"], "bus_id": chip["bus_id"],
                    "name": f"Ascend {chip['name']}", "model": npu_smi.ascend_model(chip["name"]),
                    "health": alarm["health"] or health or None, "alarm_codes": alarm["codes"],
                    "alarm_text": alarm["text"] or None}
            try:
                identity = self._identity_of(chip["npu"], chip["chip"])
                usages = npu_smi.parse_key_values(self.run(["info", "-t", "usages", *where]))
                ecc = npu_smi.parse_ecc(self.run(["info", "-t", "ecc", *where]))
            except ToolError as exc:
                devices.append({**base, "state": "lost", "listed": True, "error": str(exc)})
                continue
            total = chip["hbm_total_mb"] or chip["memory_total_mb"]
            used = chip["hbm_used_mb"] if chip["hbm_total_mb"] else chip["memory_used_mb"]
            aicore = number(usages.get("Aicore Usage Rate(%)"), int)
            devices.append({
                **base, **identity, "state": "ok", "memory_total_mb": total, "memory_used_mb": used,
                "utilization_gpu": aicore if aicore is not None else chip["aicore_percent"],
                "utilization_memory": number(usages.get("HBM Bandwidth Usage Rate(%)"), int),
                "temperature_c": chip["temperature_c"], "power_w": chip["power_w"], "energy_j": None,
                "ecc_volatile_sbe": ecc["sbe"], "ecc_volatile_dbe": ecc["dbe"], "retired_pages_dbe": ecc["dbe_pages"],
                "remapped_rows_pending": None, "remapped_rows_failure": None, "mig_mode": None, "last_xid": None})
        return devices

    def processes(self) -> list[dict]:
        if not self.started:
            return []
        try:
            rows = npu_smi.parse_processes(self.run(["info"]))
        except ToolError:
            return []
        index_of = {place: index for index, place in self._places.items()}
        return [{"gpu_index": index_of.get((r["npu"], r["chip"]), r["npu"]), "pid": r["pid"],
                 "memory_used_mb": r["memory_mb"]} for r in rows]

    def topology(self) -> list[dict]:
        if not self.started:
            return []
        try:
            return [{"a": a, "b": b, "link": link_name(code)} for a, b, code in
                    npu_smi.parse_topology(self.run(["info", "-t", "topo"]))]
        except ToolError:
            return []
