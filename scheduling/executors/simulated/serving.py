"""Notebooks and service replicas on the simulated cluster: real local HTTP servers (``standin``).

Each running notebook or replica is one stand-in process, recorded in the job's executor state
(``serving``: pid, port, its pid file, restarts); so are the named ports of a running job of any kind
(``ports_serving``: one process answering on a local port per named port, ``port`` mapping name to port). The
pid file is the process's lease: removing it stops the process within a fraction of a second, so ``stop_all``
(tests, a demo reset) leaves nothing behind even when the process that started it is gone. A replica whose
process died is restarted, as a Deployment restarts its container, and the restarts are counted; a notebook whose
server died fails, as its pod would.

A stand-in also ends with the process that started it (a test run, a worker, the demo's scheduler loop): this
module holds the write end of a pipe on each one's standard input, which the kernel closes when this process ends,
however it ends, and stops the ones still running at a normal exit. Nothing outlives the suite or the demo.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from gpuportal.web.paths import portal_path
from scheduling.jobs.tokens import notebook_token
from scheduling.models import WorkloadKind

#: How long a stand-in may take to listen before its start counts as failed.
START_TIMEOUT_SECONDS = 10.0
#: How long a probe waits for a stand-in's answer (the job page and the API wait for it).
PROBE_TIMEOUT_SECONDS = 1.0


#: The stand-ins this process started and has not stopped, by pid: each one's Popen keeps the write end of its
#: lifeline (its standard input) open; dropping or closing it ends the stand-in.
_children: dict[int, subprocess.Popen] = {}
_children_lock = threading.Lock()


def _forget_children_after_fork() -> None:
    """A forked process (a worker's pool child) does not own its parent's stand-ins: it closes its copies of their
    lifelines, or they would stay open as long as it lives, and forgets them (with a fresh lock: another thread
    may have held the old one at the fork)."""
    global _children_lock
    _children_lock = threading.Lock()
    for process in _children.values():
        with contextlib.suppress(OSError):
            process.stdin.close()
    _children.clear()


def stop_children() -> int:
    """End every stand-in this process started and still runs (at exit; a test's teardown); returns how many.
    Closing its lifeline lets it give up its lease (the pid file) on the way out; one that has not ended after a
    moment is killed."""
    with _children_lock:
        processes = list(_children.values())
        _children.clear()
    for process in processes:
        with contextlib.suppress(OSError):
            process.stdin.close()
    deadline = time.monotonic() + 2
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return len(processes)


atexit.register(stop_children)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_children_after_fork)


def children() -> list[int]:
    """The pids of the stand-ins this process started that still run (tests check that none is left)."""
    with _children_lock:
        return [pid for pid, process in _children.items() if process.poll() is None]


def run_dir() -> Path:
    path = Path(getattr(settings, "SIMULATION_STANDIN_DIR", settings.BASE_DIR / "var" / "standins"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def base_url(job) -> str:
    """Where the portal's proxy serves the notebook (the server takes it as its base URL, as Jupyter does)."""
    return portal_path("scheduling:notebook-open-root", job.pk)


def start(job, restarts: int = 0, ready_after: float = 0.0, crash_after: float = 0.0) -> dict:
    """Start the stand-in of ``job``'s current attempt; returns the ``serving`` state to keep."""
    is_notebook = job.kind == WorkloadKind.NOTEBOOK
    arguments = ["--mode", "notebook" if is_notebook else "service", "--image", job.image,
                 "--revision", str(job.revision or 1), "--ready-after", str(ready_after), "--crash-after",
                 str(crash_after)]
    if is_notebook:
        arguments += ["--token", notebook_token(job), "--base-url", base_url(job)]
    return _launch(job, f"job-{job.pk}-a{job.retry_count}-r{restarts}", arguments, restarts,
                   f"job-{job.pk}-a{job.retry_count}.log")  # one log per attempt, across restarts


def start_ports(job) -> dict:
    """Start the stand-in of ``job``'s named ports (one local listener per port, whatever the job's kind): the
    ``ports_serving`` state to keep, whose ``port`` maps each name to where it listens."""
    entries = ",".join(f"{p['name']}:{p['port']}" for p in job.ports or [])
    stem = f"job-{job.pk}-a{job.retry_count}-ports-{int(time.time() * 1000)}"
    return _launch(job, stem, ["--mode", "ports", "--ports", entries, "--image", job.image], 0,
                   f"job-{job.pk}-a{job.retry_count}-ports.log")


def _launch(job, stem: str, arguments: list[str], restarts: int, log_name: str) -> dict:
    """Start one stand-in process (``arguments`` say what it serves) and wait until it listens."""
    _sweep()
    directory = run_dir()
    port_file, pid_file = (directory / f"{stem}.{ext}" for ext in ("port", "pid"))
    log_file = directory / log_name
    port_file.unlink(missing_ok=True)
    pid_file.write_text("starting")
    command = [sys.executable, str(Path(__file__).with_name("standin.py")), "--job", str(job.pk), *arguments,
               "--port-file", str(port_file), "--pid-file", str(pid_file), "--parent", str(os.getpid())]
    with open(log_file, "ab") as log:
        process = subprocess.Popen(command, cwd=settings.BASE_DIR, stdout=log, stderr=log, stdin=subprocess.PIPE,
                                   start_new_session=True, close_fds=True)
    with _children_lock:
        _children[process.pid] = process
    pid_file.write_text(str(process.pid))
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            pid_file.unlink(missing_ok=True)
            _release(process.pid)
            return {"pid": process.pid, "port": None, "pid_file": str(pid_file), "log_file": str(log_file),
                    "restarts": restarts, "started_at": datetime.now(UTC).isoformat()}
        time.sleep(0.02)
    return {"pid": process.pid, "port": json.loads(port_file.read_text()), "pid_file": str(pid_file),
            "log_file": str(log_file), "restarts": restarts, "started_at": datetime.now(UTC).isoformat()}


def port_upstream(serving: dict, name: str) -> str:
    """Where the stand-in of a job's named ports serves ``name`` ("" when it does not run)."""
    listening = serving.get("port")
    if not isinstance(listening, dict) or not listening.get(name) or not alive(serving):
        return ""
    return f"http://127.0.0.1:{listening[name]}"


def _reap(pid: int) -> None:
    """Collect a child that exited (a stand-in this process started) so it does not linger as a zombie."""
    with _children_lock:
        process = _children.get(pid)
    if process is not None:
        if process.poll() is not None:
            _release(pid)
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _release(pid: int) -> None:
    """Forget a stand-in this process started and close its lifeline (it exited, or is being stopped)."""
    with _children_lock:
        process = _children.pop(pid, None)
    if process is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
        process.poll()


def _sweep() -> None:
    """Forget every stand-in of this process that has exited, whoever stopped it (another process cancels a
    notebook this one started): its lifeline closed and its exit collected, so a long-lived loop or worker
    keeps neither a descriptor nor a zombie per stopped stand-in."""
    with _children_lock:
        ended = [pid for pid, process in _children.items() if process.poll() is not None]
    for pid in ended:
        _release(pid)


def alive(serving: dict) -> bool:
    _sweep()
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
        _release(pid)
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
