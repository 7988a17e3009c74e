"""Workloads on an origin of their own: nothing a notebook or a service produces is served from the portal's
origin, the workload origin signs people in with single-use tickets and a cookie of its own, the upstream's
policy is kept and its redirects stay within the workload, the notebook's token never reaches a browser,
read-only roles call nothing, and the stand-in escapes what it shows. Real stand-in servers, real HTTP, and a
real Chromium for the isolation between the two origins."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.sessions.models import Session
from django.test import Client, RequestFactory
from django.utils import timezone

from scheduling.executors.simulated import serving as simulated_serving
from scheduling.executors.simulated import standin
from scheduling.jobs import submission
from scheduling.jobs.tokens import notebook_token
from scheduling.models import Job, JobStatus
from scheduling.tasks import sync_job_status
from scheduling.workloads import origin as workload_origin
from scheduling.workloads import views as workload_views
from scheduling.workloads.origin import Workload
from tenants.models import Membership, Role, Tenant
from tests.conftest import job_payload, launch_chromium, require_chromium
from tests.factories import PASSWORD, make_user
from tests.scheduling.workloads.conftest import WORKLOAD_HOST


def _client(username, **options) -> Client:
    client = Client(**options)
    assert client.login(username=username, password=PASSWORD)
    return client


def _sync_until(check, rounds=80) -> bool:
    for _round in range(rounds):
        sync_job_status()
        if check():
            return True
        time.sleep(0.05)
    return False


def _notebook(users, owner="alice") -> Job:
    job = submission.submit_job(users[owner], job_payload(kind="notebook", task_type="notebook", gpus_per_node=1))
    assert _sync_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING)
    return Job.objects.get(pk=job.pk)


def _service(users, owner="alice") -> int:
    payload = job_payload(kind="service", task_type="inference", gpus_per_node=1, replicas=1, name="chat")
    del payload["max_runtime_minutes"]
    group = submission.submit_job(users[owner], payload).group
    assert _sync_until(lambda: any(m.status == JobStatus.RUNNING for m in group.members.all()))
    return group.pk


def _on_workload_origin(client: Client, method: str, url: str, **extra):
    """``url`` (absolute, on the workload origin, or a path there) asked with the workload origin's Host."""
    parts = urlsplit(url)
    assert parts.netloc in ("", WORKLOAD_HOST), url
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return getattr(client, method)(target, HTTP_HOST=WORKLOAD_HOST, **extra)


def _sign_in_to_workload(client: Client, portal_path: str) -> str:
    """The portal's redirect with a ticket, its exchange on the workload origin; the clean address it leads to."""
    entry = client.get(portal_path)
    assert entry.status_code == 302, entry.content
    target = urlsplit(entry["Location"])
    assert target.netloc == WORKLOAD_HOST and "ticket" in parse_qs(target.query)
    exchanged = _on_workload_origin(client, "get", entry["Location"])
    assert exchanged.status_code == 200, exchanged.content
    assert exchanged.cookies[workload_origin.COOKIE_NAME]["httponly"]
    return re.search(r'id="continue" href="([^"]+)"', exchanged.content.decode())[1].replace("&amp;", "&")


def _kernels(job) -> int:
    return simulated_serving.ask(job.executor_state["serving"], f"{simulated_serving.base_url(job)}api/status",
                                 notebook_token(job))[1]["kernels"]


# --- the portal's origin serves nothing a workload produced ----------------------------------------------------

def test_a_workload_body_is_never_served_from_the_portal_origin(users, serving, api):
    job = _notebook(users)
    gid = _service(users)
    alice = _client("alice")
    for path in (f"/jobs/{job.pk}/open/", f"/jobs/{job.pk}/open/evil.html", f"/services/{gid}/endpoint/evil.html"):
        answer = alice.get(path)
        assert answer.status_code == 302, path
        assert answer.content == b"" and "Jupyter" not in answer.content.decode()
        target = urlsplit(answer["Location"])
        assert (target.netloc, target.path) == (WORKLOAD_HOST, path)  # the same address, on the other origin
    by_token = api("alice").get(f"/services/{gid}/endpoint/v1/models")
    assert by_token.status_code == 307 and by_token["Location"] == f"http://{WORKLOAD_HOST}/services/{gid}/endpoint/v1/models"
    assert b"revision" not in by_token.content

    # The workload origin answers the workload's paths only: none of the portal's pages, and the portal's session
    # cookie (which this test client sends everywhere, as a browser does across ports of one host) counts for
    # nothing there.
    for portal_page in ("/", "/jobs/", "/admin/", "/api/tokens/", "/accounts/login/", f"/jobs/{job.pk}/"):
        answer = _on_workload_origin(alice, "get", portal_page)
        assert answer.status_code == 404 and answer["Content-Type"] == "application/json", portal_page
    unsigned = _on_workload_origin(alice, "get", f"/jobs/{job.pk}/open/")
    assert unsigned.status_code == 302 and unsigned["Location"].endswith(f"/jobs/{job.pk}/open/")  # to the portal
    assert "sessionid" not in unsigned.cookies and "csrftoken" not in unsigned.cookies


