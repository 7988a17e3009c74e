"""A real Slurm 22.05 cluster on loopback ports, from Debian's packages, for the tests of the Slurm executor.

``SlurmCluster.start()`` writes a configuration of its own to a temporary directory and starts, each in a
process of its own: ``munged`` (a private key and socket), a private MariaDB (``mariadb-install-db`` into the
directory, then ``mariadbd`` on a free port), ``slurmdbd`` on it, ``slurmctld``, one ``slurmd`` per node
(Debian's build runs several on one host: ``slurmd -N name``, each with its own port) and ``slurmrestd`` with
JWT authentication. GPUs are GRES backed by character devices (the numbers of /dev/null), so Slurm hands out
real indices without GPUs. Jobs run as the system accounts ``daemon`` and ``nobody`` (they exist on every
Debian machine; nothing is added to /etc/passwd), with accounts of their own in slurmdbd. One cluster serves the
whole test run (``tests/slurm/conftest.py``); ``stop()`` cancels what runs and stops every daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: (name, GRES type, GPUs, CPUs, memory MiB) of the test cluster's nodes: two models, as a site has.
NODES = (("sx-h100-1", "h100", 8, 32, 65536), ("sx-h100-2", "h100", 8, 32, 65536),
         ("sx-a100-1", "a100", 8, 32, 65536), ("sx-a100-2", "a100", 4, 16, 32768))
#: System accounts jobs run as, and the Slurm account each belongs to.
USERS = {"daemon": "vision", "nobody": "nlp"}
CLUSTER_NAME = "portaltest"
#: The daemons must be found where Debian puts them; a machine without them cannot run these tests.
BINARIES = ("munged", "mariadbd", "mariadb-install-db", "slurmctld", "slurmd", "slurmdbd", "slurmrestd", "sacctmgr",
            "scontrol", "sbatch")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def missing_binaries() -> list[str]:
    path = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
    return [name for name in BINARIES if shutil.which(name, path=path) is None]


@dataclass
class SlurmCluster:
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="slurm-")))
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    rest_port: int = 0
    started_seconds: float = 0.0

    # --- where things are -----------------------------------------------------------------------------

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def jwt_key(self) -> Path:
        return self.root / "etc" / "jwt_hs256.key"

    @property
    def output_dir(self) -> Path:
        return self.root / "out"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"}

    # --- starting -------------------------------------------------------------------------------------

    def start(self) -> SlurmCluster:
        began = time.monotonic()
        for sub in ("etc", "munge", "db", "spool/ctld", "log", "out", "state"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # slurmrestd runs as nobody and reads slurm.conf
        (self.root / "etc").chmod(0o755)
        self.output_dir.chmod(0o1777)  # jobs write here as their own accounts
        self._write_config()
        self._start_munge()
        db_port = self._start_mariadb()
        self._write_dbd_config(db_port)
        self._spawn("slurmdbd", ["slurmdbd", "-D"])
        self._wait_port(self.dbd_port, "slurmdbd")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self._run(["scontrol", "ping"], check=False).returncode == 0, "slurmctld")
        self._accounts()
        for name, *_rest in NODES:
            self._spawn(f"slurmd-{name}", ["slurmd", "-D", "-f", str(self.conf), "-N", name])
        self._wait(self._nodes_idle, "the slurmd daemons to register")
        self.rest_port = free_port()
        self._spawn("slurmrestd", ["slurmrestd", "-f", str(self.conf), "-a", "rest_auth/jwt", "-u", "nobody",
                                   "-g", "nogroup", f"127.0.0.1:{self.rest_port}"], extra_env={"SLURM_JWT": "daemon"})
        self._wait(self._rest_answers, "slurmrestd")
        self.started_seconds = time.monotonic() - began
        return self

    def _write_config(self) -> None:
        etc = self.root / "etc"
        self.jwt_key.write_bytes(secrets.token_bytes(32))
        self.jwt_key.chmod(0o600)
        (etc / "munge.key").write_bytes(secrets.token_bytes(1024))
        (etc / "munge.key").chmod(0o600)
        self.ctld_port, self.dbd_port = free_port(), free_port()
        node_lines, gres_lines = [], []
        for name, kind, gpus, cpus, memory in NODES:
            (self.root / "spool" / name).mkdir(parents=True, exist_ok=True)
            devices = self.root / "dev" / name
            devices.mkdir(parents=True, exist_ok=True)
            for index in range(gpus):
                device = devices / f"nvidia{index}"
                if not device.exists():
                    os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # a character device: /dev/null's numbers
            node_lines.append(f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()} "
                              f"Port={free_port()} CPUs={cpus} RealMemory={memory} Gres=gpu:{kind}:{gpus} "
                              "State=UNKNOWN")
            last = gpus - 1
            gres_lines.append(f"NodeName={name} Name=gpu Type={kind} File={devices}/nvidia[0-{last}]")
        names = ",".join(name for name, *_rest in NODES)
        spool = self.root / "spool"
        log = self.root / "log"
        self.conf.write_text("\n".join([
            f"ClusterName={CLUSTER_NAME}", f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}", "SlurmUser=root", "SlurmdUser=root",
            f"AuthInfo=socket={self.root}/munge/munge.socket", "AuthAltTypes=auth/jwt",
            f"AuthAltParameters=jwt_key={self.jwt_key}",
            f"StateSaveLocation={self.root}/state", f"SlurmdSpoolDir={spool}/%n",
            f"SlurmctldPidFile={self.root}/slurmctld.pid", f"SlurmdPidFile={self.root}/slurmd-%n.pid",
            f"SlurmctldLogFile={log}/slurmctld.log", f"SlurmdLogFile={log}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "DefMemPerCPU=256",
            "GresTypes=gpu", "SlurmdParameters=config_overrides", "CommunicationParameters=NoInAddrAny",
            "ReturnToService=2", "MinJobAge=300", "MpiDefault=none", "SchedulerParameters=bf_interval=1",
            "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=2", "Waittime=0",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.dbd_port}", f"AccountingStoragePass={self.root}/munge/munge.socket",
            "AccountingStorageTRES=gres/gpu", "AccountingStoreFlags=job_comment",
            "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none",
            *node_lines, f"PartitionName=gpu Nodes={names} Default=YES MaxTime=INFINITE State=UP", ""]))
        (etc / "gres.conf").write_text("AutoDetect=off\n" + "\n".join(gres_lines) + "\n")

    def _write_dbd_config(self, db_port: int) -> None:
        path = self.root / "etc" / "slurmdbd.conf"
        path.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.root}/munge/munge.socket", "AuthAltTypes=auth/jwt",
            f"AuthAltParameters=jwt_key={self.jwt_key}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
            f"DbdPort={self.dbd_port}", "SlurmUser=root", f"LogFile={self.root}/log/slurmdbd.log",
            f"PidFile={self.root}/slurmdbd.pid", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={db_port}", "StorageUser=root", "StorageLoc=slurm_acct_db", ""]))
        path.chmod(0o600)

    def _start_munge(self) -> None:
        munge = self.root / "munge"
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={munge}/munge.socket",
                               f"--key-file={self.root}/etc/munge.key", f"--pid-file={munge}/munged.pid",
                               f"--log-file={self.root}/log/munged.log", f"--seed-file={munge}/munged.seed"])
        self._wait(lambda: (munge / "munge.socket").exists(), "munged")

    def _start_mariadb(self) -> int:
        data = self.root / "db"
        self._run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                   "--auth-root-authentication-method=normal", "--skip-test-db"])
        port = free_port()
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", "--user=root",
                                 f"--socket={self.root}/db.sock", f"--port={port}", "--bind-address=127.0.0.1",
                                 f"--pid-file={self.root}/mariadb.pid", "--innodb-buffer-pool-size=64M",
                                 "--skip-log-bin", f"--log-error={self.root}/log/mariadb.log"])
        self._wait_port(port, "mariadbd")
        return port

    def _accounts(self) -> None:
        """An account per test user in slurmdbd, so that accounting maps them to tenants."""
        for account in sorted(set(USERS.values())):
            self._run(["sacctmgr", "-i", "add", "account", account, f"cluster={CLUSTER_NAME}"])
        for user, account in USERS.items():
            self._run(["sacctmgr", "-i", "add", "user", user, f"account={account}", f"cluster={CLUSTER_NAME}"])

    # --- asking -----------------------------------------------------------------------------------------

    def token(self, user: str = "root", lifespan: int = 3600) -> str:
        out = self._run(["scontrol", "token", f"username={user}", f"lifespan={lifespan}"]).stdout
        return out.strip().split("=", 1)[1]

    def rest(self, path: str, user: str = "root", method: str = "GET", body: dict | None = None) -> dict:
        request = urllib.request.Request(self.url + path, method=method, data=json.dumps(body).encode() if body
                                         else None, headers={"X-SLURM-USER-NAME": user,
                                                             "X-SLURM-USER-TOKEN": self.token(user),
                                                             "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - a loopback URL
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read() or b"{}")

    def scontrol(self, *args: str) -> str:
        return self._run(["scontrol", *args]).stdout

    def sbatch(self, *args: str, user: str = "root") -> str:
        """Submit directly to Slurm, as a user who never opens the portal would; returns the job id."""
        command = ["sbatch", "--parsable", *args]
        if user != "root":
            command = ["setpriv", f"--reuid={user}", f"--regid={user if user != 'nobody' else 'nogroup'}",
                       "--clear-groups", *command]
        return self._run(command).stdout.strip().split(";")[0]

    def cancel_all(self) -> None:
        """Cancel every job of every user (scancel without ids cancels nothing: they are listed first)."""
        ids = self._run(["squeue", "-h", "-o", "%i"], check=False).stdout.split()
        if ids:
            self._run(["scancel", "--full", "--quiet", *ids], check=False)

    def reset(self) -> None:
        """Back to a fresh cluster's state for the next test: no job, every drained node resumed, all idle."""
        self.cancel_all()
        drained = self._run(["sinfo", "-h", "-N", "-t", "drain,drained,draining,down", "-o", "%N"],
                            check=False).stdout.split()
        for name in sorted(set(drained)):
            self._run(["scontrol", "update", f"nodename={name}", "state=resume"], check=False)
        self._wait(self._nodes_idle, "every node to be idle again", seconds=30)

    def _nodes_idle(self) -> bool:
        out = self._run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout.split()
        return len(out) == 2 * len(NODES) and all(state == "idle" for state in out[1::2])

    def _rest_answers(self) -> bool:
        try:
            return "nodes" in self.rest("/slurm/v0.0.38/nodes")
        except (OSError, ValueError):
            return False

    # --- processes --------------------------------------------------------------------------------------

    def _run(self, command: list[str], check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=60, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def _spawn(self, name: str, command: list[str], extra_env: dict | None = None) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 - closed with the process
        self.processes[name] = subprocess.Popen(command, env={**self.env(), **(extra_env or {})}, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def _wait(self, ready, what: str, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            dead = [name for name, process in self.processes.items() if process.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}: {self.logs()}")
            if ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def _wait_port(self, port: int, what: str) -> None:
        def answers() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
            return False
        self._wait(answers, what)

    def logs(self, lines: int = 15) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cancel_all()
        # each tier at once (the REST server and the node daemons, then the controller, then accounting, its
        # database and munge): a daemon takes about two seconds to stop, and they need not wait for one another
        tiers = [["slurmrestd", *[n for n in self.processes if n.startswith("slurmd-")]], ["slurmctld"], ["slurmdbd"],
                 ["mariadbd", "munged"]]
        for tier in tiers:
            running = [self.processes[name] for name in tier
                       if name in self.processes and self.processes[name].poll() is None]
            for process in running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            for process in running:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)
