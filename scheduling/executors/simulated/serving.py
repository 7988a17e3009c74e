"""Notebooks and service replicas on the simulated cluster: real local HTTP servers (``standin``).

Each running notebook or replica is one stand-in process, recorded in the job's executor state
(``serving``: pid, port, its pid file, restarts). The pid file is the process's lease: removing it stops the
process within a fraction of a second, so ``stop_all`` (tests, a demo reset) leaves nothing behind even when
the process that started it is gone. A replica whose process died is restarted, as a Deployment restarts its
container, and the restarts are counted; a notebook whose server died fails, as its pod would.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from scheduling.jobs.tokens import notebook_token
from scheduling.models import WorkloadKind

#: How long a stand-in may take to listen before its start counts as failed.
START_TIMEOUT_SECONDS = 10.0
#: How long a probe waits for a stand-in's answer (the job page and the API wait for it).
PROBE_TIMEOUT_SECONDS = 1.0


def run_dir() -> Path:
    path = Path(getattr(settings, "SIMULATION_STANDIN_DIR", settings.BASE_DIR / "var" / "standins"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def base_url(job) -> str:
    """Where the portal's proxy serves the notebook (the server takes it as its base URL, as Jupyter does)."""
    return f"/jobs/{job.pk}/open/"


def start(job, restarts: int = 0, ready_after: float = 0.0, crash_after: float = 0.0) -> dict:
    """Start the stand-in of ``job``'s current attempt; returns the ``serving`` state to keep."""
    directory = run_dir()
    stem = f"job-{job.pk}-a{job.retry_count}-r{restarts}"
    port_file, pid_file = (directory / f"{stem}.{ext}" for ext in ("port", "pid"))
    log_file = directory / f"job-{job.pk}-a{job.retry_count}.log"  # one log per attempt, across restarts
    port_file.unlink(missing_ok=True)
    pid_file.write_text("starting")
    is_notebook = job.kind == WorkloadKind.NOTEBOOK
    command = [sys.executable, str(Path(__file__).with_name("standin.py")), "--mode",
               "notebook" if is_notebook else "service", "--job", str(job.pk), "--image", job.image,
               "--revision", str(job.revision or 1), "--port-file", str(port_file), "--pid-file", str(pid_file),
               "--ready-after", str(ready_after), "--crash-after", str(crash_after)]
    if is_notebook:
        command += ["--token", notebook_token(job), "--base-url", base_url(job)]
    with open(log_file, "ab") as log:
        process = subprocess.Popen(command, cwd=settings.BASE_DIR, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                   start_new_session=True, close_fds=True)
    pid_file.write_text(str(process.pid))
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            pid_file.unlink(missing_ok=True)
            return {"pid": process.pid, "port": None, "pid_file": str(pid_file), "log_file": str(log_file),
                    "restarts": restarts, "started_at": datetime.now(UTC).isoformat()}
        time.sleep(0.02)
    return {"pid": process.pid, "port": int(port_file.read_text()), "pid_file": str(pid_file),
            "log_file": str(log_file), "restarts": restarts, "started_at": datetime.now(UTC).isoformat()}


def _reap(pid: int) -> None:
    """Collect a child that exited (a stand-in this process started) so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def alive(serving: dict) -> bool:
    pid = serving.get("pid")
    if not pid or not serving.get("port") or not os.path.exists(serving.get("pid_file", "")):
        return False
    _reap(pid)
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def stop(serving: dict) -> None:
    """Stop the stand-in: its lease goes, then a SIGTERM for good measure."""
    Path(serving.get("pid_file", "/nonexistent")).unlink(missing_ok=True)
    pid = serving.get("pid")
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        _reap(pid)


def stop_all() -> int:
    """Stop every stand-in this installation started (tests' teardown, a demo reset); returns how many."""
    count = 0
    for pid_file in run_dir().glob("*.pid"):
        try:
            pid = int(pid_file.read_text())
        except ValueError:
            pid = 0
        stop({"pid": pid, "pid_file": str(pid_file)})
        count += 1
    return count


def upstream(serving: dict) -> str:
    return f"http://127.0.0.1:{serving['port']}" if serving.get("port") else ""


def ask(serving: dict, path: str, token: str = "") -> tuple[int, dict]:
    """GET ``path`` of the stand-in: (status, JSON body); (0, {}) when it does not answer."""
    if not serving.get("port"):
        return 0, {}
    connection = http.client.HTTPConnection("127.0.0.1", serving["port"], timeout=PROBE_TIMEOUT_SECONDS)
    try:
        connection.request("GET", path, headers={"Authorization": f"token {token}"} if token else {})
        response = connection.getresponse()
        body = response.read()
        try:
            return response.status, json.loads(body or b"{}")
        except ValueError:
            return response.status, {}
    except OSError:
        return 0, {}
    finally:
        connection.close()


def log_tail(serving: dict, lines: int) -> list[str]:
    try:
        with open(serving.get("log_file", ""), errors="replace") as handle:
            return handle.read().splitlines()[-lines:]
    except OSError:
        return []
