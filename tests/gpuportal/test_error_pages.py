"""403, 404 and 500 inside the site's layout, saying why and what to do, never a traceback; the favicon
. DEBUG off, as in production: with DEBUG on Django shows its own technical pages."""

import os
import subprocess
import sys

import pytest
from django.contrib.staticfiles import finders
from django.db import OperationalError, connection
from django.test import Client

from gpuportal import views

pytestmark = [pytest.mark.django_db(transaction=True)]

DEBUG_PAGE_MARKERS = ("Traceback", "Request Method:", "Django settings", "technical_500", "Using the URLconf")


@pytest.fixture(autouse=True)
def production_mode(settings):
    settings.DEBUG = False


def signed_in(username, **kwargs):
    client = Client(**kwargs)
    assert client.login(username=username, password="demo")
    return client


def assert_in_layout(html, menu=True):
    assert "css/portal.css" in html and 'class="topbar"' in html
    assert ('id="site-menu"' in html) == menu
    assert not any(marker in html for marker in DEBUG_PAGE_MARKERS)


def test_403_says_why_in_the_layout(users):
    alice = signed_in("alice")
    response = alice.get("/reports/2026-01/")  # the platform-wide report: PermissionDenied with a message
    html = response.content.decode()
    assert response.status_code == 403
    assert_in_layout(html)
    assert '<p class="why">The platform-wide report is for managers and platform admins.</p>' in html
    bare = alice.get("/reports/operations/").content.decode()  # a bare PermissionDenied: the general reason
    assert "Your roles do not allow this page or action" in bare


def test_refused_csrf_check_says_to_reload_and_retry(users):
    alice = signed_in("alice", enforce_csrf_checks=True)
    response = alice.post("/notifications/", {"action": "read"})
    html = response.content.decode()
    assert response.status_code == 403
    assert_in_layout(html)
    assert "Reload the page, fill the form in again" in html and "CSRF cookie not set." in html
    anonymous = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "alice", "password": "demo"})
    assert anonymous.status_code == 403
    assert_in_layout(anonymous.content.decode(), menu=False)


def test_404_in_the_layout_without_debug_details(users):
    alice = signed_in("alice")
    for url in ("/jobs/987654/", "/no-such-page/"):
        response = alice.get(url)
        html = response.content.decode()
        assert response.status_code == 404, url
        assert_in_layout(html)
        assert "This page does not exist" in html and url in html
    assert "No Job matches" not in alice.get("/jobs/987654/").content.decode()


def test_500_renders_when_the_database_is_down(users):
    alice = signed_in("alice", raise_request_exception=False)

    def database_down(execute, sql, params, many, context):
        raise OperationalError("could not connect to server: Connection refused")

    with connection.execute_wrapper(database_down):
        response = alice.get("/")
    html = response.content.decode()
    assert response.status_code == 503 and response["Retry-After"] == "2"  # a lost database: retry soon
    assert_in_layout(html, menu=False)
    assert "Something went wrong on our side" in html and "Connection refused" not in html
    assert "try again in a few seconds" in html


def test_500_falls_back_to_plain_text_when_its_page_cannot_render(rf, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("template engine broken")

    monkeypatch.setattr(views.loader, "render_to_string", broken)
    response = views.server_error(rf.get("/"))
    assert response.status_code == 500 and response["Content-Type"].startswith("text/plain")
    assert b"could not finish this request" in response.content and b"broken" not in response.content


def test_favicon_is_linked_and_answered(client, users):
    assert finders.find("favicon.svg")
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == "/static/favicon.svg"
    assert 'rel="icon" href="/static/favicon.svg"' in client.get("/accounts/login/").content.decode()


DEMO_PROBE = """
import django; django.setup()
from django.conf import settings
from django.test import Client
client = Client()
page = client.get("/no-such-page/").content.decode()
print(settings.DEBUG, "This page does not exist" in page, "Using the URLconf" in page,
      client.get("/static/css/portal.css").status_code)
"""


@pytest.mark.parametrize(("debug", "expected"), [(None, "False True False 200"), ("1", "True False True 200")])
def test_the_demo_shows_the_portals_own_pages_unless_debug_is_asked_for(tmp_path, debug, expected):
    """The embedded profile (``make demo``) runs with DEBUG off: an unknown address gets the portal's 404, not
    Django's page listing every URL pattern; its static files are still served (whitenoise, from the source
    tree). ``DEBUG=1`` brings the technical pages back."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env |= {"DJANGO_SETTINGS_MODULE": "gpuportal.settings.embedded",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}", **({"DEBUG": debug} if debug else {})}
    result = subprocess.run([sys.executable, "-c", DEMO_PROBE], env=env, cwd=settings_module_root(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-4:] == expected.split()


def settings_module_root():
    from django.conf import settings

    return str(settings.BASE_DIR)
