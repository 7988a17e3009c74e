"""Shared by the fault-injection suite: the invariants every scenario must leave behind, the summary that
``make test`` prints, a real Celery worker that can be SIGKILLed, and misbehaving agents.

Why one ``check_invariants``: each scenario injects a different fault, but what "nothing stuck, nothing lost,
nothing twice" means is the same everywhere (docs/reliability.md); stating it once keeps the scenarios
honest and comparable. The statement itself lives in ``bench.invariants``, which the chaos soak
(``manage.py chaos_soak``) reports on too, so the suite and the soak cannot drift apart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime

import redis
from celery import Celery
from django.conf import settings
from django.utils import timezone

from bench import invariants
from bench.invariants import LATER
from gpuportal.storage.db import database_url

#: Redis database of the suite's workers: not 15, which tests/scheduling/passes/test_celery_worker.py flushes.
REDIS_URL = os.environ.get("GPUPORTAL_FAULTS_REDIS_URL", "redis://127.0.0.1:6379/13")

#: What each scenario injected and found, printed at the end of the run (conftest.py).
SUMMARY: list[str] = []


def record(line: str) -> None:
    SUMMARY.append(f"FAULTS: {line}")


# --- invariants ---------------------------------------------------------------------------------------------

def check_invariants(now: datetime | None = None, submitted: dict[str, list[int]] | None = None) -> dict:
    """Reconcile at ``now`` (default: past every bound), read the clusters once, then assert the invariants
    (``bench.invariants``, shared with the chaos soak):

    * every job's status is legal and its status events form a legal path through ``ALLOWED_TRANSITIONS``;
    * no open GPU allocation belongs to a job that is not active, and no GPU is held more than once over;
    * no job is ``admitted`` past the bound, nor ``dispatching`` past it without its objects on the cluster;
    * every submission answered 201 (``submitted``: submission -> ids answered) is stored exactly once, and
      every job in the database is one of them;
    * ``verify_audit``'s check reports the chain intact.

    Returns what the reconcile repaired and what was counted, for the summary line."""
    now = now or timezone.now() + LATER
    repaired = invariants.settle(now)
    findings = invariants.examine(now, submitted)
    problems = findings.problems()
    assert problems == [], "\n".join(problems[:30])
    statuses = defaultdict(int)
    for job in findings.jobs:
        statuses[job.status] += 1
    return {"repairs": len(repaired.repairs), "counts": repaired.as_dict()["counts"], "jobs": len(findings.jobs),
            "statuses": dict(statuses), "audit_records": findings.chain.checked}


def found(result: dict) -> str:
    """The summary's "what it found" part."""
    counts = ", ".join(f"{k} {v}" for k, v in result["counts"].items() if v) or "nothing"
    states = ", ".join(f"{n} {s}" for s, n in sorted(result["statuses"].items()))
    return f"reconcile repaired {result['repairs']} ({counts}); {result['jobs']} jobs ({states}); " \
           f"audit chain intact ({result['audit_records']} records); invariants OK"


# --- a real Celery worker -----------------------------------------------------------------------------------

def celery_env(extra: dict | None = None) -> dict:
    """The environment of a Celery process (worker or beat) on this test's database and ``REDIS_URL``."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings", "CELERY_BROKER_URL": REDIS_URL,
            "CELERY_RESULT_BACKEND": REDIS_URL, "CELERY_TASK_ALWAYS_EAGER": "0", "DATABASE_URL": database_url(),
            **(extra or {})}


class Worker:
    """``celery -A gpuportal worker --pool=solo`` on this test's database and ``REDIS_URL``, with a short
    visibility timeout (tests/faults/worker_settings.py) so that Redis hands an unacknowledged message to
    another worker within seconds of its worker's death."""

    def __init__(self, name: str, extra_env: dict | None = None):
        env = celery_env(extra_env)
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", "--pool=solo", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "INFO", "-n", f"{name}@%h"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=settings.BASE_DIR)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_ready(self, timeout: float = 60) -> Worker:
        deadline = time.monotonic() + timeout
        while not any("ready." in line for line in self.lines):
            assert self.process.poll() is None, "".join(self.lines[-40:])
            assert time.monotonic() < deadline, "worker did not start: " + "".join(self.lines[-40:])
            time.sleep(0.1)
        return self

    def received(self, task: str) -> int:
        return sum(1 for line in self.lines if "Task " + task in line and "received" in line)

    def kill(self) -> None:
        """SIGKILL: no warm shutdown, no message given back, no transaction finished."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def broker_client() -> Celery:
    """A Celery client of ``REDIS_URL`` that leaves the app under test (eager) alone."""
    redis.Redis.from_url(REDIS_URL).flushdb()
    return Celery(broker=REDIS_URL, backend=REDIS_URL, set_as_current=False)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)
    return value


# --- misbehaving agents -------------------------------------------------------------------------------------



def dripping(stop: threading.Event):
    """An answer one byte every 0.2 s (no single read ever times out) until ``stop`` is set."""
    def respond(sock):
        for byte in b'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{"gpus": []}':
            sock.sendall(bytes([byte]))
            if stop.wait(0.2):
                return
    return respond


def garbage(sock):
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 24\r\n\r\n\x00\xff{not json at all]]\x01\x02")


def huge(sock):
    """A 'snapshot' of ten megabytes, sent until the poller hangs up."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + b'{"gpus": [' + b" " * 100_000)
    for _ in range(100):
        sock.sendall(b" " * 100_000)