def test_a_notebook_opens_on_the_workload_origin_with_its_own_policy(users, serving):
    job = _notebook(users)
    alice = _client("alice")
    clean = _sign_in_to_workload(alice, f"/jobs/{job.pk}/open/?theme=dark")
    assert clean == f"/jobs/{job.pk}/open/?theme=dark"
    cookie = alice.cookies[workload_origin.COOKIE_NAME]
    assert cookie["path"] == f"/jobs/{job.pk}/open/" and cookie["samesite"] == "Strict" and cookie["httponly"]
    assert not cookie["secure"] and not cookie["domain"]  # plain http in the tests; host-only
    page = _on_workload_origin(alice, "get", clean)
    assert page.status_code == 200 and b"Jupyter stand-in" in page.content
    # The notebook server's own policy, not the portal's.
    assert page["Content-Security-Policy"] == standin.JUPYTER_POLICY.format(base_url=f"/jobs/{job.pk}/open/")

    own_origin = f"http://{WORKLOAD_HOST}"
    kernel = _on_workload_origin(alice, "post", f"/jobs/{job.pk}/open/api/kernels", data=b"{}",
                                 content_type="application/json", HTTP_ORIGIN=own_origin,
                                 HTTP_SEC_FETCH_SITE="same-origin")
    assert kernel.status_code == 201 and _kernels(job) == 1
    # A page of another origin of the same site gets the SameSite cookie sent along: its Origin gives it away.
    for headers in ({"HTTP_ORIGIN": "http://testserver"}, {"HTTP_ORIGIN": "null"},
                    {"HTTP_SEC_FETCH_SITE": "same-site"}):
        refused = _on_workload_origin(alice, "post", f"/jobs/{job.pk}/open/api/kernels", data=b"{}",
                                      content_type="application/json", **headers)
        assert refused.status_code == 403, headers
    assert _kernels(job) == 1

    # The cookie is the notebook's and its reader's: not another notebook's, and not once access is gone.
    other = _notebook(users)
    assert _on_workload_origin(alice, "get", f"/jobs/{other.pk}/open/").status_code == 302  # sign in first
    Membership.objects.filter(user=users["alice"]).delete()
    assert _on_workload_origin(alice, "get", clean).status_code == 403


def test_a_ticket_works_once_and_expires(users, serving):
    job = _notebook(users)
    notebook = Workload(workload_origin.NOTEBOOK, job.pk)
    ticket = workload_origin.issue_ticket(users["alice"], notebook)
    assert workload_origin.redeem_ticket(ticket, notebook) == users["alice"]
    assert workload_origin.redeem_ticket(ticket, notebook) is None  # spent

    late = workload_origin.issue_ticket(users["alice"], notebook)
    Session.objects.filter(session_key=late).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert workload_origin.redeem_ticket(late, notebook) is None
    elsewhere = workload_origin.issue_ticket(users["alice"], notebook)
    assert workload_origin.redeem_ticket(elsewhere, Workload(workload_origin.NOTEBOOK, job.pk + 1)) is None
    assert workload_origin.redeem_ticket(elsewhere, notebook) is None  # a wrong use spends it too
    changed = workload_origin.issue_ticket(users["alice"], notebook)
    users["alice"].set_password("another-password-entirely")
    users["alice"].save()
    assert workload_origin.redeem_ticket(changed, notebook) is None

    # A portal session's key is no ticket, and trying it leaves the session alone.
    portal = _client("bob")
    session_key = portal.cookies["sessionid"].value
    assert workload_origin.redeem_ticket(session_key, notebook) is None
    assert Session.objects.filter(session_key=session_key).exists()

    # Through the pages: the link with the ticket works once.
    admin = _client("admin")
    entry = admin.get(f"/jobs/{job.pk}/open/")
    first_browser = Client()
    assert _on_workload_origin(first_browser, "get", entry["Location"]).status_code == 200
    again = _on_workload_origin(Client(), "get", entry["Location"])
    assert again.status_code == 401 and workload_origin.COOKIE_NAME not in again.cookies
    back = _on_workload_origin(first_browser, "get", entry["Location"])  # its own "back" to the link: on it goes
    assert back.status_code == 200 and workload_origin.COOKIE_NAME not in back.cookies


