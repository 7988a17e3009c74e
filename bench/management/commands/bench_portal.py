"""Load on the production stack: ``manage.py bench_portal --clients 20 --seconds 30 [--churn] [--url URL]``.

Without ``--url`` it seeds a tenant with ``--jobs`` jobs in this settings' database, starts gunicorn in
production mode and a real Celery worker on it, and measures there; with ``--url`` it measures a running
portal, signing in as ``--username``/``--password`` (a page whose object that person cannot see, such as a
job of another tenant, is skipped and listed under ``skipped``, not counted as errors). Each page is measured
in turn with every client on it (``--seconds`` shared among the pages): the login form first, as the floor
(a plain Django page: what the others are compared with, measured in the same run on the same machine), then
the dashboard, the job list (as it opens; with every column a person may add, longest running first; and that
table alone, as the page's refresh in place asks for it), a job's page, the API job list, and submission through
the API. Prints one JSON
object: ``floor`` and each of ``pages`` hold ``name``, ``rps``, ``p50_ms``, ``p95_ms``, ``max_ms``,
``errors`` (any answer but 200 or 201, with ``error_statuses`` when there are some); each page also its ``rps``
as a share of the floor's (``vs_floor``) and, with the portal started here, ``web_cpu_ms``: the web processes'
CPU time per request, which other work on a shared machine does not inflate.

``--churn`` keeps the cluster moving while it measures, as a busy site does: a client of its own submits
``--churn-rate`` short jobs a second through the API, the scheduling pass admits them, the simulated cluster
runs and ends them (the portal started here then runs Celery beat with a one-second pass and status sync, and
simulated time a hundred times faster). Every one of those changes starts a new page-cache generation, so
the figures are those of pages rendered afresh. The pages are measured at rest first (``at_rest``), then with
the churn (``pages``), on the same portal, so that the two compare; ``churn`` says what was achieved during
the second measure: jobs submitted, started and ended per second (of the jobs the churn submitted; with the
portal started here also every job's, ``all_started_per_s`` and ``all_ended_per_s``).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import statistics
import threading
import time
from collections import Counter
from datetime import datetime
from urllib.parse import urlencode, urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from fleet.models import GPU, Cluster, Node
from scheduling import lifecycle
from scheduling.models import TERMINAL_STATUSES, Job, JobEvent, JobStatus, TaskType
from tenants.models import Membership, Project, Quota, Role, Tenant

from ...stack import ProductionStack

PREFIX = "benchportal"
MODEL = "BENCH-GPU"
#: The model the seeded queued jobs wait for: no node has it, so they stay in the queue (with their reasons)
#: and leave the bench's GPUs to the churn's jobs.
WAITING_MODEL = "BENCH-GPU-WAIT"
STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.QUEUED, JobStatus.RUNNING)
#: With ``--churn``, what the portal started here is told beside bench.stack's production settings: a pass and a
#: status sync every second, simulated runs a hundred times faster than real time.
CHURN_ENV = {"GPUPORTAL_SIMULATION_TIME_SCALE": "0.01", "GPUPORTAL_PASS_INTERVAL": "1",
             "GPUPORTAL_SYNC_INTERVAL": "1"}
#: A churn job's simulated run: 1.2 s of real time at CHURN_ENV's scale.
CHURN_COMMAND = "sim:minutes=2 sim:outcome=succeeded"


class Client:
    """One simulated user: a keep-alive connection, a session cookie for pages and a token for the API."""

    def __init__(self, base: str, username: str = "", password: str = "", timeout: float = 30):
        parts = urlsplit(base)
        self.host, self.port = parts.hostname, parts.port or 80
        self.timeout, self.cookies, self.token = timeout, {}, ""
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        if username:  # else anonymous: the floor's clients
            self._sign_in(username, password)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        for attempt in range(2):  # a server may close an idle keep-alive connection: reconnect once
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                if attempt:
                    raise
        for header, value in response.getheaders():
            if header.lower() == "set-cookie":
                name, _sep, rest = value.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
        return response.status, data

    def twin(self) -> Client:
        """The same person (session and token) on a connection of its own."""
        twin = Client(f"http://{self.host}:{self.port}", timeout=self.timeout)
        twin.cookies, twin.token = dict(self.cookies), self.token
        return twin

    def _sign_in(self, username: str, password: str) -> None:
        status, page = self.request("GET", "/accounts/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if status != 200 or token is None:
            raise CommandError(f"the login page answered {status}")
        form = urlencode({"csrfmiddlewaretoken": token.group(1).decode(), "username": username,
                          "password": password}).encode()
        status, _body = self.request("POST", "/accounts/login/", form, {
            "Content-Type": "application/x-www-form-urlencoded", "Referer": f"http://{self.host}:{self.port}/"})
        if status != 302:
            raise CommandError(f"signing in as {username} answered {status}")
        status, body = self.request("POST", "/api/auth/token/", json.dumps(
            {"username": username, "password": password}).encode(), {"Content-Type": "application/json"})
        if status != 200:
            raise CommandError(f"the token endpoint answered {status}: {body[:200]!r}")
        self.token = json.loads(body)["token"]

    def api(self, method: str, path: str, payload: dict | None = None):
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        body = None
        if payload is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(payload).encode()
        saved, self.cookies = self.cookies, {}  # the API by token alone, as a script would
        try:
            return self.request(method, path, body, headers)
        finally:
            self.cookies = saved


def _connect(count: int, base: str, username: str = "", password: str = "") -> list[Client]:
    """``count`` clients, each with a session of its own: the first signs in alone (a portal that prefers another
    password hasher stores the password again at that first sign-in, and a session made before that store no
    longer matches it), the others side by side (a password check is slow by design: one after the other they
    took seconds)."""
    clients: list[Client | None] = [Client(base, username, password), *([None] * (count - 1))]
    failures: list[BaseException] = []

    def connect(i: int) -> None:
        try:
            clients[i] = Client(base, username, password)
        except BaseException as error:  # noqa: BLE001 — raised in this thread below
            failures.append(error)

    threads = [threading.Thread(target=connect, args=(i,)) for i in range(1, count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return clients


def _submission(o: dict, command: str) -> dict:
    """A submission body: ``--project`` (``tenant/project``), ``--gpu-model`` and ``--task-type``."""
    return {"project": o["project"], "task_type": o["task_type"], "gpu_model": o["gpu_model"], "gpus_per_node": 1,
            "image": "registry.local/bench:1", "command": command, "max_runtime_minutes": 5}


#: The job list with every column beyond the default ones, longest running first (not remembered: no ``shape``).
SHAPED_LIST = "columns=name,status,start,end,elapsed,wait,exit_code,gpus,model,node,efficiency&sort=-elapsed"


def _pages(job_id: int, submission: dict) -> list[tuple[str, callable]]:
    return [
        ("dashboard", lambda c: c.request("GET", reverse("scheduling:dashboard"))),
        ("job_list", lambda c: c.request("GET", reverse("scheduling:job-list"))),
        # Every column a person may add, in the costliest order, and the table alone as its refresh asks for it.
        ("job_list_shaped", lambda c: c.request("GET", f"{reverse('scheduling:job-list')}?{SHAPED_LIST}")),
        ("job_list_live", lambda c: c.request("GET", f"{reverse('scheduling:job-list-rows')}?{SHAPED_LIST}")),
        ("job_page", lambda c: c.request("GET", reverse("scheduling:job-detail", args=[job_id]))),
        ("api_job_list", lambda c: c.api("GET", reverse("job-list"))),
        ("api_submit", lambda c: c.api("POST", reverse("job-list"), submission)),
    ]


def _floor(client: Client):
    """The login form, anonymous: a plain Django page (a template, a form, the middleware) to compare with."""
    return client.request("GET", reverse("login"))


def _newest_job(client: Client) -> int:
    """The newest job the person may see (the API lists the newest first); 0 when none."""
    status, body = client.api("GET", reverse("job-list"))
    rows = json.loads(body).get("results", []) if status == 200 else []
    return rows[0]["id"] if rows else 0


class Churn:
    """Submits ``rate`` jobs a second through the API until stopped (from ``SENDERS`` connections, so that the rate
    holds while a submission takes longer than the gap between two); then reads back what became of them."""

    SENDERS = 4

    def __init__(self, client: Client, body: dict, rate: float):
        self.client, self.body, self.gap = client, body, 1 / rate
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.due = time.monotonic()
        self.submitted: list[int] = []
        self.refused = 0
        self.senders = [threading.Thread(target=self._send, args=(client.twin(),), daemon=True)
                        for _ in range(self.SENDERS)]

    def start(self) -> None:
        for sender in self.senders:
            sender.start()

    def stop(self) -> None:
        self.stopped.set()
        for sender in self.senders:
            sender.join()

    def _send(self, client: Client) -> None:
        while True:
            with self.lock:  # the next submission's moment, one gap after the one before
                due, self.due = self.due, self.due + self.gap
            if self.stopped.wait(max(0.0, due - time.monotonic())):
                return
            try:
                status, body = client.api("POST", reverse("job-list"), self.body)
            except (OSError, http.client.HTTPException):
                status, body = 0, b""
            with self.lock:
                if status == 201:
                    self.submitted.append(json.loads(body)["id"])
                else:
                    self.refused += 1

    def rates(self, began: datetime, ended: datetime) -> dict:
        """Per second of the measure (``began`` to ``ended``): jobs submitted, and of them started and ended."""
        seconds = max((ended - began).total_seconds(), 1e-9)
        started = finished = 0
        for job in self.submitted:
            status, body = self.client.api("GET", reverse("job-detail", args=[job]))
            if status != 200:
                continue
            row = json.loads(body)
            started += _within(row.get("started_at"), began, ended)
            finished += _within(row.get("finished_at"), began, ended)
        return {"rate_asked": round(1 / self.gap, 2), "submitted": len(self.submitted), "refused": self.refused,
                "submitted_per_s": round(len(self.submitted) / seconds, 2),
                "started_per_s": round(started / seconds, 2), "ended_per_s": round(finished / seconds, 2)}


def _moves(began: datetime, ended: datetime) -> dict:
    """Jobs of the whole portal (the churn's, the submission page's) that started and ended, per second."""
    seconds = max((ended - began).total_seconds(), 1e-9)
    events = JobEvent.objects.filter(kind=JobEvent.Kind.STATUS, at__range=(began, ended))
    return {"all_started_per_s": round(events.filter(to_status=JobStatus.RUNNING).count() / seconds, 2),
            "all_ended_per_s": round(events.filter(to_status__in=TERMINAL_STATUSES).count() / seconds, 2)}


def _within(moment: str | None, began: datetime, ended: datetime) -> bool:
    return moment is not None and began <= datetime.fromisoformat(moment) <= ended


def _measure(clients: list[Client], name: str, call, seconds: float, stack: ProductionStack | None = None) -> dict:
    """Every client calls ``call`` in a loop for ``seconds``. With the portal started here, also the web
    processes' CPU time per request (``web_cpu_ms``): comparable between runs on a machine others share."""
    cpu = stack.cpu_seconds("web") if stack is not None else None
    latencies: list[float] = []
    errors: Counter = Counter()  # by status (0: no answer)
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(client: Client) -> None:
        mine, failed = [], Counter()
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                status, _body = call(client)
            except (OSError, http.client.HTTPException):
                status = 0
            mine.append(time.perf_counter() - started)
            if status not in (200, 201):  # a redirect (to the sign-in form, say) is no answer either
                failed[status] += 1
        with lock:
            latencies.extend(mine)
            errors.update(failed)

    threads = [threading.Thread(target=run, args=(client,)) for client in clients]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    ordered = sorted(latencies) or [0.0]
    figures = {"name": name, "requests": len(latencies), "rps": round(len(latencies) / elapsed, 1),
               "p50_ms": round(statistics.median(ordered) * 1000, 1),
               "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 1),
               "max_ms": round(ordered[-1] * 1000, 1), "errors": errors.total()}
    if errors:
        figures["error_statuses"] = {str(status): count for status, count in sorted(errors.items())}
    if cpu is not None and latencies:
        figures["web_cpu_ms"] = round((stack.cpu_seconds("web") - cpu) * 1000 / len(latencies), 2)
    return figures


