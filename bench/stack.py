"""The production process stack on this machine: gunicorn, a Celery worker and Celery beat in production
settings, on this machine's PostgreSQL and Redis. Started by ``bench_portal`` (load) and ``prod_smoke``
(an end-to-end check), the way a site runs it (deploy/systemd, deploy/kustomize): same commands, same
settings, collected static files.

Each process runs in its own session (process group), so a SIGKILL reaches a worker's pool children too, as
when a container or a host dies."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import importlib.metadata
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

import django
from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.core.management.base import CommandError

from gpuportal.storage.db import database_url

#: Static files a site serves from elsewhere (the Django admin's, the API browser's and docs' assets).
STATIC_IGNORED = ("admin", "rest_framework", "drf_spectacular_sidecar")


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
        self.static_root = str(Path(tempfile.gettempdir()) / f"gpuportal-static-{_static_sources()}")
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
        """Production serves collected, hashed and compressed static files: collect them first, as a site does.

        The collection is kept between stacks, named by the sources it was made from (``_static_sources``):
        hashing and compressing them again took seconds of every benchmark run."""
        if Path(self.static_root).is_dir():
            return
        # Collected aside and then renamed into place, so that a stack started meanwhile (another benchmark)
        # never serves half a collection; when one was renamed first, it is the same files: this one goes.
        aside = tempfile.mkdtemp(prefix="gpuportal-static-", dir=Path(self.static_root).parent)
        try:
            subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0",
                            *(f"--ignore={pattern}" for pattern in STATIC_IGNORED)],
                           cwd=self.root, env={**self.env, "GPUPORTAL_STATIC_ROOT": aside}, check=True)
        except BaseException:
            shutil.rmtree(aside, ignore_errors=True)
            raise
        try:
            os.rename(aside, self.static_root)
        except OSError:
            shutil.rmtree(aside, ignore_errors=True)

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

    def cpu_seconds(self, name: str) -> float:
        """CPU time (user and system) spent so far by ``name``'s process and its live children: what a page
        cost the web processes, whatever else the machine was doing meanwhile."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in [self.processes[name].pid, *self.children(name)]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            total += int(fields[11]) + int(fields[12])  # utime and stime, fields 14 and 15 of stat(5)
        return total / ticks

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

    def stop(self, timeout: float = 20, warm: bool = True) -> dict[str, int | None]:
        """SIGTERM every process (warm shutdown), then their exit codes (None: had to be killed). ``warm=False``
        kills them at once instead (a load benchmark has nothing to finish: a Celery worker's warm shutdown
        took seconds)."""
        codes: dict[str, int | None] = {}
        for process in self.processes.values():
            if process.poll() is None:
                if warm:
                    process.send_signal(signal.SIGTERM)
                else:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
                codes[name] = None
        self.processes.clear()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        return codes


def _static_sources() -> str:
    """A digest of what a collection is made from: the static files (their paths, sizes and modification times)
    and the versions of what collects and serves them (Django, whitenoise: their hashing and compression)."""
    digest = hashlib.sha256(f"{django.__version__}|{importlib.metadata.version('whitenoise')}\n".encode())
    for finder in get_finders():
        for path, storage in sorted(finder.list([*STATIC_IGNORED, "CVS", ".*", "*~"]), key=lambda found: found[0]):
            stat = os.stat(storage.path(path))
            digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]