# --- what the portal's origin still answers is safe -------------------------------------------------------------

def test_the_portal_origin_refuses_a_post_without_csrf_token(users, serving):
    job = _notebook(users)
    gid = _service(users)
    alice = _client("alice", enforce_csrf_checks=True)
    kernel = alice.post(f"/jobs/{job.pk}/open/api/kernels", data=b"{}", content_type="application/json")
    assert kernel.status_code == 403 and _kernels(job) == 0
    completion = alice.post(f"/services/{gid}/endpoint/v1/completions", data=b'{"prompt": "x"}',
                            content_type="application/json")
    assert completion.status_code == 403 and b"choices" not in completion.content


def test_open_auth_never_gives_the_token_to_a_browser(users, serving, settings):
    job = _notebook(users)
    secret = "an-ingress-secret-of-enough-length-0123456789"
    alice = _client("alice")
    asked = alice.get(f"/jobs/{job.pk}/open-auth/")  # the portal's session
    assert asked.status_code == 403 and "Authorization" not in asked
    _sign_in_to_workload(alice, f"/jobs/{job.pk}/open/")
    with_cookie = alice.get(f"/jobs/{job.pk}/open-auth/")  # the workload cookie, but not the ingress
    assert with_cookie.status_code == 403 and "Authorization" not in with_cookie

    settings.WORKLOADS = {**settings.WORKLOADS, "INGRESS_AUTH_SECRET": secret}
    assert alice.get(f"/jobs/{job.pk}/open-auth/", HTTP_X_GPUPORTAL_INGRESS_AUTH="guess").status_code == 403
    ingress = alice.get(f"/jobs/{job.pk}/open-auth/", HTTP_X_GPUPORTAL_INGRESS_AUTH=secret)
    assert ingress.status_code == 204 and ingress["Authorization"] == f"token {notebook_token(job)}"
    assert Client().get(f"/jobs/{job.pk}/open-auth/", HTTP_X_GPUPORTAL_INGRESS_AUTH=secret).status_code == 401
    post = alice.get(f"/jobs/{job.pk}/open-auth/", HTTP_X_GPUPORTAL_INGRESS_AUTH=secret,
                     HTTP_X_ORIGINAL_METHOD="POST", HTTP_ORIGIN="https://sibling.example.org")
    assert post.status_code == 403 and "Authorization" not in post

    # The first request on an ingress carries the ticket in its address: spent here, answered with the cookie.
    ticket = workload_origin.issue_ticket(users["alice"], Workload(workload_origin.NOTEBOOK, job.pk))
    first = Client().get(f"/jobs/{job.pk}/open-auth/", HTTP_X_GPUPORTAL_INGRESS_AUTH=secret,
                         HTTP_X_ORIGINAL_URL=f"https://apps.example.org/jobs/{job.pk}/open/?ticket={ticket}")
    assert first.status_code == 204 and first.cookies[workload_origin.COOKIE_NAME]["samesite"] == "Strict"
    assert Client().get(f"/jobs/{job.pk}/open-auth/", HTTP_X_GPUPORTAL_INGRESS_AUTH=secret,
                        HTTP_X_ORIGINAL_URL=f"/jobs/{job.pk}/open/?ticket={ticket}").status_code == 401


def test_read_only_roles_call_no_workload(users, serving, api):
    gid = _service(users)
    job = _notebook(users)
    viewer = make_user("vera", Tenant.objects.get(name="vision"), roles=(Role.VIEWER,))
    assert viewer.pk
    completion = {"data": b'{"prompt": "abc"}', "content_type": "application/json"}
    for username in ("dave", "vera"):  # a manager (all tenants, read-only) and a viewer of the tenant
        assert _client(username).get(f"/services/{gid}/endpoint/").status_code == 403, username
        assert _client(username).get(f"/jobs/{job.pk}/open/").status_code in (403, 404), username
        refused = _on_workload_origin(api(username), "post", f"/services/{gid}/endpoint/v1/completions",
                                      **completion)
        assert refused.status_code == 403 and b"choices" not in refused.content, username
        assert _on_workload_origin(api(username), "get", f"/services/{gid}/endpoint/").status_code == 403
    called = _on_workload_origin(api("carol"), "post", f"/services/{gid}/endpoint/v1/completions", **completion)
    assert called.status_code == 200 and called.json()["choices"][0]["text"] == "cba"
    assert _on_workload_origin(api("bob"), "post", f"/services/{gid}/endpoint/v1/completions",
                               **completion).status_code == 404  # another tenant: no such service


