"""Load on the production stack: ``manage.py bench_portal --clients 20 --seconds 30 [--url URL]``.

Without ``--url`` it seeds a tenant with ``--jobs`` jobs in this settings' database, starts gunicorn in
production mode and a real Celery worker on it, and measures there; with ``--url`` it measures a running
portal, signing in as ``--username``/``--password``. Each page is measured in turn with every client on it
(``--seconds`` shared among the pages): the dashboard, the job list, a job's page, the API job list, and
submission through the API. Prints one JSON object with a ``pages`` list (``name``, ``rps``, ``p50_ms``,
``p95_ms``, ``max_ms``, ``errors``).
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
from urllib.parse import urlencode, urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from fleet.models import GPU, Cluster, Node
from scheduling import lifecycle
from scheduling.models import Job, JobStatus, TaskType
from tenants.models import Membership, Project, Quota, Role, Tenant

from ...stack import ProductionStack

PREFIX = "benchportal"
MODEL = "BENCH-GPU"
STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.QUEUED, JobStatus.RUNNING)


class Client:
    """One simulated user: a keep-alive connection, a session cookie for pages and a token for the API."""

    def __init__(self, base: str, username: str, password: str, timeout: float = 30):
        parts = urlsplit(base)
        self.host, self.port = parts.hostname, parts.port or 80
        self.timeout, self.cookies, self.token = timeout, {}, ""
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
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


def _pages(job_id: int) -> list[tuple[str, callable]]:
    submission = {"tenant": PREFIX, "project": "load", "task_type": "test", "gpu_model": MODEL,
                  "gpus_per_node": 1, "image": "registry.local/bench:1", "command": "sim:minutes=1",
                  "max_runtime_minutes": 5}
    return [
        ("dashboard", lambda c: c.request("GET", reverse("scheduling:dashboard"))),
        ("job_list", lambda c: c.request("GET", reverse("scheduling:job-list"))),
        ("job_page", lambda c: c.request("GET", reverse("scheduling:job-detail", args=[job_id]))),
        ("api_job_list", lambda c: c.api("GET", reverse("job-list"))),
        ("api_submit", lambda c: c.api("POST", reverse("job-list"), submission)),
    ]


def _measure(clients: list[Client], name: str, call, seconds: float) -> dict:
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(client: Client) -> None:
        mine, failed = [], 0
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                status, _body = call(client)
                ok = status < 400
            except (OSError, http.client.HTTPException):
                ok = False
            mine.append(time.perf_counter() - started)
            failed += not ok
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    threads = [threading.Thread(target=run, args=(client,)) for client in clients]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    ordered = sorted(latencies) or [0.0]
    return {"name": name, "requests": len(latencies), "rps": round(len(latencies) / elapsed, 1),
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 1),
            "max_ms": round(ordered[-1] * 1000, 1), "errors": errors[0]}


class Command(BaseCommand):
    help = "Measure the portal under concurrent clients (pages and API); prints JSON."

    def add_arguments(self, parser):
        parser.add_argument("--clients", type=int, default=20)
        parser.add_argument("--seconds", type=float, default=30, help="Shared among the pages measured.")
        parser.add_argument("--url", default="", help="A running portal; otherwise one is started here.")
        parser.add_argument("--username", default=f"{PREFIX}-user")
        parser.add_argument("--password", default="")
        parser.add_argument("--jobs", type=int, default=2000, help="Jobs seeded when the portal is started here.")
        parser.add_argument("--web-workers", type=int, default=0, help="gunicorn workers (default: 2 per CPU).")

    _stack: ProductionStack | None = None

    def handle(self, *args, **o):
        if o["clients"] < 1 or o["seconds"] <= 0:
            raise CommandError("--clients must be at least 1 and --seconds above 0")
        try:
            if o["url"]:
                base, password = o["url"].rstrip("/"), o["password"]
                if not password:
                    raise CommandError("--password is required with --url")
                job_id = int(os.environ.get("BENCH_JOB_ID", "1"))
            else:
                password = secrets.token_urlsafe(18)
                job_id = self._seed(o["username"], password, o["jobs"])
                base = self._start(o["web_workers"])
            clients = [Client(base, o["username"], password) for _ in range(o["clients"])]
            pages = _pages(job_id)
            share = o["seconds"] / len(pages)
            results = [_measure(clients, name, call, share) for name, call in pages]
        finally:
            if self._stack is not None:
                self._stack.stop()
        self.stdout.write(json.dumps({"url": base, "clients": o["clients"], "seconds": o["seconds"],
                                      "jobs": Job.objects.count() if not o["url"] else None,
                                      "pages": results}))

    # --- a portal of our own ------------------------------------------------------------------------------
    @transaction.atomic
    def _seed(self, username: str, password: str, jobs: int) -> int:
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
            lifecycle.import_jobs([Job(tenant=tenant, project=project, owner=user, name=f"{PREFIX}-{i}",
                                       task_type=task_type, gpu_model=MODEL, gpus_per_node=1, image="img",
                                       max_runtime_minutes=60, priority=10, submitted_at=now)
                                   for i in range(max(0, jobs - have) // len(STATUSES))], status, "bench fixture")
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # fresh statistics, as autovacuum keeps them on a live site
        return Job.objects.filter(tenant=tenant).order_by("-pk").values_list("pk", flat=True).first()

    def _start(self, web_workers: int) -> str:
        if connection.vendor != "postgresql":
            raise CommandError("bench_portal starts the production stack, which needs PostgreSQL (DATABASE_URL)")
        self._stack = ProductionStack(os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/14"), {
            "GPUPORTAL_API_THROTTLE_USER": "1000000/min", "GPUPORTAL_LOGIN_FAILURE_LIMIT": "1000",
            # A shared cache, as the production manifests configure one: throttles and the page cache live there.
            "GPUPORTAL_CACHE_URL": os.environ.get("BENCH_CACHE_URL", "redis://127.0.0.1:6379/11")})
        self._stack.collectstatic()
        self._stack.start_web(web_workers or 2 * (os.cpu_count() or 1))
        self._stack.start_worker(queues="celery")
        self._stack.wait_answering("/accounts/login/", timeout=60)
        return self._stack.base
