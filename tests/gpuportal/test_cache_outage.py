"""The shared cache (Redis) stalls or goes away: API requests, sign-in and sign-out, pages and writes go on
without it, with throttles, sessions and the page cache as the production settings configure them
(``GPUPORTAL_CACHE_URL``), and each failure is counted (``gpuportal_cache_failures_total``).

The outages are real: ``CLIENT PAUSE`` of the Redis server, a port nothing listens on, and a Redis user that is
switched off (a partition that leaves the cache's contents in place for when it comes back). The cache uses its
own Redis database, apart from the other tests' ones."""

import os
import runpy
import socket
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings

from gpuportal.models import OperationalCounter
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)
CACHE_URL = os.environ.get("TEST_OUTAGE_CACHE_URL", "redis://127.0.0.1:6379/11")


def production_settings(monkeypatch, url: str) -> dict:
    """What gpuportal/settings/cache.py sets with ``GPUPORTAL_CACHE_URL=url``: the cache, the sessions through it and
    the page cache."""
    monkeypatch.setenv("GPUPORTAL_CACHE_URL", url)
    values = runpy.run_path(str(Path(django_settings.BASE_DIR) / "gpuportal" / "settings" / "cache.py"))
    return {name: values[name] for name in ("CACHES", "SESSION_ENGINE", "PAGE_CACHE")}


def use(settings, configured: dict, user_rate: str = "100000/min") -> None:
    for name, value in configured.items():
        setattr(settings, name, value)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"anon": "100000/min", "user": user_rate}}


def failures() -> float:
    return sum(OperationalCounter.objects.filter(name="gpuportal_cache_failures_total").values_list("value",
                                                                                                     flat=True))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def cache_db():
    """The outage tests' Redis database, empty before and after."""
    server = redis.Redis.from_url(CACHE_URL, socket_timeout=30)
    server.flushdb()
    yield server
    server.flushdb()
    server.close()


def test_api_answers_while_redis_is_paused_and_the_failure_is_counted(client, users, settings, monkeypatch,
                                                                       cache_db):
    """Throttling works while Redis answers; during a ``CLIENT PAUSE`` the same request is let through (its
    history cannot be read) instead of failing or waiting for the pause to end."""
    use(settings, production_settings(monkeypatch, CACHE_URL), user_rate="2/min")
    assert client.login(username="alice", password="demo")
    assert [client.get("/api/jobs/").status_code for _ in range(3)] == [200, 200, 429]  # the limit holds
    assert failures() == 0
    cache_db.execute_command("CLIENT", "PAUSE", 2000, "ALL")  # far beyond the cache's timeout; short for others
    try:
        during = client.get("/api/jobs/")
    finally:
        cache_db.ping()  # answered once the pause is over
    assert during.status_code == 200, during.content
    assert failures() >= 1


def test_sign_in_pages_and_writes_work_with_the_cache_down(client, users, settings, monkeypatch):
    """Nothing listens at the cache's address: sessions live in the database alone, pages and the API answer,
    and a submission commits with every hook of its commit run (the pass it asks for admits it) although the
    page cache cannot start a new data generation."""
    use(settings, production_settings(monkeypatch, f"redis://127.0.0.1:{closed_port()}/11"))
    assert client.login(username="alice", password="demo")
    assert client.get("/").status_code == 200
    assert client.get("/api/jobs/").status_code == 200
    created = client.post("/api/jobs/", job_payload(gpus_per_node=1, command=long_run(999)),
                          content_type="application/json")
    assert created.status_code == 201, created.content
    assert Job.objects.get(pk=created.json()["id"]).status != JobStatus.QUEUED  # the on-commit pass ran
    assert client.get("/api/jobs/").json()["count"] == 1
    assert failures() >= 1


def test_a_sign_out_during_an_outage_holds_when_the_cache_returns(client, users, settings, monkeypatch, cache_db):
    """The cache is cut off (its Redis user switched off: the session it holds stays there) while someone signs
    out. The database forgets the session at once; the cache's copy is deleted as soon as the cache answers
    again, so the old session cookie does not sign anyone in afterwards."""
    name, password = f"gpuportal-outage-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    cache_db.execute_command("ACL", "SETUSER", name, "on", f">{password}", "~*", "&*", "+@all")
    try:
        configured = production_settings(monkeypatch, f"redis://{name}:{password}@127.0.0.1:6379/11")
        configured["CACHES"]["default"]["RETRY_SECONDS"] = 0  # every operation tries Redis: no waiting below
        use(settings, configured)
        assert client.login(username="alice", password="demo")
        assert client.get("/api/jobs/").status_code == 200
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        assert cache_db.keys("*cached_db*"), "the session was not kept in the cache"

        cache_db.execute_command("ACL", "SETUSER", name, "off")
        cache_db.execute_command("CLIENT", "KILL", "USER", name)
        signed_out = client.post("/accounts/logout/")
        assert signed_out.status_code == 302, signed_out.content
        assert cache_db.keys("*cached_db*"), "the cache's copy should have outlived the outage"

        cache_db.execute_command("ACL", "SETUSER", name, "on")
        client.cookies[settings.SESSION_COOKIE_NAME] = cookie  # someone who kept the old cookie
        assert client.get("/api/jobs/").status_code == 401
        assert client.get("/").status_code == 302  # to the sign-in page
    finally:
        cache_db.execute_command("ACL", "DELUSER", name)
    assert failures() >= 1
