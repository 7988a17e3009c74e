"""Liveness and readiness of the web process, for load balancers, Kubernetes probes and systemd.

* ``/healthz`` — the process is up and answers: 200 at once, touching nothing (a database outage must not
  make Kubernetes restart every portal pod, which would not bring the database back).
* ``/readyz`` — this process can serve: the database answers, the broker answers (where there is one) and
  no migration is waiting; 503 naming what is not ready otherwise, so traffic goes elsewhere meanwhile. Only
  the names reach an anonymous caller ("database": "not ready"); the error text (host names, ports, driver
  messages) is shown to a local caller (``gpuportal.web.clients.is_local``) or one that sends the metrics token.

Answered by the first middleware, before host validation and the HTTPS redirect: probes reach a pod by its
address over plain HTTP, and neither is a public request.
"""

from __future__ import annotations

import hmac
import json

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpResponse
from kombu import Connection

from gpuportal.web.clients import is_local

#: Seconds each dependency may take to answer a readiness probe.
CHECK_TIMEOUT_SECONDS = 2.0

_migrated = False  # once every migration is applied it stays so for this process's life


def _database() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def _migrations() -> str:
    global _migrated
    if not _migrated:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if pending:
            return f"{len(pending)} migrations not applied (run manage.py migrate)"
        _migrated = True
    return "ok"


def _broker() -> str:
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False) or not getattr(settings, "CELERY_BROKER_URL", ""):
        return "not used"  # the embedded portal runs its tasks in-process
    with Connection(settings.CELERY_BROKER_URL, connect_timeout=CHECK_TIMEOUT_SECONDS) as connection:
        connection.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT_SECONDS)
    return "ok"


def readiness() -> tuple[bool, dict[str, str]]:
    """Each check's answer ("ok", "not used", or what failed) and whether all passed."""
    checks = {}
    for name, check in (("database", _database), ("migrations", _migrations), ("broker", _broker)):
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - any failure of a dependency means "not ready", named
            checks[name] = f"unreachable: {type(exc).__name__}: {str(exc)[:200]}"
    ready = all(value in ("ok", "not used") for value in checks.values())
    if checks["database"] != "ok":
        connections[DEFAULT_DB_ALIAS].close()  # the next probe opens a fresh connection
    return ready, checks


def _json(body: dict, status: int) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def may_see_details(request) -> bool:
    """A local probe, or the scraper that holds ``GPUPORTAL_METRICS_TOKEN``."""
    token = settings.METRICS["TOKEN"]
    sent = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ").strip()
    return is_local(request) or bool(token and hmac.compare_digest(sent.encode(), token.encode()))


def _named_only(checks: dict[str, str]) -> dict[str, str]:
    return {name: value if value in ("ok", "not used") else "not ready" for name, value in checks.items()}


class HealthCheckMiddleware:
    """``/healthz`` and ``/readyz`` (GET or HEAD), before anything else runs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == "/healthz" and request.method in ("GET", "HEAD"):
            return _json({"status": "ok"}, 200)
        if request.path == "/readyz" and request.method in ("GET", "HEAD"):
            ready, checks = readiness()
            if not may_see_details(request):
                checks = _named_only(checks)
            return _json({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)
        return self.get_response(request)
