"""The agent: one snapshot of the node from its device backend and host counters."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from datetime import UTC, datetime

from . import VERSION
from .cgroup import owner_of
from .system import HostSampler


class Agent:
    def __init__(self, backend, node: str | None = None, labels: dict | None = None, host: HostSampler | None = None,
                 proc: str = "/proc"):
        self.backend = backend
        self.node = node or socket.gethostname()
        self.labels = dict(labels or {})
        self.host = host or HostSampler(proc=proc)
        self.proc = proc
        self.errors: deque = deque(maxlen=100)  # recent critical errors, repeated in every snapshot
        self._lock = threading.Lock()
        self._topology: list | None = None

    def start(self):
        self.backend.start()
        return self

    def stop(self):
        self.backend.stop()

    def snapshot(self) -> dict:
        with self._lock:
            gpus = self.backend.gpus()
            self.errors.extend(self.backend.drain_errors())
            if self._topology is None:
                self._topology = self.backend.topology()
            processes = []
            for proc in self.backend.processes():
                processes.append({**proc, **owner_of(proc["pid"], self.proc)})
            return {
                "agent_version": VERSION,
                "timestamp": datetime.now(UTC).isoformat(),
                "node": self.node,
                "labels": self.labels,
                "vendor": self.backend.vendor,
                "resource_name": self.backend.resource_name,
                **self.backend.system_info(),
                "gpus": gpus,
                "topology": self._topology,
                "processes": processes,
                "errors": list(self.errors),
                "host": self.host.sample(),
                "collected_at": time.time(),
            }
