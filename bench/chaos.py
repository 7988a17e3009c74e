"""The chaos soak behind ``manage.py chaos_soak``: the production stack (``bench.stack``) under seeded faults and
concurrent API clients for minutes, a drain, and then every invariant checked, each finding naming its jobs.

Why a soak beside the fault suite: each scenario of ``tests/faults`` provokes one fault at one chosen moment;
races between a user's hold and a scheduling pass, a service stop and a replica restart, a stalled Redis and a
request, show up only when many things happen at once, at moments nobody chose. The seed (``random.Random``)
fixes what the clients send and which fault comes when, so a failing run can be run again; the interleaving
is whatever the machine makes of it.

What runs: gunicorn (2 workers), a Celery worker and beat in production settings on this database and a Redis
database of its own (broker and shared cache), beside a simulated cluster with four GPU models, two of them
two-node pools (a job that faults once on each node of such a pool has nowhere left to go). Four users of two
tenants submit through the REST API with ``Idempotency-Key`` (sometimes the same key twice at once): short
runs, forced failures and node faults, multi-node jobs, GPU shares, arrays, services (stopped later), holds and
releases, cancels. Every 5 to 20 s a fault: SIGKILL of the worker or beat (started again), of one gunicorn
worker (its master starts another), ``CLIENT PAUSE`` of Redis, ``pg_terminate_backend`` of every database
session of the stack, again and again for one to three seconds (a failover: sessions at work die too, a
scheduling pass among them), SIGSTOP then SIGCONT of the worker. Then the drain: no submissions, no faults, holds
released, services stopped, until everything has ended or the drain time is up; the stack stops and the
reconciler runs once past its bounds (``bench.invariants.settle``).

Every process the soak starts, and every process those start (the replicas' stand-in servers), carries
``MARKER`` in its environment, so that nothing it started outlives it, and nothing else is touched.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import secrets
import shutil
import signal
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psycopg
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from fleet.models import GPU, Cluster, ExecutorKind, Node
from gpuportal.models import OperationalCounter
from gpuportal.text import phrases
from scheduling.models import (
    TERMINAL_STATUSES,
    WAITING_STATUSES,
    Job,
    JobEvent,
    JobGroup,
    JobStatus,
    TaskType,
    WorkloadKind,
)
from tenants.models import Membership, Project, Quota, Role, Tenant

from . import invariants
from .stack import ProductionStack

#: The environment variable every process of a soak carries (value: that soak's own token).
MARKER = "GPUPORTAL_CHAOS_SOAK"
PREFIX = "chaos"
CLUSTER = "chaos"
IMAGE = "registry.local/chaos:1"
TASK_TYPE = "chaos"
#: (GPU model as the catalogue names it, nodes, GPUs per node)
POOLS = (("A100", 4, 8), ("L40S", 3, 8), ("MI300X", 2, 8), ("Ascend910B", 2, 8))
TWO_NODE_POOLS = ("MI300X", "Ascend910B")
#: tenant -> {model: (guaranteed, limit)}: below the pools, so that borrowing, waiting for quota and preemption
#: happen too.
TENANTS = {"chaos-a": {"A100": (12, 20), "L40S": (8, 16), "MI300X": (6, 12), "Ascend910B": (6, 12)},
           "chaos-b": {"A100": (12, 20), "L40S": (8, 16), "MI300X": (6, 12), "Ascend910B": (6, 12)}}
USERS = (("chaos-a1", "chaos-a"), ("chaos-a2", "chaos-a"), ("chaos-b1", "chaos-b"), ("chaos-b2", "chaos-b"))
#: Real seconds per simulated second: a run of a few simulated minutes lasts a few real seconds.
TIME_SCALE = 0.01
#: What the stack is told (beside bench.stack's production settings): short intervals and reconcile bounds,
#: so that a drain of a minute or two sees the beat's passes, syncs and reconciles repair what the faults left.
STACK_ENV = {"GPUPORTAL_SIMULATION_TIME_SCALE": str(TIME_SCALE), "GPUPORTAL_PASS_INTERVAL": "2",
             "GPUPORTAL_SYNC_INTERVAL": "1", "GPUPORTAL_POLL_INTERVAL": "5", "GPUPORTAL_RECONCILE_INTERVAL": "5",
             "GPUPORTAL_RECONCILE_ADMITTED_SECONDS": "20", "GPUPORTAL_RECONCILE_DISPATCHING_SECONDS": "30",
             "GPUPORTAL_ROLLUP_INTERVAL": "60", "GPUPORTAL_BROKER_TIMEOUT": "2", "LOG_LEVEL": "WARNING",
             "GPUPORTAL_LOG_FORMAT": "json"}  # the worker's log is read for passes that raised
FAULT_KINDS = ("kill_worker", "kill_beat", "kill_web_worker", "redis_pause", "db_terminate", "stop_worker")
FAULT_GAP_SECONDS = (5.0, 20.0)
#: What a client does, and how often (weights).
ACTIONS = (("short", 22), ("failing", 4), ("node_fault", 6), ("multi_node", 4), ("fractional", 5), ("array", 3),
           ("service", 4), ("hold_new", 8), ("hold", 3), ("cancel", 5), ("same_key", 4), ("read", 6))
#: The Celery log line of a scheduling pass that raised (celery.app.trace, level ERROR).
PASS_RAISED = re.compile(r"run_scheduling_pass\[[0-9a-f-]+\] raised unexpected")
#: A log line of the counters' module (gpuportal.observability.telemetry): it logs only a counter write it had to
#: give up.
COUNT_LOST = '"logger": "gpuportal.observability.telemetry"'


def fault_plan(seed: int, seconds: float) -> list[tuple[float, str, float]]:
    """The faults of a soak of ``seconds``: (when, kind, a number in [0, 1) that picks its details). Drawn
    before the soak starts, so the same seed injects the same faults at the same offsets whatever happens."""
    rng, plan, at = random.Random(f"{seed}:faults"), [], 0.0
    while True:
        at += rng.uniform(*FAULT_GAP_SECONDS)
        kind, detail = rng.choice(FAULT_KINDS), rng.random()
        if at >= seconds:
            return plan
        plan.append((round(at, 1), kind, detail))


# --- the world --------------------------------------------------------------------------------------------

@transaction.atomic
def seed_world(password: str) -> None:
    """The simulated cluster, the two tenants with their quotas, the four users; no jobs."""
    TaskType.objects.update_or_create(code=TASK_TYPE, defaults={
        "name": "Chaos", "priority": 50, "preemptible": True, "default_max_runtime_minutes": 60,
        "cpu_milli_per_gpu": 1000, "memory_mib_per_gpu": 1024, "infrastructure_retries": 2})
    cluster, _ = Cluster.objects.get_or_create(name=CLUSTER, defaults={"executor": ExecutorKind.SIMULATED})
    for model, nodes, gpus in POOLS:
        for n in range(nodes):
            node, created = Node.objects.get_or_create(name=f"{PREFIX}-{model.lower()}-{n}", defaults={
                "cluster": cluster, "gpu_model": model, "datacenter": "dc", "rack": f"r-{model.lower()}",
                "network_domain": f"net-{model.lower()}", "cpu_milli": 256_000, "memory_mib": 1024 * 1024})
            if created:
                GPU.objects.bulk_create(GPU(node=node, index=i, uuid=f"GPU-{PREFIX}-{model}-{n}-{i}", model=model,
                                            memory_mb=81920) for i in range(gpus))
    for name, quotas in TENANTS.items():
        tenant, _ = Tenant.objects.get_or_create(name=name, defaults={"display_name": name.title()})
        Project.objects.get_or_create(tenant=tenant, name="soak")
        for model, (guaranteed, limit) in quotas.items():
            Quota.objects.update_or_create(tenant=tenant, gpu_model=model, defaults={
                "guaranteed_gpus": guaranteed, "limit_gpus": limit})
    for username, tenant in USERS:
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.set_password(password)
        user.save()
        Membership.objects.get_or_create(user=user, tenant=Tenant.objects.get(name=tenant), role=Role.RESEARCHER)


# --- what the clients saw ---------------------------------------------------------------------------------

@dataclass
class Call:
    """One HTTP request as its client saw it; ``status`` None when no answer came (reset, refused, timeout)."""

    user: str
    method: str
    path: str
    status: int | None
    started: float  # seconds since the soak started
    ended: float
    error: str = ""


@dataclass
class Submission:
    """One ``Idempotency-Key``: what was sent with it and every answer (status, job id, group id)."""

    key: str
    user: str
    kind: str
    what: str
    name: str
    paired: bool = False
    answers: list[tuple[int | None, int | None, int | None]] = field(default_factory=list)

    @property
    def acknowledged(self) -> list[tuple[int | None, int | None, int | None]]:
        return [answer for answer in self.answers if answer[0] is not None and 200 <= answer[0] < 300]


@dataclass
class HoldAnswer:
    """A hold answered 2xx, with the job as the answer described it."""

    user: str
    job: int
    status: str
    held_by: str
    at: float


class Ledger:
    """Everything the clients sent and got, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[Call] = []
        self.submissions: dict[str, Submission] = {}
        self.holds: list[HoldAnswer] = []
        self.actions: Counter = Counter()
        self.errors: list[str] = []  # a client thread that raised: a bug of the soak, reported as such

    def call(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def answer(self, key: str, answer: tuple) -> None:
        with self.lock:
            self.submissions[key].answers.append(answer)


class Api:
    """One user's API client. A fresh connection per request: a gunicorn worker killed mid-request takes its
    connections with it, and a client must not mistake that for an answer."""

    def __init__(self, soak: Soak, user: str, token: str):
        self.soak, self.user, self.token = soak, user, token

    def call(self, method: str, path: str, body: dict | None = None, key: str = "") -> tuple[int | None, dict]:
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        if key:
            headers["Idempotency-Key"] = key
        started, status, answer, error = self.soak.clock(), None, {}, ""
        conn = http.client.HTTPConnection("127.0.0.1", self.soak.stack.port, timeout=30)
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            content = response.read()
            status = response.status
            with contextlib.suppress(ValueError):
                answer = json.loads(content) if content.strip() else {}
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
        self.soak.ledger.call(Call(self.user, method, path, status, started, self.soak.clock(), error))
        return status, answer if isinstance(answer, dict) else {}

    def retrying(self, method: str, path: str, body: dict | None = None, key: str = "", attempts: int = 6,
                 on_answer=None) -> tuple[int | None, dict]:
        """What a careful client does: send again (with the same key) while no answer came or the server
        erred, backing off; a 4xx is an answer."""
        status, answer = None, {}
        for attempt in range(attempts):
            status, answer = self.call(method, path, body, key)
            if on_answer is not None:
                on_answer(status, answer)
            if status is not None and status < 500:
                break
            time.sleep(min(0.5 * 2 ** attempt, 4.0))
        return status, answer


class Client(threading.Thread):
    """One user: a seeded sequence of actions until the soak says stop."""

    def __init__(self, soak: Soak, index: int, user: str, tenant: str, token: str):
        super().__init__(name=f"chaos-client-{user}", daemon=True)
        self.soak, self.user, self.tenant = soak, user, tenant
        self.api = Api(soak, user, token)
        self.rng = random.Random(f"{soak.seed}:client:{index}")
        self.count = 0
        self.jobs: list[int] = []  # batch jobs and array tasks it may cancel or hold
        self.arrays: list[int] = []
        self.services: dict[int, float] = {}  # service -> when to stop it
        self.releases: dict[int, float] = {}  # held job -> when to release it

    def run(self):
        try:
            while not self.soak.stopping.is_set():
                self.due()
                action = self.rng.choices([a for a, _w in ACTIONS], weights=[w for _a, w in ACTIONS])[0]
                with self.soak.ledger.lock:
                    self.soak.ledger.actions[action] += 1
                getattr(self, action)()
                self.soak.stopping.wait(self.rng.uniform(0.5, 1.5) * self.soak.think)
        except Exception:  # a bug of the soak, not of the portal: reported, never mistaken for a finding
            self.soak.ledger.errors.append(f"{self.user}: {traceback.format_exc()}")

    # --- what it sends -------------------------------------------------------------------------------------
    def submit(self, what: str, fields: dict, pair: bool = False) -> dict:
        self.count += 1
        key = f"s{self.soak.seed}-{self.user}-{self.count:04d}"
        name = f"{PREFIX}-{key}"
        body = {"tenant": self.tenant, "project": "soak", "name": name, "task_type": TASK_TYPE, "image": IMAGE,
                "gpus_per_node": 1, "max_runtime_minutes": 60, **fields}
        submission = Submission(key, self.user, body.get("kind", WorkloadKind.BATCH), what, name, paired=pair)
        with self.soak.ledger.lock:
            self.soak.ledger.submissions[key] = submission

        def note(status, answer):
            self.soak.ledger.answer(key, (status, answer.get("id"), answer.get("group")))

        if not pair:
            status, answer = self.api.retrying("POST", "/api/jobs/", body, key, on_answer=note)
        else:  # the same request twice at once, as a client retrying too early does
            results = [(None, {}), (None, {})]

            def send(i):
                results[i] = self.api.retrying("POST", "/api/jobs/", body, key, on_answer=note)

            twins = [threading.Thread(target=send, args=(i,)) for i in range(2)]
            for twin in twins:
                twin.start()
            for twin in twins:
                twin.join()
            status, answer = next((r for r in results if r[0] is not None and 200 <= r[0] < 300), results[0])
        return answer if status is not None and 200 <= status < 300 else {}

    def _batch(self, what: str, fields: dict, pair: bool = False) -> dict:
        answer = self.submit(what, fields, pair)
        if answer.get("id"):
            self.jobs = [*self.jobs[-30:], answer["id"]]
        return answer

    def _run(self, minutes: int | float, outcome: str = "succeeded") -> str:
        return f"sim:minutes={minutes} sim:outcome={outcome}"

    def short(self):
        model = self.rng.choice(("A100", "A100", "L40S", "MI300X", "Ascend910B"))
        self._batch("short run", {"gpu_model": model, "gpus_per_node": self.rng.choice((1, 2, 4)),
                                  "command": self._run(self.rng.randint(1, 6))})

    def failing(self):
        self._batch("forced failure", {"gpu_model": self.rng.choice(("A100", "L40S")),
                                       "command": self._run(2, self.rng.choice(("exit_code", "out_of_memory")))})

    def node_fault(self):
        model = self.rng.choice((*TWO_NODE_POOLS, "A100"))
        self._batch(f"node fault on {model}", {"gpu_model": model, "gpus_per_node": self.rng.choice((1, 2)),
                                               "command": self._run(3, "node_fault")})

    def multi_node(self):
        self._batch("multi-node", {"gpu_model": self.rng.choice(("A100", "L40S")), "gpus_per_node": 8, "nodes": 2,
                                   "command": self._run(self.rng.randint(1, 3))})

    def fractional(self):
        self._batch("GPU share", {"gpu_model": self.rng.choice(("A100", "L40S")),
                                  "gpu_share": self.rng.choice((0.25, 0.5)),
                                  "command": self._run(self.rng.randint(1, 4))})

    def array(self):
        answer = self.submit("array", {"kind": WorkloadKind.ARRAY, "gpu_model": "L40S", "array": "0-3",
                                       "array_parallelism": 2, "command": self._run(1)})
        if answer.get("group"):
            self.arrays.append(answer["group"])

    def service(self):
        if len(self.services) >= 2:  # each replica is a real process: a few at a time
            return self.short()
        crash = self.rng.random() < 0.5  # a replica that keeps exiting is restarted: stops race with restarts
        answer = self.submit("service", {"kind": WorkloadKind.SERVICE, "gpu_model": "L40S",
                                         "replicas": self.rng.choice((1, 2)),
                                         "command": "sim:crash=3" if crash else "serve"})
        if answer.get("group"):
            self.services[answer["group"]] = self.soak.clock() + self.rng.uniform(5, 20)

    def hold_new(self):
        """Submit and hold at once: the hold races with the pass the submission asked for."""
        answer = self._batch("held at once", {"gpu_model": self.rng.choice(("A100", "L40S")),
                                              "command": self._run(self.rng.randint(1, 3))})
        if answer.get("id"):
            self._hold(answer["id"])

    def hold(self):
        if self.jobs:
            self._hold(self.rng.choice(self.jobs[-8:]))

    def _hold(self, job: int):
        status, answer = self.api.retrying("POST", f"/api/jobs/{job}/hold/")
        if status is not None and 200 <= status < 300:
            with self.soak.ledger.lock:
                self.soak.ledger.holds.append(HoldAnswer(self.user, job, answer.get("status", ""),
                                                         answer.get("held_by", ""), self.soak.clock()))
            self.releases[job] = self.soak.clock() + self.rng.uniform(2, 8)

    def cancel(self):
        if self.arrays and self.rng.random() < 0.2:
            self.api.retrying("POST", f"/api/arrays/{self.arrays.pop(0)}/cancel/")
        elif self.jobs:
            self.api.retrying("POST", f"/api/jobs/{self.rng.choice(self.jobs)}/cancel/", {"reason": "chaos soak"})

    def same_key(self):
        self._batch("same key twice", {"gpu_model": "A100", "command": self._run(self.rng.randint(1, 3))},
                    pair=True)

    def read(self):
        if self.jobs and self.rng.random() < 0.6:
            self.api.call("GET", f"/api/jobs/{self.rng.choice(self.jobs)}/")
        else:
            self.api.call("GET", self.rng.choice(("/api/jobs/?page_size=20", "/api/queue/", "/api/quotas/")))

    # --- what comes due ------------------------------------------------------------------------------------
    def due(self, everything: bool = False):
        """Release the holds and stop the services whose time came (all of them when ``everything``)."""
        now = self.soak.clock()
        for job, at in list(self.releases.items()):
            if everything or at <= now:
                status, _answer = self.api.retrying("POST", f"/api/jobs/{job}/release/",
                                                    attempts=10 if everything else 6)
                if status is not None and status < 500:  # released, or not waiting any more (409)
                    del self.releases[job]
        for group, at in list(self.services.items()):
            if everything or at <= now:
                status, _answer = self.api.retrying("POST", f"/api/services/{group}/stop/",
                                                    attempts=10 if everything else 6)
                if status is not None and status < 500:
                    del self.services[group]


# --- the soak ---------------------------------------------------------------------------------------------

@dataclass
class Fault:
    kind: str
    at: float  # seconds since the soak started
    detail: str
    ended: float = 0.0


class Soak:
    """One soak: ``run()`` returns the findings (see ``report``); ``say`` prints a progress line."""

    def __init__(self, seed: int, minutes: float, drain_minutes: float, broker_url: str, think: float = 0.6,
                 say=print, keep_logs: bool = False):
        self.seed, self.minutes, self.drain_minutes = seed, minutes, drain_minutes
        self.broker_url, self.think, self.say, self.keep_logs = broker_url, think, say, keep_logs
        self.ledger = Ledger()
        self.stopping = threading.Event()
        self.stack_lock = threading.Lock()  # faults and the watch both start and stop the stack's processes
        self.faults: list[Fault] = []
        self.exited: list[dict] = []  # stack processes that ended without a fault killing them
        self.frozen = False  # the worker is SIGSTOPped now
        self.t0 = time.monotonic()
        self.stack: ProductionStack | None = None
        self.injector: threading.Thread | None = None
        self.marker = os.environ.get(MARKER) or f"{os.getpid()}-{secrets.token_hex(8)}"

    def clock(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def line(self, text: str) -> None:
        self.say(f"[{self.clock():7.1f} s] {text}")

    # --- the run -------------------------------------------------------------------------------------------
    def run(self) -> dict:
        if connection.vendor != "postgresql":
            raise RuntimeError("the chaos soak starts the production stack, which needs PostgreSQL (DATABASE_URL)")
        if Job.objects.exists():  # every stored job is checked, and keys of an earlier run would be replayed
            raise RuntimeError("the chaos soak needs a fresh database: this one has jobs already")
        os.environ[MARKER] = self.marker  # every process started from here on carries it (stack, stand-ins)
        log_dir = Path(tempfile.mkdtemp(prefix="gpuportal-chaos-"))  # each process's output, kept if a check fails
        redis.Redis.from_url(self.broker_url).flushdb()  # no message nor cache entry of an earlier run
        password = secrets.token_urlsafe(18)
        audit_key = secrets.token_urlsafe(48)
        # Seeding writes audit records, checked at the end in this process: with the stack's key; and the
        # settle's syncs read the simulated plans at the stack's pace.
        settings.AUDIT["KEY"] = audit_key.encode()
        settings.SIMULATION_TIME_SCALE = TIME_SCALE
        seed_world(password)
        connection.close()  # a pg_terminate_backend of the stack's sessions is not this process's business
        self.stack = ProductionStack(self.broker_url, {
            **STACK_ENV, "GPUPORTAL_AUDIT_KEY": audit_key, "GPUPORTAL_CACHE_URL": self.broker_url,
            "GPUPORTAL_METRICS_TOKEN": secrets.token_urlsafe(24)}, log_dir=str(log_dir))
        result: dict = {}
        try:
            self.stack.collectstatic()
            self.stack.start_web(workers=2)
            self.stack.start_worker(concurrency=2)
            self.stack.start_beat()
            self.line(f"stack ready in {self.stack.wait_answering('/readyz', 120):.1f} s on {self.stack.base}")
            clients = [Client(self, i, user, tenant, self._token(user, password))
                       for i, (user, tenant) in enumerate(USERS)]
            self.t0 = time.monotonic()
            self._soak(clients)
            self._drain(clients)
            # Before the stack stops: the stand-ins end with the worker processes that started them, so a server
            # a stop missed is seen only while its starter lives. A stand-in whose lease went exits within a
            # fraction of a second on a quiet machine; on a busy one it is given up to LEFT_SECONDS, while one that
            # a stop missed holds its lease and stays.
            deadline = time.monotonic() + LEFT_SECONDS
            time.sleep(1)
            while (left := servers_left(self.marker)) and time.monotonic() < deadline:
                time.sleep(0.5)
            counters = self._counters()
            codes = self.stack.stop()
            self.line(f"stack stopped (exit codes {codes})")
            result = self.report(counters, codes, log_dir, left)
        except BaseException:  # a bug, a stack that did not start, Ctrl-C: say where its output is
            self.say(f"the soak ended early; the stack's output is in {log_dir}")
            raise
        finally:
            self._cleanup()
            if not self.keep_logs and result.get("ok"):
                shutil.rmtree(log_dir, ignore_errors=True)
                result["logs"] = None
            os.environ.pop(MARKER, None)
        return result

    def _token(self, username: str, password: str) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=30)
        try:
            conn.request("POST", "/api/auth/token/", json.dumps({"username": username, "password": password}),
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status != 200:
            raise RuntimeError(f"the token endpoint answered {response.status} for {username}: {body[:200]!r}")
        return json.loads(body)["token"]

    def _soak(self, clients: list[Client]) -> None:
        seconds = self.minutes * 60
        plan = fault_plan(self.seed, seconds)
        self.line(f"soak: {len(clients)} clients for {seconds:.0f} s, {len(plan)} faults planned (seed {self.seed})")
        self.injector = threading.Thread(target=self._inject_all, args=(plan,), name="chaos-faults", daemon=True)
        for client in clients:
            client.start()
        self.injector.start()
        while self.clock() < seconds:
            time.sleep(0.5)
            self._watch()
        self.stopping.set()
        self.injector.join()
        for client in clients:
            client.join(120)

    def _drain(self, clients: list[Client]) -> None:
        """No submissions, no faults: holds released, services stopped, then wait until every job ended or the
        drain time is up."""
        self.line(f"drain: up to {self.drain_minutes * 60:.0f} s; releasing holds, stopping services")
        for client in clients:
            client.due(everything=True)
        deadline = self.clock() + self.drain_minutes * 60
        left = -1
        while self.clock() < deadline:
            self._watch()
            left = Job.objects.exclude(status__in=TERMINAL_STATUSES).count()
            if left == 0:
                break
            time.sleep(2)
        connection.close()
        self.line(f"drain over: {left if left >= 0 else 'unknown'} jobs not ended")

    def _watch(self) -> None:
        """A stack process that ended by itself (not by a fault) is reported and started again."""
        with self.stack_lock:
            for name in ("web", "worker", "beat"):
                process = self.stack.processes.get(name)
                if process is not None and process.poll() is not None:
                    self.exited.append({"process": name, "at": self.clock(), "exit_code": process.returncode,
                                        "output": self.stack.output(name, 15)})
                    self.line(f"{name} exited by itself with code {process.returncode}: started again")
                    self.stack.processes.pop(name)
                    self.stack.restart(name)

    # --- faults --------------------------------------------------------------------------------------------
    def _inject_all(self, plan: list[tuple[float, str, float]]) -> None:
        for at, kind, detail in plan:
            if self.stopping.wait(max(0.0, at - self.clock())):
                return
            started = self.clock()
            try:
                text = self._inject(kind, detail)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is reported, not fatal
                text = f"could not be injected: {type(exc).__name__}: {exc}"
            self.faults.append(Fault(kind, started, text, self.clock()))
            self.say(f"[{started:7.1f} s] fault {kind}: {text}")

    def _inject(self, kind: str, detail: float) -> str:
        stack = self.stack
        with self.stack_lock:
            if kind in ("kill_worker", "kill_beat"):
                name = kind.removeprefix("kill_")
                pid = stack.processes[name].pid
                stack.kill(name)
                delay = 0.5 + 2.5 * detail
                time.sleep(delay)
                stack.restart(name)
                return f"SIGKILL {name} (pid {pid}, with its children); started again after {delay:.1f} s"
            if kind == "kill_web_worker":
                workers = stack.children("web")
                if not workers:
                    return "no gunicorn worker to kill (the master is starting them)"
                pid = workers[int(detail * len(workers))]
                os.kill(pid, signal.SIGKILL)
                return f"SIGKILL gunicorn worker pid {pid} (of {len(workers)}); the master starts another"
            if kind == "redis_pause":
                milliseconds = 3000 + int(2000 * detail)
                redis.Redis.from_url(self.broker_url).execute_command("CLIENT", "PAUSE", milliseconds, "ALL")
                return f"Redis CLIENT PAUSE {milliseconds} ALL"
            if kind == "db_terminate":  # a failover: sessions end for a moment, those under way among them
                seconds, ended, rounds = 1 + 2 * detail, 0, 0
                db = connection.settings_dict
                with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432,
                                     user=db["USER"] or "postgres", dbname=db["NAME"], autocommit=True) as admin:
                    deadline = time.monotonic() + seconds
                    while time.monotonic() < deadline:
                        ended += admin.execute(
                            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
                        rounds += 1
                        time.sleep(0.2)
                return (f"pg_terminate_backend of every session of the stack, {rounds} times over {seconds:.1f} s "
                        f"({ended} sessions ended)")
            if kind == "stop_worker":
                seconds = 2 + 3 * detail
                stack.signal("worker", signal.SIGSTOP)
                self.frozen = True
                try:
                    time.sleep(seconds)
                finally:
                    stack.signal("worker", signal.SIGCONT)
                    self.frozen = False
                return f"SIGSTOP worker (with its pool), SIGCONT {seconds:.1f} s later"
        raise ValueError(kind)

    # --- the end -------------------------------------------------------------------------------------------
    def _counters(self) -> dict[str, float]:
        """The stack's counters as ``/metrics`` exports them (the table behind them when it does not answer)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=30)
        try:
            conn.request("GET", "/metrics", headers={
                "Authorization": f"Bearer {self.stack.env['GPUPORTAL_METRICS_TOKEN']}"})
            response = conn.getresponse()
            text = response.read().decode()
            if response.status == 200:
                return {name: float(value) for name, value in re.findall(
                    r"^(gpuportal_\w+_total(?:\{[^}]*\})?) (\S+)$", text, re.MULTILINE)}
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            conn.close()
        return {f"{c.name}{{{c.labels}}}" if c.labels else c.name: c.value
                for c in OperationalCounter.objects.filter(name__endswith="_total")}

    def _cleanup(self) -> None:
        """Nothing the soak started outlives it: the stack (a frozen worker thawed first, so that it can hear
        SIGTERM), Redis unpaused, then every process still carrying the marker (stand-ins, orphans)."""
        self.stopping.set()
        if self.injector is not None:  # a fault under way finishes first (it may start a process again)
            self.injector.join(60)
        if self.stack is not None:
            if self.frozen and "worker" in self.stack.processes:
                self.stack.signal("worker", signal.SIGCONT)
            with contextlib.suppress(Exception):
                self.stack.stop()
        with contextlib.suppress(Exception):
            redis.Redis.from_url(self.broker_url).execute_command("CLIENT", "UNPAUSE")
        stop_marked(self.marker)

    def report(self, counters: dict[str, float], codes: dict, log_dir: Path, left: list[dict]) -> dict:
        """The figures and findings (see the module and ``manage.py chaos_soak --help``)."""
        repaired = invariants.settle()
        now = timezone.now() + invariants.LATER
        found = invariants.examine(now)
        jobs = found.jobs
        events = defaultdict(list)
        for event in JobEvent.objects.order_by("pk"):
            events[event.job_id].append(event)
        batchlike = [job for job in jobs if job.kind != WorkloadKind.SERVICE]
        stuck = [asdict(f) for f in found.stuck + invariants.waits_forever(batchlike)]
        stuck_ids = {f["job"] for f in stuck}
        submitted = self.ledger.submissions
        lost, duplicated, unacknowledged = submission_findings(submitted, jobs)
        errors, during_terminate = self._server_errors()
        logged, unwritten = count_pass_failures(log_dir / "worker.log")
        counted = int(OperationalCounter.objects.filter(name="gpuportal_scheduling_pass_failures_total")
                      .values_list("value", flat=True).first() or 0)
        result = {
            "seed": self.seed, "minutes": self.minutes, "drain_minutes": self.drain_minutes,
            "faults": [{"kind": f.kind, "at": f.at, "detail": f.detail} for f in self.faults],
            "submitted": len(submitted),
            "acknowledged": sum(1 for s in submitted.values() if s.acknowledged),
            "same_key_pairs": sum(1 for s in submitted.values() if s.paired),
            "requests": len(self.ledger.calls), "actions": dict(self.ledger.actions),
            "lost": lost, "duplicated": duplicated, "stored_unacknowledged": unacknowledged,
            "stuck": stuck,
            "unfinished": [{"job": j.pk, "status": j.status, "wait_reason": j.wait_reason} for j in batchlike
                           if j.status not in TERMINAL_STATUSES and j.pk not in stuck_ids],
            "gpus_held_by_inactive": [asdict(f) for f in found.held + found.overcommitted],
            "illegal_transitions": [asdict(f) for f in found.illegal],
            "holds_ignored": holds_ignored(events) + self._holds_answered_late(),
            "replicas_restarted_after_stop": replicas_after_stop(jobs, events) + left,
            "server_errors": errors, "server_errors_during_db_terminate": during_terminate,
            "pass_failures": {"logged": logged, "counted": counted, "count_writes_lost": unwritten},
            "pass_failures_uncounted": max(0, logged - counted - unwritten),
            "processes_exited": self.exited, "client_errors": self.ledger.errors,
            "audit_ok": bool(found.chain and found.chain.ok), "audit_records": found.chain.checked,
            "audit_problem": found.chain.problem,
            "counters": counters, "reconcile_repairs": repaired.as_dict()["counts"],
            "jobs": dict(Counter(job.status for job in jobs)), "stop_codes": codes,
            "logs": str(log_dir),
        }
        result["violations"] = {name: len(result[name]) if isinstance(result[name], list) else result[name]
                                for name in VIOLATIONS if result[name]}
        if not result["audit_ok"]:
            result["violations"]["audit"] = 1
        result["ok"] = not result["violations"]
        return result

    def _server_errors(self) -> tuple[list[dict], list[dict]]:
        """5xx answers the clients saw; the 503s of requests under way when the database ended their session
        (``db_terminate``) are told apart: a request whose connection is killed mid-query cannot succeed, and
        the API says so with a 503 and Retry-After (``gpuportal.web.api``). A 500 is always a finding."""
        terminations = [(f.at, f.ended) for f in self.faults if f.kind == "db_terminate"]
        errors, during = [], []
        for call in self.ledger.calls:
            if call.status is None or call.status < 500:
                continue
            entry = {"user": call.user, "method": call.method, "path": call.path, "status": call.status,
                     "at": call.started, "seconds": round(call.ended - call.started, 3)}
            if call.status == 503 and any(call.started <= end and start <= call.ended for start, end in terminations):
                during.append(entry)
            else:
                errors.append(entry)
        return errors, during

    def _holds_answered_late(self) -> list[dict]:
        """A hold answered 2xx must describe a job that still waits: held, it may not be admitted."""
        return [{"job": h.job, "problem": f"hold by {h.user} answered 2xx at {h.at:.1f} s for a job that is "
                                          f"{h.status or 'of unknown status'} (held_by {h.held_by!r})"}
                for h in self.ledger.holds if h.status not in WAITING_STATUSES]


#: The findings that make a soak fail (each a list of findings naming jobs, or a count).
VIOLATIONS = ("lost", "duplicated", "stuck", "gpus_held_by_inactive", "illegal_transitions", "holds_ignored",
              "replicas_restarted_after_stop", "server_errors", "pass_failures_uncounted", "processes_exited",
              "client_errors")


# --- the checks that need the whole history -----------------------------------------------------------------

def submission_findings(submitted: dict[str, Submission], jobs: list[Job]) -> tuple[list, list, list]:
    """(lost, duplicated, stored but never acknowledged) by idempotency key. A submission is stored as one
    job (batch), or as one group with its members (array, service): each key's name finds what it stored."""
    singles, groups = defaultdict(list), defaultdict(list)
    for job in jobs:
        if job.group_id is None:
            singles[job.name].append(job.pk)
    for pk, name in JobGroup.objects.values_list("pk", "name"):
        groups[name].append(pk)
    lost, duplicated, unacknowledged = [], [], []
    names = set()
    for key, sub in submitted.items():
        names.add(sub.name)
        grouped = sub.kind != WorkloadKind.BATCH
        stored = sorted(groups[sub.name] if grouped else singles[sub.name])
        what = "group" if grouped else "job"
        answered = {(a[2] if grouped else a[1]) for a in sub.acknowledged}
        if len(stored) > 1:
            duplicated.append({"key": key, "jobs": stored, "problem": f"{len(stored)} {what}s stored for one key"})
        if len(answered) > 1:
            duplicated.append({"key": key, "jobs": sorted(answered), "problem": f"one key answered with "
                                                                              f"{len(answered)} different {what}s"})
        if answered and not set(answered) & set(stored):
            lost.append({"key": key, "jobs": sorted(a for a in answered if a is not None),
                         "problem": f"answered 2xx with {what} {sorted(answered)} but stored {stored or 'nothing'}"})
        if stored and not answered:
            unacknowledged.append({"key": key, "jobs": stored, "answers": [a[0] for a in sub.answers]})
    strays = sorted(pk for name, pks in {**singles, **groups}.items() if name not in names for pk in pks)
    if strays:
        duplicated.append({"key": None, "jobs": strays, "problem": "stored under no key the clients sent"})
    return lost, duplicated, unacknowledged


def holds_ignored(events: dict[int, list[JobEvent]]) -> list[dict]:
    """Holds that did not hold, read from each job's timeline in the order it was written (a hold and an
    admission of one job take the same row lock, so the order of their events is the order they happened):
    a hold recorded while the job no longer waited, or an admission after a hold with no release between."""
    found = []
    for job, timeline in events.items():
        status, hold = "", None
        for event in timeline:
            if event.kind == JobEvent.Kind.HOLD:
                if is_hold(event):
                    if status not in WAITING_STATUSES or event.from_status not in WAITING_STATUSES:
                        found.append({"job": job, "problem": f"held (event {event.pk}, {event.at:%H:%M:%S.%f}) "
                                                             f"while {status or event.from_status}"})
                    hold = event
                else:
                    hold = None
            elif event.from_status != event.to_status:
                if event.to_status == JobStatus.ADMITTED and hold is not None:
                    found.append({"job": job, "problem": f"admitted (event {event.pk}, {event.at:%H:%M:%S.%f}) "
                                                         f"while held since event {hold.pk} "
                                                         f"({hold.at:%H:%M:%S.%f}), with no release between"})
                status = event.to_status
    return found


def is_hold(event: JobEvent) -> bool:
    """A hold event holds (rather than releases): its data says who holds it; a timeline written before the
    data said so tells by the phrase it was written with."""
    data = event.data or {}
    if "held_by" in data:
        return bool(data["held_by"])
    return str((data.get(phrases.DATA_KEY) or {}).get("msgid", event.reason)).startswith("Held by")


def replicas_after_stop(jobs: list[Job], events: dict[int, list[JobEvent]]) -> list[dict]:
    """Replicas that moved after their stop, by what they left behind rather than by clock readings (a stop
    may stamp its time before it waits for the row a restart holds, so a restart serialised before the stop can
    carry a later time): a status move after the replica ended (a "Replica started" on a cancelled replica); a
    replica of a stopped service that has not ended. The servers themselves are ``servers_left``'s."""
    found = []
    groups = {g.pk: g for g in JobGroup.objects.filter(kind=JobGroup.Kind.SERVICE)}
    for job in jobs:
        if job.kind != WorkloadKind.SERVICE:
            continue
        moves = [e for e in events[job.pk] if e.from_status != e.to_status]
        ended = next((i for i, e in enumerate(moves) if e.to_status in TERMINAL_STATUSES), None)
        if ended is not None and ended + 1 < len(moves):
            after = moves[ended + 1]
            found.append({"job": job.pk, "problem": f"moved {after.from_status} -> {after.to_status} (event "
                                                    f"{after.pk}: {after.reason}) after it ended "
                                                    f"{moves[ended].to_status} (event {moves[ended].pk})"})
        group = groups.get(job.group_id)
        if group is not None and group.stopped_at is not None and job.status not in TERMINAL_STATUSES:
            found.append({"job": job.pk, "problem": f"replica still {job.status} after its service {group.pk} was "
                                                    f"stopped at {group.stopped_at:%H:%M:%S.%f}"})
    return found


#: How long the stand-ins of stopped services are given to exit before one still running is a finding.
LEFT_SECONDS = 10.0


def servers_left(marker: str) -> list[dict]:
    """Servers that outlived their replica's stop, read once every service was stopped and while the stack still
    runs (a stand-in ends with the process that started it, so after the stack stops none could be seen):

    * the server recorded for an ended replica still holds its lease (its pid file, which every stop removes):
      it was started after the stop, or the stop missed it;
    * a stand-in server process of this soak still running, but the one recorded for a notebook or the named ports
      of a job that still runs (the demo's notebooks and training run's TensorBoard)."""
    found = []
    for job in Job.objects.filter(kind=WorkloadKind.SERVICE, status__in=TERMINAL_STATUSES):
        serving = (job.executor_state or {}).get("serving") or {}
        if _lease_held(serving):
            restart = f"restart #{serving['restarts']}" if serving.get("restarts") else "first start"
            found.append({"job": job.pk, "problem": f"{job.status}, but the server of its {restart} (pid "
                                                    f"{serving.get('pid')}, started {serving.get('started_at')}) "
                                                    "still holds its lease: nobody stopped it"})
    for pid, argv in marked_processes(marker):
        if any(arg.endswith("standin.py") for arg in argv):
            job = argv[argv.index("--job") + 1] if "--job" in argv else "?"
            job_id = int(job) if job.isascii() and job.isdigit() else None
            row = Job.objects.filter(pk=job_id).values("kind", "status", "executor_state").first() or {}
            state = row.get("executor_state") or {}
            recorded = {(state.get(key) or {}).get("pid") for key in ("serving", "ports_serving")}
            if row.get("status") == JobStatus.RUNNING and row.get("kind") != WorkloadKind.SERVICE and pid in recorded:
                continue  # a notebook's server or a job's named ports while it still runs (the demo's), as recorded
            found.append({"job": job_id, "problem": f"its stand-in server (pid {pid}, {' '.join(argv[2:6])}) still "
                                                    f"runs after every service was stopped (the job: "
                                                    f"{row.get('kind')}, {row.get('status')}, recorded {recorded})"})
    return found


def _lease_held(serving: dict) -> bool:
    """The stand-in recorded in ``serving`` still has its pid file, written with its own pid (a file of the
    same name from another installation's job would not name this pid)."""
    try:
        return Path(serving["pid_file"]).read_text().strip() == str(serving["pid"])
    except (KeyError, OSError, TypeError):
        return False


def count_pass_failures(log: Path) -> tuple[int, int]:
    """(scheduling passes the worker logged as raised, counter writes it logged as lost). Each raised pass must
    be counted, unless its count could not be written and the worker said so (a second failure of the database
    right after the first: a lost sample, logged, is the portal's stated behaviour, not a silent one)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return 0, 0
    return (sum(1 for line in lines if PASS_RAISED.search(line)),
            sum(1 for line in lines if COUNT_LOST in line))


# --- processes ----------------------------------------------------------------------------------------------

def marked_processes(marker: str) -> list[tuple[int, list[str]]]:
    """(pid, argv) of every process but this one whose environment carries ``MARKER=marker``."""
    wanted, found = f"{MARKER}={marker}".encode(), []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(") ", 1)[1][:1] in ("Z", "X"):
                continue  # ended, waiting to be collected
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        found.append((pid, argv))
    return found


def stop_marked(marker: str, grace: float = 5.0) -> list[int]:
    """End every process carrying the marker, by its id: a stand-in by removing its lease (its pid file) and
    SIGTERM, others by SIGTERM; SIGKILL for whatever is left after ``grace`` seconds. Returns their ids."""
    ended = []
    for pid, argv in marked_processes(marker):
        if "--pid-file" in argv:
            with contextlib.suppress(OSError, IndexError):
                Path(argv[argv.index("--pid-file") + 1]).unlink(missing_ok=True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        ended.append(pid)
    deadline = time.monotonic() + grace
    while ended and time.monotonic() < deadline and marked_processes(marker):
        time.sleep(0.2)
    for pid, _argv in marked_processes(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in ended:  # those that were our children: collected, not left as zombies
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return ended