def test_a_service_answers_a_browser_by_its_cookie_on_its_own_path_only(users, serving):
    gid = _service(users)
    alice = _client("alice")
    clean = _sign_in_to_workload(alice, f"/services/{gid}/endpoint/v1/models")
    assert alice.cookies[workload_origin.COOKIE_NAME]["path"] == f"/services/{gid}/"
    models = _on_workload_origin(alice, "get", clean)
    assert models.status_code == 200 and models.json()["object"] == "list"
    assert models["Content-Security-Policy"] == workload_views.DEFAULT_WORKLOAD_POLICY  # it sent none


# --- redirects of the workload stay within it ---------------------------------------------------------------------

class _Redirecting(BaseHTTPRequestHandler):
    """An upstream that answers every path with the redirect its query asks for (a real HTTP server)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        to = parse_qs(urlsplit(self.path).query, keep_blank_values=True).get("to", ["/"])[0]
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def redirecting():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    # polled often: shutdown() waits for the next poll (half a second by default)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("prefixes", "request_path", "location", "expected"), [
    (("/", "/services/7/endpoint/"), "/v1/old", "/v1/models", "/services/7/endpoint/v1/models"),
    (("/", "/services/7/endpoint/"), "/v1/old", "new?x=1", "/services/7/endpoint/v1/new?x=1"),
    (("/", "/services/7/endpoint/"), "/v1/old", "{upstream}/v1/ok", "/services/7/endpoint/v1/ok"),
    (("/jobs/5/open/", "/jobs/5/open/"), "/jobs/5/open/", "/jobs/5/open/lab", "/jobs/5/open/lab"),
    (("/jobs/5/open/", "/jobs/5/open/"), "/jobs/5/open/tree/a", "../lab#x", "/jobs/5/open/lab#x"),
    (("/", "/services/7/endpoint/"), "/v1/old", "https://evil.example/phish", None),
    (("/", "/services/7/endpoint/"), "/v1/old", "//evil.example/phish", None),
    (("/", "/services/7/endpoint/"), "/v1/old", "/\\evil.example/phish", None),
    (("/", "/services/7/endpoint/"), "/v1/old", "http://127.0.0.1:1/v1/", None),
    (("/jobs/5/open/", "/jobs/5/open/"), "/jobs/5/open/", "/jobs/6/open/", None),
    (("/jobs/5/open/", "/jobs/5/open/"), "/jobs/5/open/", "/jobs/5/open/%2e%2e/%2E%2e/admin/", None),
    (("/jobs/5/open/", "/jobs/5/open/"), "/jobs/5/open/", "/login?next=%2F", None),
    (("/jobs/5/open/", "/jobs/5/open/"), "/jobs/5/open/", "javascript:alert(1)", None),
])
def test_an_upstream_redirect_stays_within_the_workload(redirecting, prefixes, request_path, location, expected):
    upstream_prefix, public_prefix = prefixes
    location = location.format(upstream=redirecting)
    request = RequestFactory().get(f"{public_prefix}x", {"to": location})
    answer = workload_views.forward(request, redirecting, request_path, upstream_prefix=upstream_prefix,
                                    public_prefix=public_prefix)
    if expected is None:
        assert answer.status_code == 502 and "Location" not in answer
        assert "redirect away from its own address" in json.loads(answer.content)["message"]
    else:
        assert answer.status_code == 302 and answer["Location"] == expected


# --- per-workload hosts --------------------------------------------------------------------------------------------

def test_each_workload_may_have_a_host_of_its_own(users, serving, settings):
    settings.WORKLOADS = {**settings.WORKLOADS, "ORIGIN": "http://*.apps.test"}
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, ".apps.test"]
    job = _notebook(users)
    alice = _client("alice")
    entry = alice.get(f"/jobs/{job.pk}/open/")
    assert urlsplit(entry["Location"]).netloc == f"nb-{job.pk}.apps.test"
    own_host = {"HTTP_HOST": f"nb-{job.pk}.apps.test"}
    exchanged = alice.get(urlsplit(entry["Location"]).path + "?" + urlsplit(entry["Location"]).query, **own_host)
    assert exchanged.status_code == 200
    assert b"Jupyter stand-in" in alice.get(f"/jobs/{job.pk}/open/", **own_host).content
    # Another notebook's path on this notebook's host, or any host of the domain that is no workload's: nothing.
    assert alice.get(f"/jobs/{job.pk + 1}/open/", **own_host).status_code == 404
    assert alice.get(f"/jobs/{job.pk}/open/", HTTP_HOST="apps.test").status_code == 404
    assert alice.get("/jobs/", HTTP_HOST="www.apps.test").status_code == 404


# --- the stand-in ----------------------------------------------------------------------------------------------------

def test_the_standin_escapes_the_image_name(tmp_path):
    port_file, pid_file = tmp_path / "port", tmp_path / "pid"
    pid_file.write_text("running")
    image = "registry.local/<script>alert(document.cookie)</script>:1"
    process = subprocess.Popen([sys.executable, str(Path(standin.__file__)), "--mode", "notebook", "--job", "7",
                                "--token", "t0k", "--image", image, "--port-file", str(port_file),
                                "--pid-file", str(pid_file), "--base-url", "/jobs/7/open/"])
    try:
        for _round in range(200):
            if port_file.exists():
                break
            time.sleep(0.05)
        connection = http.client.HTTPConnection("127.0.0.1", int(port_file.read_text()), timeout=5)
        connection.request("GET", "/jobs/7/open/", headers={"Authorization": "token t0k"})
        page = connection.getresponse().read().decode()
        connection.close()
    finally:
        pid_file.unlink()
        process.wait(timeout=10)
    assert "Jupyter stand-in" in page
    assert "<script>" not in page and "&lt;script&gt;alert(document.cookie)&lt;/script&gt;" in page


# --- in a browser: the workload's page cannot read the portal ---------------------------------------------------

@pytest.fixture
def browser(live_server, monkeypatch):
    """Chromium (Debian's, never downloaded) that may only talk to the live server's two origins."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    port = urlsplit(live_server.url).port
    allowed = (f"http://localhost:{port}/", f"http://127.0.0.1:{port}/", "data:", "about:")
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        context = chromium.new_context()
        elsewhere = []
        context.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(allowed) else None)
        page = context.new_page()
        page.set_default_timeout(15000)
        yield page
        chromium.close()
        assert elsewhere == []


