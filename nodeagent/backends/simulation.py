"""The fault and load state every simulated vendor device shares.

Each vendor's simulation (``fake_amdsmi``, ``fake_npusmi``, ``fake_cnmon``, ``fake_hysmi``) keeps its devices'
state here and renders it the way the vendor's own tool or library would, so the backends run their real
parsing code against it. The faults mirror the NVIDIA simulation's (``fake_nvml``) so that one ``--fault``
flag, one ``POST /fault`` and one set of tests cover every vendor:

* ``offbus`` (alias ``xid79``) — the device fails hard: the tool still lists it, marked faulty, but every
  reading of it fails (the agent reports it ``lost`` with a critical error, like NVIDIA's XID 79);
* ``dbe`` — an uncorrectable memory ECC error: the uncorrectable count and the retired pages go up;
* ``alarm`` — a warning the device raises without failing (Ascend: a health alarm code; the others:
  correctable ECC errors rising);
* ``lost`` — the device disappears from the tool's listing, with no error first;
* ``hang`` — every call of the tool blocks (a wedged driver), so the agent stops answering;
* ``clear`` — all faults gone (a repaired node).
"""

from __future__ import annotations

import random
import threading
import time

FAULTS = ("offbus", "xid79", "dbe", "alarm", "lost", "hang", "clear")


class SimulatedDevices:
    """Load, faults and counters of N simulated accelerators (readings derive from the load)."""

    def __init__(self, count: int, seed: int = 0, memory_mb: int = 65536, max_power: int = 400):
        self.count = count
        self.seed = seed
        self.memory_mb = memory_mb
        self.max_power = max_power
        self.rng = random.Random(seed)
        self.load = [self.rng.choice([0, 0, 35, 80, 95]) for _ in range(count)]
        self.lost = [False] * count
        self.failed = [False] * count  # listed but unreadable (offbus)
        self.alarm = [False] * count
        self.uncorrected = [0] * count
        self.corrected = [0] * count
        self.retired = [0] * count
        self.hung = threading.Event()

    # -- faults -----------------------------------------------------------------------------------
    def inject(self, kind: str, gpu: int = 0) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")
        if kind not in ("clear", "hang") and not 0 <= gpu < self.count:
            raise ValueError(f"gpu must be 0..{self.count - 1}")
        if kind in ("offbus", "xid79"):
            self.failed[gpu] = True
        elif kind == "dbe":
            self.uncorrected[gpu] += 1
            self.retired[gpu] += 1
        elif kind == "alarm":
            self.alarm[gpu] = True
            self.corrected[gpu] += 8
        elif kind == "lost":
            self.lost[gpu] = True
        elif kind == "hang":
            self.hung.set()
        else:
            self.hung.clear()
            self.lost = [False] * self.count
            self.failed = [False] * self.count
            self.alarm = [False] * self.count
            self.uncorrected = [0] * self.count

    def set_load(self, index: int, percent: int) -> None:
        self.load[index] = max(0, min(100, int(percent)))

    def wait_while_hung(self) -> None:
        while self.hung.is_set():
            time.sleep(0.05)

    # -- readings ---------------------------------------------------------------------------------
    def util(self, i: int) -> int:
        base = self.load[i]
        return max(0, min(100, base + self.rng.randint(-5, 5))) if base else self.rng.randint(0, 1)

    def memory_used_mb(self, i: int) -> int:
        return int(self.memory_mb * (0.15 + 0.8 * self.load[i] / 100)) if self.load[i] else 400

    def temperature(self, i: int) -> int:
        return 32 + self.load[i] // 2 + self.rng.randint(0, 3)

    def power_w(self, i: int) -> float:
        return round(70 + (self.max_power - 70) * self.load[i] / 100, 1)

    def visible(self) -> list[int]:
        """Indices the tool still lists (a lost device is gone; a failed one is listed, unreadable)."""
        return [i for i in range(self.count) if not self.lost[i]]
