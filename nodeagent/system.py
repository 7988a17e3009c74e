"""Host readings from /proc and /sys: CPU, memory, NIC and InfiniBand throughput, storage reads.

Counters are cumulative; rates are the difference between two samples divided by the time between them,
so the first sample after start reports rates of ``None``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


class HostSampler:
    def __init__(self, proc: str = "/proc", sys: str = "/sys"):
        self.proc, self.sys = Path(proc), Path(sys)
        self._previous: dict | None = None

    def _read(self, path: Path) -> str:
        try:
            return path.read_text()
        except OSError:
            return ""

    def _cpu(self) -> tuple[int, int]:
        fields = self._read(self.proc / "stat").splitlines()[:1]
        if not fields:
            return 0, 0
        values = [int(v) for v in fields[0].split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return sum(values), idle

    def _memory(self) -> dict:
        info = {}
        for line in self._read(self.proc / "meminfo").splitlines():
            key, _sep, rest = line.partition(":")
            info[key] = int(rest.split()[0]) if rest.split() else 0
        total = info.get("MemTotal", 0)
        available = info.get("MemAvailable", info.get("MemFree", 0))
        return {"memory_total_mb": total // 1024,
                "memory_percent": round(100 * (total - available) / total, 1) if total else None}

    def _net(self) -> tuple[int, int]:
        rx = tx = 0
        root = self.sys / "class" / "net"
        for iface in (root.iterdir() if root.is_dir() else []):
            if iface.name == "lo":
                continue
            rx += int(self._read(iface / "statistics" / "rx_bytes") or 0)
            tx += int(self._read(iface / "statistics" / "tx_bytes") or 0)
        return rx, tx

    def _infiniband(self) -> tuple[int, int] | None:
        """port_rcv_data / port_xmit_data count 4-byte words; None on a node without InfiniBand ports (its
        readings then say nothing of InfiniBand rather than "0 B/s")."""
        rx = tx = 0
        ports = 0
        root = self.sys / "class" / "infiniband"
        for device in (root.iterdir() if root.is_dir() else []):
            for port in ((device / "ports").iterdir() if (device / "ports").is_dir() else []):
                ports += 1
                rx += 4 * int(self._read(port / "counters" / "port_rcv_data") or 0)
                tx += 4 * int(self._read(port / "counters" / "port_xmit_data") or 0)
        return (rx, tx) if ports else None

    def _disk_read(self) -> int:
        """Bytes read from whole disks (sectors of 512 bytes; partitions and virtual devices left out)."""
        total = 0
        for line in self._read(self.proc / "diskstats").splitlines():
            parts = line.split()
            if len(parts) < 6:
                continue
            name = parts[2]
            if name.startswith(("loop", "ram", "dm-", "md")) or (name[-1].isdigit() and not name.startswith("nvme")):
                continue
            if name.startswith("nvme") and "p" in name[4:]:
                continue
            total += int(parts[5]) * 512
        return total

    def sample(self) -> dict:
        now = time.monotonic()
        cpu_total, cpu_idle = self._cpu()
        counters = {"t": now, "cpu_total": cpu_total, "cpu_idle": cpu_idle, "net": self._net(),
                    "ib": self._infiniband(), "disk": self._disk_read()}
        result = {"cpu_count": os.cpu_count(), **self._memory(), "cpu_percent": None,
                  "net_rx_bytes_per_s": None, "net_tx_bytes_per_s": None, "ib_rx_bytes_per_s": None,
                  "ib_tx_bytes_per_s": None, "disk_read_bytes_per_s": None}
        previous, self._previous = self._previous, counters
        if previous and now > previous["t"]:
            dt = now - previous["t"]
            busy = (cpu_total - previous["cpu_total"]) - (cpu_idle - previous["cpu_idle"])
            span = cpu_total - previous["cpu_total"]
            result["cpu_percent"] = round(100 * busy / span, 1) if span > 0 else 0.0

            def rate(a, b):
                return max(0, int((a - b) / dt))

            result["net_rx_bytes_per_s"] = rate(counters["net"][0], previous["net"][0])
            result["net_tx_bytes_per_s"] = rate(counters["net"][1], previous["net"][1])
            if counters["ib"] is not None and previous["ib"] is not None:
                result["ib_rx_bytes_per_s"] = rate(counters["ib"][0], previous["ib"][0])
                result["ib_tx_bytes_per_s"] = rate(counters["ib"][1], previous["ib"][1])
            result["disk_read_bytes_per_s"] = rate(counters["disk"], previous["disk"])
        return result


class SimulatedHostSampler:
    """Plausible host readings for simulated nodes (a busy training box: high NIC/IB, steady reads)."""

    def __init__(self, seed: int = 0, busy: float = 0.5, infiniband: bool = True):
        import random

        self.rng = random.Random(seed)
        self.busy = busy
        self.infiniband = infiniband  # False: an Ethernet-only node, no InfiniBand counters

    def sample(self) -> dict:
        r, b = self.rng, self.busy
        return {"cpu_count": 128, "memory_total_mb": 2_097_152, "cpu_percent": round(5 + 60 * b + r.uniform(0, 5), 1),
                "memory_percent": round(10 + 50 * b + r.uniform(0, 3), 1),
                "net_rx_bytes_per_s": int(2e8 * b + r.uniform(0, 1e6)), "net_tx_bytes_per_s": int(1e8 * b),
                "ib_rx_bytes_per_s": int(1.2e10 * b * r.uniform(0.8, 1.0)) if self.infiniband else None,
                "ib_tx_bytes_per_s": int(1.1e10 * b) if self.infiniband else None,
                "disk_read_bytes_per_s": int(4e8 * b * r.uniform(0.5, 1.0))}
