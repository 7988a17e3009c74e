"""The production process stack on this machine: gunicorn, a Celery worker and Celery beat in production
settings, on this machine's PostgreSQL and Redis. Started by ``bench_portal`` (load) and ``prod_smoke``
(an end-to-end check), the way a site runs it (deploy/systemd, deploy/kustomize): same commands, same
settings, collected static files.

Each process runs in its own session (process group), so a SIGKILL reaches a worker's pool children too, as
when a container or a host dies."""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from gpuportal.storage.db import database_url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ProductionStack:
    """gunicorn + worker (+ beat) with ``GPUPORTAL_ENV=production``; ``env`` is what every process gets."""

    def __init__(self, broker_url: str, extra_env: dict | None = None, log_dir: str | None = None):
        self.root = Path(settings.BASE_DIR)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.static_root = tempfile.mkdtemp(prefix="gpuportal-static-")
        self.run_dir = tempfile.mkdtemp(prefix="gpuportal-run-")
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings", "GPUPORTAL_ENV": "production",
                    "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(64),
                    "GPUPORTAL_AUDIT_KEY": secrets.token_urlsafe(48), "DATABASE_URL": database_url(),
                    "CELERY_BROKER_URL": broker_url, "ALLOWED_HOSTS": "127.0.0.1,localhost", "HTTPS": "0",
                    "GPUPORTAL_ALLOW_HTTP": "1", "GPUPORTAL_STATIC_ROOT": self.static_root,
                    "GPUPORTAL_LIVENESS_DIR": self.run_dir, "LOG_LEVEL": "WARNING",
                    "GPUPORTAL_AUDIT_HEAD_FILE": str(Path(self.run_dir) / "audit-heads.log"), **(extra_env or {})}
        for name in ("CELERY_TASK_ALWAYS_EAGER", "CELERY_RESULT_BACKEND"):
            self.env.pop(name, None)
        self.log_dir = Path(log_dir) if log_dir else None  # each process's output in <name>.log; else dropped
        self.processes: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, list[str]] = {}  # how each was started, so that it can be started again

    # --- processes --------------------------------------------------------------------------------------
    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        output = open(self.log_dir / f"{name}.log", "ab") if self.log_dir else subprocess.DEVNULL  # noqa: SIM115
        process = subprocess.Popen(command, cwd=self.root, env=self.env, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        if output is not subprocess.DEVNULL:
            output.close()  # the child has its own copy
        self.processes[name] = process
        self.commands[name] = command
        return process

    def collectstatic(self) -> None:
        """Production serves collected, hashed and compressed static files: collect them first, as a site does."""
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0", "--ignore", "admin",
                        "--ignore", "rest_framework", "--ignore", "drf_spectacular_sidecar"],
                       cwd=self.root, env=self.env, check=True)

    def start_web(self, workers: int, threads: int = 4) -> None:
        self._spawn("web", [sys.executable, "-m", "gunicorn", "gpuportal.wsgi:application", "--bind",
                            f"127.0.0.1:{self.port}", "--workers", str(workers), "--worker-class", "gthread",
                            "--threads", str(threads), "--log-level", "warning"])

    def start_worker(self, concurrency: int = 1, queues: str = "celery,agents") -> None:
        self._spawn("worker", [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", "--concurrency",
                               str(concurrency), "-Q", queues, "--loglevel", "WARNING", "--without-gossip",
                               "--without-mingle"])

    def start_beat(self) -> None:
        self._spawn("beat", [sys.executable, "-m", "celery", "-A", "gpuportal", "beat", "--loglevel", "WARNING",
                             "-s", str(Path(self.run_dir) / "celerybeat-schedule")])

    def spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        """Another process of the stack (a node agent), started and stopped with the others."""
        return self._spawn(name, command)

    def output(self, name: str, lines: int = 30) -> str:
        if not self.log_dir or not (self.log_dir / f"{name}.log").exists():
            return ""
        return "\n".join((self.log_dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])

    def restart(self, name: str) -> subprocess.Popen:
        """Start ``name`` again with the command it was first started with (after ``kill``), as systemd's
        ``Restart=always`` or a pod's restart policy would."""
        return self._spawn(name, self.commands[name])

    def signal(self, name: str, signum: int) -> None:
        """Send ``signum`` to the process and its children (its process group): SIGSTOP freezes a worker with
        its pool, as a stalled host or a paused container does; SIGCONT lets it go on."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.processes[name].pid, signum)

    def children(self, name: str) -> list[int]:
        """Process ids whose parent is ``name``'s process: gunicorn's workers under its master, a Celery
        worker's pool."""
        parent, found = self.processes[name].pid, []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
                found.append(int(stat.parent.name))
        return sorted(found)

    def kill(self, name: str) -> None:
        """SIGKILL the process and its children: no warm shutdown, no message given back."""
        process = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):  # it died already
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def wait_answering(self, path: str = "/readyz", timeout: float = 90) -> float:
        """Seconds until ``path`` answers 200 (the web process is up and ready)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            web = self.processes.get("web")
            if web is not None and web.poll() is not None:
                raise CommandError(f"gunicorn exited with {web.returncode} (see its output above)")
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                probe.request("GET", path)
                if probe.getresponse().status == 200:
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.2)
        raise CommandError(f"{path} did not answer 200 within {timeout:.0f} s")

    def stop(self, timeout: float = 20) -> dict[str, int | None]:
        """SIGTERM every process (warm shutdown), then their exit codes (None: had to be killed)."""
        codes: dict[str, int | None] = {}
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
                codes[name] = None
        self.processes.clear()
        shutil.rmtree(self.static_root, ignore_errors=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        return codes