PROBE = """async (portal) => {
  const found = {cookie: document.cookie, body: null, error: null};
  try {
    const answer = await fetch(portal + "/account/tokens/", {credentials: "include"});
    found.body = await answer.text();
  } catch (error) {
    found.error = String(error);
  }
  return found;
}"""


def test_browser_a_workload_page_cannot_read_the_portal_cookies_or_csrf_token(browser, live_server, users,
                                                                            serving, settings):
    # Two hosts of one server: the portal at localhost, the workloads at 127.0.0.1 (another origin, another site).
    portal = live_server.url.replace("127.0.0.1", "localhost")
    workloads = portal.replace("localhost", "127.0.0.1")
    settings.WORKLOADS = {**settings.WORKLOADS, "ORIGIN": workloads}
    settings.PORTAL_URL = portal
    job = _notebook(users)

    browser.goto(f"{portal}/accounts/login/")
    browser.fill("#id_username", "alice")
    browser.fill("#id_password", PASSWORD)
    browser.click("main button[type=submit]")
    browser.wait_for_url(f"{portal}/")
    on_portal = browser.evaluate(PROBE, portal)
    assert "csrftoken=" in on_portal["cookie"] and "csrfmiddlewaretoken" in on_portal["body"]  # what a thief wants

    browser.goto(f"{portal}/jobs/{job.pk}/")
    with browser.expect_popup() as popup:
        browser.click("#open-notebook")
    notebook = popup.value
    notebook.wait_for_url(f"{workloads}/jobs/{job.pk}/open/")  # the ticket spent, the address clean again
    assert "Jupyter stand-in" in notebook.locator("#standin").inner_text()

    stolen = notebook.evaluate(PROBE, portal)
    assert stolen["cookie"] == ""  # neither the portal's cookies nor the workload's own (HttpOnly)
    assert stolen["body"] is None and "Failed to fetch" in stolen["error"]  # the portal's answer stays unreadable
