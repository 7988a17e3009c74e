"""``manage.py prod_smoke`` (``make prod-smoke``): the production stack end to end on this machine.

Starts what a site runs — gunicorn (2 workers) serving collected static files, a Celery worker, Celery beat,
in ``GPUPORTAL_ENV=production`` on this machine's PostgreSQL and Redis — beside a simulated cluster whose
nodes run real node agents (simulated NVML) that register over HTTP and are polled by the worker. Then it
drives the stack from outside, as users and operators do:

1. ``/readyz`` answers, and ``manage.py liveness`` says the worker and beat are alive;
2. the agents' GPUs arrive through registration and polling;
3. a person signs in through the login form and sees the dashboard;
4. a job is submitted through the API and one through the CLI; the worker's pass admits them, they run and
   succeed, and they appear in the day's usage (beat's rollup);
5. a batch waits for quota; while a scheduling pass is provably inside its apply step (blocked on a row this
   command holds), the worker is SIGKILLed with its pool; nothing of the pass is half-applied; a new worker
   finishes every job; nothing is lost, nothing twice, no job stuck, no GPU held by an ended job, and the
   audit chain verifies;
6. everything stops cleanly (SIGTERM, exit code 0).

It prints each check as it passes and one JSON summary with the timings (submission to admission, to
success), and exits non-zero at the first failure, naming it. The database of ``DATABASE_URL`` is used as
it is: ``make prod-smoke`` creates a fresh one.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psycopg
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone

from fleet.agents import tokens as agent_tokens
from fleet.models import GPU, Cluster, Node
from gpuportal.text.dates import local_day
from scheduling.models import ACTIVE_STATUSES, Job, JobAllocation, JobStatus, TaskType
from tenants.models import Membership, Project, Quota, Role, Tenant

from ...stack import ProductionStack, free_port

PREFIX = "smoke"
MODEL = "A100"
NODES, GPUS_PER_NODE = 2, 4


class SmokeFailure(CommandError):
    pass


class Http:
    """A browser-like client: cookies, CSRF from the cookie, JSON helpers."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar),
                                                  _NoRedirect())

    def call(self, method: str, path: str, data: bytes | None = None, headers: dict | None = None):
        # the stack this command started, over http://127.0.0.1 (never a URL from input)
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})  # noqa: S310
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def api(self, method: str, path: str, token: str, body: dict | None = None, headers: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        status, _headers, content = self.call(method, path, data, {
            "Authorization": f"Token {token}", "Content-Type": "application/json", **(headers or {})})
        return status, (json.loads(content) if content.strip() else None)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect is an answer to check, not to follow


class Command(BaseCommand):
    help = "Start the production stack (gunicorn, Celery worker and beat, node agents) and drive it end to end."

    def add_arguments(self, parser):
        parser.add_argument("--broker-url", default=os.environ.get("SMOKE_BROKER_URL", "redis://127.0.0.1:6379/12"),
                            help="Redis database of the smoke's broker (flushed first).")
        parser.add_argument("--batch", type=int, default=6, help="Jobs of the batch whose pass is killed.")
        parser.add_argument("--timeout", type=float, default=120, help="Seconds each wait may take.")

    def handle(self, *args, **options):
        if connection.vendor != "postgresql":
            raise CommandError("prod_smoke starts the production stack, which needs PostgreSQL (DATABASE_URL)")
        self.timeout = options["timeout"]
        self.checked: list[str] = []
        self.figures: dict[str, float | int] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="gpuportal-smoke-"))
        redis.Redis.from_url(options["broker_url"]).flushdb()  # no message of an earlier run
        password = secrets.token_urlsafe(18)
        # The seed below issues agent tokens (derived from a secret) and writes audit records (chained with a
        # key): with the stack's secret and key, so that the stack derives the same tokens and verifies the chain.
        settings.AGENT_TOKEN_SECRET, audit_key = secrets.token_urlsafe(48), secrets.token_urlsafe(48)
        settings.AUDIT["KEY"] = audit_key.encode()
        tokens = self._seed(password)
        stack = ProductionStack(options["broker_url"], {"GPUPORTAL_AGENT_TOKEN_SECRET": settings.AGENT_TOKEN_SECRET,
                                                        "GPUPORTAL_AUDIT_KEY": audit_key,
            "GPUPORTAL_AGENT_NETWORKS": "127.0.0.0/8", "GPUPORTAL_POLL_INTERVAL": "2",
            "GPUPORTAL_PASS_INTERVAL": "2", "GPUPORTAL_SYNC_INTERVAL": "1", "GPUPORTAL_ROLLUP_INTERVAL": "3",
            "GPUPORTAL_RECONCILE_INTERVAL": "5", "LOG_LEVEL": "WARNING"}, log_dir=str(self.tmp))
        started = time.monotonic()
        try:
            stack.collectstatic()
            stack.start_web(workers=2)
            stack.start_worker(concurrency=2)
            stack.start_beat()
            self._ok("ready", f"/readyz answered 200 after {stack.wait_answering('/readyz', self.timeout):.1f} s "
                              "(database, broker, migrations)")
            self._start_agents(stack, tokens)
            self._wait(lambda: self._alive(stack, "worker") and self._alive(stack, "beat"),
                       "manage.py liveness worker and beat to succeed")
            self._ok("liveness", "worker and beat liveness files fresh (manage.py liveness)")
            self._wait(lambda: GPU.objects.filter(node__cluster__name=PREFIX).count() == NODES * GPUS_PER_NODE,
                       "the agents' GPUs to arrive by registration and polling")
            self._ok("agents", f"{NODES} agents registered over HTTP; {NODES * GPUS_PER_NODE} GPUs from their polls")
            web = Http(stack.base)
            self._sign_in(web, password)
            token = self._token(web, password)
            self._run_two_jobs(stack, web, token)
            self._kill_mid_pass(stack, web, token, options["batch"])
            self._usage(web, token)
        except BaseException:  # a failed check, a bug or Ctrl-C: say what the processes said, stop them all
            for name in stack.processes:
                self.stderr.write(f"--- last lines of {name} ---\n{stack.output(name)}")
            stack.stop()
            raise
        codes = stack.stop()
        if any(code != 0 for code in codes.values()):
            raise SmokeFailure(f"not every process stopped cleanly on SIGTERM: exit codes {codes}")
        self._ok("stop", f"gunicorn, worker and beat stopped on SIGTERM with exit code 0 ({', '.join(codes)})")
        self.figures["total_seconds"] = round(time.monotonic() - started, 1)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.stdout.write(json.dumps({"checks": self.checked, **self.figures}))

    # --- the world ----------------------------------------------------------------------------------------
    def _seed(self, password: str) -> dict[str, str]:
        """A simulated cluster of two nodes without GPUs (the agents report them), one tenant, one user."""
        TaskType.objects.get_or_create(code="smoke", defaults={"name": "Smoke", "priority": 10,
                                                               "cpu_milli_per_gpu": 1000,
                                                               "memory_mib_per_gpu": 1024})
        cluster, _ = Cluster.objects.get_or_create(name=PREFIX)
        tokens = {}
        for n in range(NODES):
            node, _ = Node.objects.get_or_create(name=f"{PREFIX}-node-{n}", defaults={
                "cluster": cluster, "gpu_model": MODEL, "datacenter": "dc", "rack": "r", "network_domain": "net",
                "cpu_milli": 64000, "memory_mib": 512 * 1024})
            tokens[node.name] = agent_tokens.issue(node, actor=None)
        tenant, _ = Tenant.objects.get_or_create(name=PREFIX, defaults={"display_name": "Smoke"})
        Project.objects.get_or_create(tenant=tenant, name="check")
        Quota.objects.update_or_create(tenant=tenant, gpu_model=MODEL, defaults={"guaranteed_gpus": 4,
                                                                                 "limit_gpus": 4})
        user, _ = get_user_model().objects.get_or_create(username=f"{PREFIX}-user")
        user.set_password(password)
        user.save()
        Membership.objects.get_or_create(user=user, tenant=tenant, role=Role.RESEARCHER)
        return tokens

    def _start_agents(self, stack: ProductionStack, tokens: dict[str, str]) -> None:
        for name, token in tokens.items():
            token_file = self.tmp / f"{name}.token"
            token_file.write_text(token)
            token_file.chmod(0o600)
            port = free_port()
            stack.spawn(name, [sys.executable, "-m", "nodeagent", "--port", str(port), "--token-file",
                               str(token_file), "--node-name", name, "--simulate", str(GPUS_PER_NODE), "--model",
                               MODEL, "--register", stack.base, "--advertise-url", f"http://127.0.0.1:{port}"])

    # --- checks -------------------------------------------------------------------------------------------
    def _ok(self, name: str, detail: str) -> None:
        self.checked.append(f"{name}: {detail}")
        self.stdout.write(f"SMOKE ok  {name}: {detail}")

    def _wait(self, condition, what: str) -> float:
        started = time.monotonic()
        while time.monotonic() - started < self.timeout:
            if condition():
                return time.monotonic() - started
            time.sleep(0.25)
        raise SmokeFailure(f"gave up after {self.timeout:.0f} s waiting for {what}")

    @staticmethod
    def _alive(stack: ProductionStack, role: str) -> bool:
        return subprocess.run([sys.executable, "manage.py", "liveness", role], cwd=stack.root, env=stack.env,
                              capture_output=True).returncode == 0

    def _sign_in(self, web: Http, password: str) -> None:
        status, _h, page = web.call("GET", "/accounts/login/")
        if status != 200:
            raise SmokeFailure(f"the login page answered {status}")
        csrf = web.cookie("csrftoken")
        form = urllib.parse.urlencode({"username": f"{PREFIX}-user", "password": password,
                                       "csrfmiddlewaretoken": csrf}).encode()
        status, headers, _body = web.call("POST", "/accounts/login/", form, {
            "Content-Type": "application/x-www-form-urlencoded", "Referer": web.base + "/accounts/login/"})
        if status != 302:
            raise SmokeFailure(f"signing in through the form answered {status}, not a redirect")
        status, _h, page = web.call("GET", "/")
        if status != 200 or f"{PREFIX}-user".encode() not in page:
            raise SmokeFailure(f"the dashboard after sign-in answered {status} without the user's name")
        self._ok("sign-in", "login form (CSRF) -> 302 -> dashboard 200 with the user's name")

    def _token(self, web: Http, password: str) -> str:
        status, _h, body = web.call("POST", "/api/auth/token/", json.dumps(
            {"username": f"{PREFIX}-user", "password": password}).encode(), {"Content-Type": "application/json"})
        if status != 200:
            raise SmokeFailure(f"the token endpoint answered {status}")
        return json.loads(body)["token"]

    @staticmethod
    def _job(name: str, minutes: int = 1) -> dict:
        return {"tenant": PREFIX, "project": "check", "name": name, "task_type": "smoke", "gpu_model": MODEL,
                "gpus_per_node": 1, "image": "registry.local/smoke:1", "command": f"sim:minutes={minutes}",
                "max_runtime_minutes": 30}

    def _status(self, web: Http, token: str, job_id: int) -> str:
        status, body = web.api("GET", f"/api/jobs/{job_id}/", token)
        if status != 200:
            raise SmokeFailure(f"GET /api/jobs/{job_id}/ answered {status}")
        return body["status"]

    def _run_two_jobs(self, stack: ProductionStack, web: Http, token: str) -> None:
        submitted_at = time.monotonic()
        status, body = web.api("POST", "/api/jobs/", token, self._job("api-job"),
                               {"Idempotency-Key": "smoke-api-job"})
        if status != 201:
            raise SmokeFailure(f"POST /api/jobs/ answered {status}: {body}")
        api_job = body["id"]
        cli = subprocess.run([sys.executable, "-m", "gpuportal_cli", "submit", "--json",
                              *[f"--{k.replace('_', '-')}={v}" for k, v in self._job("cli-job").items()]],
                             env={**os.environ, "GPUPORTAL_URL": stack.base, "GPUPORTAL_TOKEN": token},
                             capture_output=True, text=True, timeout=60)
        if cli.returncode != 0:
            raise SmokeFailure(f"the CLI's submit exited {cli.returncode}: {cli.stderr.strip()[-500:]}")
        cli_job = json.loads(cli.stdout)["id"]
        self._ok("submit", f"job #{api_job} through the API (201), job #{cli_job} through the CLI")
        admitted = {JobStatus.ADMITTED, JobStatus.DISPATCHING, JobStatus.RUNNING, JobStatus.SUCCEEDED}
        self.figures["submit_to_admitted_seconds"] = round(self._wait(
            lambda: all(self._status(web, token, j) in admitted for j in (api_job, cli_job)),
            "both jobs to be admitted by the worker's pass"), 2)
        self._wait(lambda: all(self._status(web, token, j) == JobStatus.SUCCEEDED for j in (api_job, cli_job)),
                   "both jobs to run and succeed")
        self.figures["submit_to_succeeded_seconds"] = round(time.monotonic() - submitted_at, 2)
        self._ok("run", f"both admitted {self.figures['submit_to_admitted_seconds']} s after submission, "
                        f"succeeded after {self.figures['submit_to_succeeded_seconds']} s")
        self.jobs = [api_job, cli_job]

    def _kill_mid_pass(self, stack: ProductionStack, web: Http, token: str, batch: int) -> None:
        """A blocker holds the tenant's quota; a batch waits; this session locks one of the batch's rows and
        cancels the blocker: the next pass admits the batch and blocks on that row. Kill the worker there."""
        status, body = web.api("POST", "/api/jobs/", token, {**self._job("blocker", 999), "gpus_per_node": 4})
        if status != 201:
            raise SmokeFailure(f"the blocker was refused: {status} {body}")
        blocker = body["id"]
        self._wait(lambda: self._status(web, token, blocker) == JobStatus.RUNNING, "the blocker to run")
        ids = []
        for i in range(batch):
            status, body = web.api("POST", "/api/jobs/", token, self._job(f"batch-{i}"),
                                   {"Idempotency-Key": f"smoke-batch-{i}"})
            if status != 201:
                raise SmokeFailure(f"batch job {i} was refused: {status} {body}")
            ids.append(body["id"])
        self._wait(lambda: all(self._status(web, token, j) == JobStatus.QUEUED for j in ids) and Job.objects.filter(
            pk__in=ids, queue_state__wait_reason__in=("quota_exhausted", "borrowing_limit")).count() == batch,
            "the batch to wait for the tenant's quota")
        settings_db = connection.settings_dict
        params = {"host": settings_db["HOST"], "port": settings_db["PORT"], "user": settings_db["USER"],
                  "dbname": settings_db["NAME"]}
        with psycopg.connect(**params) as locker, psycopg.connect(**params, autocommit=True) as watcher:
            locker.execute("SELECT id FROM scheduling_job WHERE id = %s FOR UPDATE", [ids[0]])
            status, body = web.api("POST", f"/api/jobs/{blocker}/cancel/", token, {"reason": "smoke: free the quota"})
            if status != 200:
                raise SmokeFailure(f"cancelling the blocker answered {status}: {body}")
            waiting: list[int] = []

            def blocked() -> bool:
                waiting[:] = [pid for (pid,) in watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'")]
                return bool(waiting)

            self._wait(blocked, "a scheduling pass to block inside its apply step")
            stack.kill("worker")
            locker.rollback()
            self._wait(lambda: not set(waiting) & {pid for (pid,) in watcher.execute(
                "SELECT pid FROM pg_stat_activity")}, "the killed worker's database session to end")
        half = Job.objects.filter(pk__in=ids).exclude(status=JobStatus.QUEUED).count()
        if half:
            raise SmokeFailure(f"{half} jobs of the killed pass left its transaction applied")
        self._ok("kill", f"worker SIGKILLed (with its pool) while a pass was blocked in its apply step; "
                         f"none of the {batch} batch jobs half-admitted")
        killed_at = time.monotonic()
        stack.start_worker(concurrency=2)
        self._wait(lambda: Job.objects.filter(pk__in=ids, status=JobStatus.SUCCEEDED).count() == batch,
                   "a new worker to run the whole batch to success")
        self.figures["recovery_seconds"] = round(time.monotonic() - killed_at, 2)
        self._invariants(stack, [*self.jobs, blocker, *ids])
        self._ok("recover", f"a new worker ran all {batch} batch jobs to success "
                            f"{self.figures['recovery_seconds']} s after the kill")

    def _invariants(self, stack: ProductionStack, answered: list[int]) -> None:
        stored = sorted(Job.objects.filter(tenant__name=PREFIX).values_list("pk", flat=True))
        if stored != sorted(answered):
            raise SmokeFailure(f"jobs answered 201 {sorted(answered)} but stored {stored} (lost or duplicated)")
        stuck = list(Job.objects.filter(pk__in=answered, status__in=(JobStatus.ADMITTED, JobStatus.DISPATCHING))
                     .values_list("pk", flat=True))
        if stuck:
            raise SmokeFailure(f"jobs stuck admitted or dispatching: {stuck}")
        held = JobAllocation.objects.filter(released_at__isnull=True).exclude(job__status__in=ACTIVE_STATUSES)
        if held.exists():
            raise SmokeFailure(f"GPUs held by jobs that are not active: {list(held.values_list('job_id', 'gpu_id'))}")
        audit = subprocess.run([sys.executable, "manage.py", "verify_audit"], cwd=stack.root, env=stack.env,
                               capture_output=True, text=True)
        if audit.returncode != 0:
            raise SmokeFailure(f"verify_audit: {audit.stdout.strip()} {audit.stderr.strip()[-300:]}")
        self._ok("invariants", f"{len(stored)} jobs answered 201 and stored once each; none stuck; no GPU held "
                               f"by an ended job; {audit.stdout.strip().splitlines()[0]}")

    def _usage(self, web: Http, token: str) -> None:
        today = local_day(timezone.now())

        def used_today() -> float:
            status, body = web.api("GET", f"/api/reports/monthly/{today:%Y-%m}/?tenant={PREFIX}", token)
            if status != 200:
                raise SmokeFailure(f"the monthly report API answered {status}: {body}")
            return sum(row.get("gpu_hours_allocated") or 0 for row in body.get("daily", ())
                       if row.get("day") == today.isoformat())

        self._wait(lambda: used_today() > 0, "the jobs to appear in the day's usage (beat's rollup)")
        self._ok("usage", f"today's usage of tenant {PREFIX}: {used_today():.4f} GPU-hours allocated "
                          "(rolled up by beat's task)")


