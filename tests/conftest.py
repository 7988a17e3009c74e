import shutil

import pytest
from django.conf import settings
from django.utils import translation
from rest_framework.test import APIClient

from tests.factories import build_world


@pytest.fixture(autouse=True)
def _site_language():
    """Each test starts in the site's language: a request leaves its language (LocaleMiddleware, a person's
    choice) active in the thread, and the next test would read Chinese where it expects English."""
    translation.activate(settings.LANGUAGE_CODE)
    yield
    translation.deactivate()


@pytest.fixture
def world(transactional_db):
    """Cluster, tenants, quotas and demo users, without jobs.

    Transactional: submissions ask for a scheduling pass on commit, as in production, so the tests see
    what a user sees right after submitting."""
    return build_world()


@pytest.fixture
def users(world):
    return world["users"]


@pytest.fixture
def api(users):
    """An API client per demo user, authenticated with a token from the real token endpoint."""
    clients = {}

    def client_for(username):
        if username not in clients:
            anonymous = APIClient()
            response = anonymous.post("/api/auth/token/", {"username": username, "password": "demo"}, format="json")
            assert response.status_code == 200, response.content
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
            clients[username] = client
        return clients[username]

    return client_for


def job_payload(**overrides):
    payload = {"tenant": "vision", "project": "detection", "task_type": "research", "gpu_model": "A100",
               "gpus_per_node": 4, "nodes": 1, "image": "registry.local/pytorch:2.4", "command": "python train.py",
               "max_runtime_minutes": 120}
    payload.update(overrides)
    return payload


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def page(live_server, monkeypatch):
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (scripts/ensure-services.sh)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls of fixtures are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        context = browser.new_context()
        external = []
        context.on("request", lambda r: external.append(r.url) if not r.url.startswith(live_server.url) else None)
        page = context.new_page()
        page.set_default_timeout(15000)
        yield page
        browser.close()
        assert [u for u in external if not u.startswith(("data:", "about:"))] == []  # nothing from the internet


def long_run(minutes) -> str:
    """A simulated job's command that runs ``minutes`` simulated minutes and succeeds: without ``sim:outcome`` the
    plan draws its outcome from the job's id, and one job in five would fail (an image pull in 3 %) at random."""
    return f"sim:outcome=succeeded sim:minutes={minutes}"