class Command(BaseCommand):
    help = "Measure the portal under concurrent clients (pages and API), at rest or with --churn; prints JSON."

    def add_arguments(self, parser):
        parser.add_argument("--clients", type=int, default=20)
        parser.add_argument("--seconds", type=float, default=30, help="Shared among the pages measured.")
        parser.add_argument("--url", default="", help="A running portal; otherwise one is started here.")
        parser.add_argument("--username", default=f"{PREFIX}-user")
        parser.add_argument("--password", default="")
        parser.add_argument("--job", type=int, default=0, help="The job whose page is measured (default: the "
                                                               "newest the person may see).")
        parser.add_argument("--project", default=f"{PREFIX}/load", help="Where submissions go (tenant/project).")
        parser.add_argument("--gpu-model", default=MODEL)
        parser.add_argument("--task-type", default="test")
        parser.add_argument("--churn", action="store_true", help="Keep jobs submitted, admitted, running and "
                                                                 "ending while measuring.")
        parser.add_argument("--churn-rate", type=float, default=2.0, help="Jobs a second the churn submits.")
        parser.add_argument("--jobs", type=int, default=2000, help="Jobs seeded when the portal is started here.")
        parser.add_argument("--web-workers", type=int, default=0, help="gunicorn workers (default: 2 per CPU).")

    _stack: ProductionStack | None = None

    def handle(self, *args, **o):
        if o["clients"] < 1 or o["seconds"] <= 0 or o["churn_rate"] <= 0:
            raise CommandError("--clients must be at least 1, --seconds and --churn-rate above 0")
        churn = at_rest = None
        try:
            if o["url"]:
                base, password = o["url"].rstrip("/"), o["password"]
                if not password:
                    raise CommandError("--password is required with --url")
            else:
                password = secrets.token_urlsafe(18)
                self._seed(o["username"], password, o["jobs"])
                base = self._start(o["web_workers"], o["churn"])
            clients = _connect(o["clients"], base, o["username"], password)
            job_id = o["job"] or _newest_job(clients[0])
            pages = _pages(job_id, _submission(o, "sim:minutes=1"))
            share = o["seconds"] / ((2 if o["churn"] else 1) * len(pages) + 1)
            anonymous = _connect(o["clients"], base)
            floor = _measure(anonymous, "login_form", _floor, share, self._stack)
            for client in anonymous:
                client.conn.close()
            results, skipped = self._round(clients, pages, share)
            if o["churn"]:
                at_rest, churn = results, Churn(clients[0].twin(), _submission(o, CHURN_COMMAND), o["churn_rate"])
                churn.start()
                began = timezone.now()
                results, skipped = self._round(clients, pages, share)
                ended = timezone.now()
                churn.stop()
                churn = churn.rates(began, ended)
                if self._stack is not None:  # this database is the portal's: every job that moved, not only ours
                    churn.update(_moves(began, ended))
        finally:
            if self._stack is not None:
                self._stack.stop(warm=False)
        for page in [*results, *(at_rest or [])]:
            page["vs_floor"] = round(page["rps"] / floor["rps"], 3) if floor["rps"] else 0.0
        self.stdout.write(json.dumps({"url": base, "clients": o["clients"], "seconds": o["seconds"],
                                      "jobs": Job.objects.count() if not o["url"] else None, "job": job_id,
                                      "churn": churn, "floor": floor, "at_rest": at_rest, "pages": results,
                                      "skipped": skipped}))

    def _round(self, clients: list[Client], pages, share: float) -> tuple[list[dict], list[dict]]:
        """Each page measured in turn: (figures, pages skipped because the person may not see them)."""
        results, skipped = [], []
        for name, call in pages:
            status, _body = call(clients[0])  # a page the person may not see is skipped, not an error
            if status in (403, 404):
                skipped.append({"name": name, "status": status})
                continue
            results.append(_measure(clients, name, call, share, self._stack))
        return results, skipped

    # --- a portal of our own ------------------------------------------------------------------------------
    @transaction.atomic
    def _seed(self, username: str, password: str, jobs: int) -> None:
        task_type, _ = TaskType.objects.get_or_create(code="test", defaults={"name": "Test", "priority": 10})
        cluster, _ = Cluster.objects.get_or_create(name=PREFIX)
        for n in range(4):
            node, created = Node.objects.get_or_create(name=f"{PREFIX}-node-{n}", defaults={
                "cluster": cluster, "gpu_model": MODEL, "datacenter": "dc", "rack": "r", "network_domain": "net"})
            if created:
                GPU.objects.bulk_create(GPU(node=node, index=i, uuid=f"GPU-{PREFIX}-{n}-{i}", model=MODEL,
                                            memory_mb=81920) for i in range(8))
        tenant, _ = Tenant.objects.get_or_create(name=PREFIX, defaults={"display_name": "Bench"})
        project, _ = Project.objects.get_or_create(tenant=tenant, name="load")
        Quota.objects.get_or_create(tenant=tenant, gpu_model=MODEL, defaults={"guaranteed_gpus": 16,
                                                                               "limit_gpus": 32})
        user, _ = get_user_model().objects.get_or_create(username=username)
        # A generated password (the validators' rules are met by construction), hashed with Django's default
        # hasher so that the production server started below can check it whatever this process is set up with.
        hasher = PBKDF2PasswordHasher()
        user.password = hasher.encode(password, hasher.salt())
        user.save()
        Membership.objects.get_or_create(user=user, tenant=tenant, role=Role.RESEARCHER)
        have = Job.objects.filter(tenant=tenant).count()
        now = timezone.now()
        for status in STATUSES:
            model = WAITING_MODEL if status == JobStatus.QUEUED else MODEL
            # A running job is on a cluster, as on any site (the status sync asks that cluster's executor).
            placed = {"cluster": cluster, "started_at": now} if status == JobStatus.RUNNING else {}
            lifecycle.import_jobs([Job(tenant=tenant, project=project, owner=user, name=f"{PREFIX}-{i}",
                                       task_type=task_type, gpu_model=model, gpus_per_node=1, image="img",
                                       max_runtime_minutes=60, priority=10, submitted_at=now, **placed)
                                   for i in range(max(0, jobs - have) // len(STATUSES))], status, "bench fixture")
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # fresh statistics, as autovacuum keeps them on a live site

    def _start(self, web_workers: int, churn: bool) -> str:
        if connection.vendor != "postgresql":
            raise CommandError("bench_portal starts the production stack, which needs PostgreSQL (DATABASE_URL)")
        self._stack = ProductionStack(os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/14"), {
            "GPUPORTAL_API_THROTTLE_USER": "1000000/min", "GPUPORTAL_LOGIN_FAILURE_LIMIT": "1000",
            "GPUPORTAL_API_THROTTLE_ANON": "1000000/min",
            # A shared cache, as the production manifests configure one: throttles and the page cache live there.
            "GPUPORTAL_CACHE_URL": os.environ.get("BENCH_CACHE_URL", "redis://127.0.0.1:6379/11"),
            **(CHURN_ENV if churn else {})})
        # The worker (and beat) start while the static files are collected: only the web process needs them.
        self._stack.start_worker(queues="celery")
        if churn:
            self._stack.start_beat()
        self._stack.collectstatic()
        self._stack.start_web(web_workers or 2 * (os.cpu_count() or 1))
        self._stack.wait_answering("/accounts/login/", timeout=60)
        return self._stack.base
