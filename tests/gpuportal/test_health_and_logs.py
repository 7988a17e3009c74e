"""Probes and logs of the production stack: /healthz answers without touching anything,
/readyz names the dependency that is down, each request gets an id and one JSON log line with its user and
tenant, and ``manage.py liveness`` tells a live worker or beat from a stale one."""

import io
import json
import logging
import os
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpuportal.observability.liveness import liveness_file, touch
from gpuportal.observability.logs import ContextFilter, JsonFormatter

pytestmark = pytest.mark.django_db(transaction=True)


def test_healthz_answers_from_any_host_without_the_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz", HTTP_HOST="10.244.3.7:8000")  # a probe, by the pod's address
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_readyz_checks_the_database_migrations_and_broker(client, settings):
    ready = client.get("/readyz", HTTP_HOST="10.244.3.7:8000")
    assert ready.status_code == 200, ready.content
    assert ready.json()["checks"]["database"] == "ok" and ready.json()["checks"]["migrations"] == "ok"

    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    started = time.monotonic()
    down = client.get("/readyz")
    assert down.status_code == 503
    body = down.json()
    assert body["status"] == "not ready" and body["checks"]["broker"].startswith("unreachable")
    assert body["checks"]["database"] == "ok"
    assert time.monotonic() - started < 10  # a probe gives up quickly


def test_readyz_names_what_is_down_but_shows_its_error_only_to_a_local_probe_or_the_metrics_token(client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    settings.METRICS = {**settings.METRICS, "TOKEN": "scrape-t0ken"}
    remote = client.get("/readyz", REMOTE_ADDR="203.0.113.9")
    assert remote.status_code == 503
    assert remote.json()["checks"] == {"database": "ok", "migrations": "ok", "broker": "not ready"}
    proxied = client.get("/readyz", HTTP_X_FORWARDED_FOR="203.0.113.9")  # loopback, but through the proxy
    assert proxied.json()["checks"]["broker"] == "not ready"
    scraper = client.get("/readyz", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer scrape-t0ken")
    assert scraper.json()["checks"]["broker"].startswith("unreachable")


@pytest.fixture
def json_log():
    """The request logger's records, as the production handler formats them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger("gpuportal.request")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_each_request_has_an_id_and_one_json_line_with_user_and_tenant(client, users, json_log):
    client.login(username="alice", password="demo")
    response = client.get("/jobs/", HTTP_X_REQUEST_ID="ingress-4f2a")
    assert response.status_code == 200 and response["X-Request-ID"] == "ingress-4f2a"
    forged = client.get("/jobs/", HTTP_X_REQUEST_ID='x" "user": "admin')  # not an id: replaced
    assert forged["X-Request-ID"] != 'x" "user": "admin' and len(forged["X-Request-ID"]) == 32
    first, second = json_log()[-2:]
    assert first["request_id"] == "ingress-4f2a" and first["user"] == "alice" and first["tenant"] == "vision"
    assert first["method"] == "GET" and first["path"] == "/jobs/" and first["status"] == 200
    assert first["duration_ms"] > 0 and first["level"] == "INFO" and first["time"].endswith("+00:00")
    assert second["request_id"] == forged["X-Request-ID"]


def test_api_requests_log_the_token_user(api, users, json_log):
    assert api("bob").get("/api/jobs/").status_code == 200
    entry = json_log()[-1]
    assert entry["user"] == "bob" and entry["tenant"] == "nlp" and entry["path"] == "/api/jobs/"


def test_liveness_command_tells_a_fresh_file_from_a_stale_or_missing_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPORTAL_LIVENESS_DIR", str(tmp_path))
    with pytest.raises(CommandError, match="no liveness file"):
        call_command("liveness", "worker")
    touch("worker")
    out = io.StringIO()
    call_command("liveness", "worker", stdout=out)
    assert out.getvalue().startswith("worker: alive")
    old = time.time() - 120
    os.utime(liveness_file("worker"), (old, old))
    with pytest.raises(CommandError, match="last alive 120 s ago"):
        call_command("liveness", "worker")
    with pytest.raises(CommandError, match="no liveness file"):
        call_command("liveness", "beat")
