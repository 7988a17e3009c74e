"""What the non-NVIDIA backends share: running a vendor's command-line tool, and turning readings into errors.

NVML pushes critical errors as events (XIDs). The vendors' tools are read, not listened to, so these backends
find errors by comparing each reading with the one before: an uncorrectable ECC count that rose, an alarm code
that appeared, a device that the tool still lists but that no longer answers. A device the tool stops listing
altogether is reported ``lost`` without an error, like NVML's silent loss.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable

from . import DeviceBackend

logger = logging.getLogger(__name__)

#: ``runner(argv) -> stdout``; raises :class:`ToolError` when the tool fails, is missing or does not answer.
Runner = Callable[[list[str]], str]


class ToolError(Exception):
    """The vendor's tool failed, is missing or did not answer in time."""


def command_runner(tool: str, timeout: float = 10.0) -> Runner:
    """A runner that spawns ``tool`` with the given arguments, bounded by ``timeout`` seconds per call (a
    wedged driver makes these tools block; the agent must keep answering)."""

    def run(args: list[str]) -> str:
        path = shutil.which(tool)
        if path is None:
            raise ToolError(f"{tool} is not on PATH")
        try:
            done = subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
        except subprocess.TimeoutExpired as exc:
            raise ToolError(f"{tool} {' '.join(args)} did not answer within {timeout:g} s") from exc
        except OSError as exc:
            raise ToolError(f"cannot run {tool}: {exc}") from exc
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ToolError(f"{tool} {' '.join(args)} exited with {done.returncode}: {detail[0]}")
        return done.stdout

    return run


_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


def number(text, kind=float):
    """The number a reading starts with ("24576 MiB", "43.00 W", "49.0C", "35 %"), ``None`` for the tools'
    ways of saying "no value" (NA, N/A, -, empty)."""
    found = _NUMBER.match(str(text)) if text is not None else None
    if found is None:
        return None
    value = float(found.group(1))
    return int(value) if kind is int else value


class TrackedBackend(DeviceBackend):
    """A backend whose errors come from comparing readings (see the module's docstring).

    Subclasses implement :meth:`_read`, returning one dict per device the tool lists; a device that is
    listed but unreadable comes back as ``{"index", "state": "lost", "listed": True, "error"}`` with, where
    the tool says why, ``health`` and ``alarm_codes``."""

    #: Singular noun for messages ("NPU 3 ..."); the vendors' own word for their device.
    device_word = "device"

    def __init__(self):
        self.started = False
        self.init_error: str | None = None
        self._errors: deque = deque(maxlen=200)
        self._previous: dict[int, dict] = {}
        self._lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self._start()
            self.started = True
        except ToolError as exc:
            self.init_error = str(exc)
            logger.error(self.init_error)

    def _start(self) -> None:
        """Initialise (a first listing); raise :class:`ToolError` when the tool cannot be used."""

    def _read(self) -> list[dict]:
        raise NotImplementedError

    # -- readings ---------------------------------------------------------------------------------
    def gpus(self) -> list[dict]:
        if not self.started:
            return []
        try:
            listed = self._read()
        except ToolError as exc:  # the whole tool failed: every device known so far is lost
            listed = [{"index": i, "state": "lost", "listed": False, "error": str(exc)} for i in self._previous]
        by_index = {d["index"]: d for d in listed}
        for index in self._previous:  # a device the tool stopped listing is lost, silently
            by_index.setdefault(index, {"index": index, "state": "lost", "listed": False,
                                        "error": f"{self.device_word} {index} is no longer listed"})
        devices = [by_index[i] for i in sorted(by_index)]
        with self._lock:
            for device in devices:
                self._track(device)
        return [self._public(d) for d in devices]

    def _public(self, device: dict) -> dict:
        known = self._previous.get(device["index"], {})
        device = {k: v for k, v in device.items() if k != "listed"}
        device.setdefault("vendor", self.vendor)
        if device["state"] == "lost":  # a lost device still says what it was, as far as we knew it
            for key in ("uuid", "name", "model", "memory_total_mb"):
                if known.get(key) is not None:
                    device.setdefault(key, known[key])
            device.setdefault("last_xid", None)
        return device

    def _track(self, device: dict) -> None:
        index = device["index"]
        before = self._previous.get(index)
        now = time.time()
        if device["state"] == "ok":
            old = (before or {}).get("ecc_volatile_dbe")
            new = device.get("ecc_volatile_dbe")
            if before is not None and old is not None and new is not None and new > old:
                self._errors.append({"time": now, "gpu_index": index, "kind": "ecc", "xid": None, "critical": True,
                                     "message": f"{self.device_word} {index}: uncorrectable ECC errors rose "
                                                f"from {old} to {new}"})
        was_failed = (before or {}).get("state") == "lost" and (before or {}).get("listed")
        if device["state"] == "lost" and device.get("listed") and not was_failed:
            self._errors.append({"time": now, "gpu_index": index, "kind": "device_fault", "xid": None,
                                 "critical": True, "message": f"{self.device_word} {index} is listed but no longer "
                                                              f"answers ({device.get('error') or 'no reading'})"})
        old_codes = set((before or {}).get("alarm_codes") or [])
        for code in device.get("alarm_codes") or []:
            if code not in old_codes:
                severity = (device.get("health") or "").lower()
                self._errors.append({
                    "time": now, "gpu_index": index, "kind": "alarm", "xid": None, "code": code,
                    "critical": severity in ("alarm", "critical", "fault") or device["state"] == "lost",
                    "message": f"{self.device_word} {index}: alarm {code} ({device.get('health') or 'unknown'})"
                               + (f": {device['alarm_text']}" if device.get("alarm_text") else "")})
        merged = dict(before or {})
        merged.update({k: v for k, v in device.items() if v is not None or k not in merged})
        if device["state"] == "lost":
            merged["state"], merged["listed"] = "lost", device.get("listed")
            merged["alarm_codes"] = device.get("alarm_codes") or (before or {}).get("alarm_codes") or []
        self._previous[index] = merged

    def drain_errors(self) -> list[dict]:
        errors = []
        while self._errors:
            errors.append(self._errors.popleft())
        return errors


def link_name(code: str) -> str:
    """The agent's link name for a topology-matrix entry of npu-smi / hy-smi (nvidia-smi's abbreviations)."""
    code = code.strip().upper()
    return {"HCCS": "HCCS", "XGMI": "XGMI", "PIX": "PCIE_SWITCH", "PXB": "PCIE_MULTIPLE_SWITCHES",
            "PHB": "PCIE_HOST_BRIDGE", "NODE": "NUMA_NODE", "SYS": "SYSTEM", "PCIE": "PCIE_HOST_BRIDGE",
            "SIO": "SAME_BOARD"}.get(code, "UNKNOWN")
