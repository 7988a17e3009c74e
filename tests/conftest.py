import os
import shutil
import signal
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import translation
from rest_framework.test import APIClient

from tests.factories import build_world

SERVING = "scheduling.executors.simulated.serving"


def standins_of(pid: int) -> list[int]:
    """Live stand-in processes started by process ``pid``: their command line names it as ``--parent`` (one that
    exited and is not reaped yet has an empty command line, so it does not count). Linux's /proc; elsewhere the
    serving module's own record of its children."""
    proc = Path("/proc")
    if not proc.is_dir():
        serving = sys.modules.get(SERVING)
        return serving.children() if serving is not None and pid == os.getpid() else []
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # it exited while we looked
            continue
        if any(arg.endswith(b"standin.py") for arg in argv) and b"--parent" in argv and \
                argv[argv.index(b"--parent") + 1:][:1] == [str(pid).encode()]:
            found.append(int(entry.name))
    return found


#: Rows the migrations made that a flush would only make again (its post_migrate signal): kept between tests.
STATIC_TABLES = ("django_content_type", "auth_permission")


def _static_rows(cursor) -> tuple:
    """A digest of every kept row: a test that adds, removes or changes one (a permission renamed) is seen."""
    cursor.execute(" UNION ALL ".join(f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) "
                                      f"FROM {table} t" for table in STATIC_TABLES))  # noqa: S608 - our names
    return tuple(cursor.fetchall())


def _empty_database(original, baseline: dict):
    """``TransactionTestCase``'s teardown, cheaper on PostgreSQL and to the same end: every table emptied.

    Django's flush TRUNCATEs every table, which makes new files for each table and index (most of them empty
    anyway), and then makes the content types and permissions again through post_migrate. Here one transaction
    DELETEs every row, constraints and triggers set aside for it (``session_replication_role``, a superuser's
    right, which the suite's connection has; the audit tables' append-only trigger guards the tests, not this),
    and keeps the content types and permissions the migrations made. Whenever it cannot be sure of the same end
    (a test changed those rows, a test case with options of its own, another database) it flushes as Django
    does."""
    from django.db import connections, transaction

    def teardown(self):
        names = self._databases_names(include_mirrors=False)
        if (self.available_apps is not None or self.serialized_rollback or self.reset_sequences
                or names != ["default"] or connections["default"].vendor != "postgresql"):
            return original(self)
        connection = connections["default"]
        with transaction.atomic(), connection.cursor() as cursor:
            if baseline.get("superuser") and _static_rows(cursor) == baseline["rows"]:
                cursor.execute("SET LOCAL session_replication_role = replica")
                cursor.execute("".join(f"DELETE FROM {connection.ops.quote_name(table)};"
                                       for table in baseline["tables"]))
                return None
        original(self)
        if baseline.get("superuser"):  # the flush made the kept rows again, with new ids: the new baseline
            with connection.cursor() as cursor:
                baseline["rows"] = _static_rows(cursor)
        return None

    return teardown


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database, with two settings for speed that change no result: commits do not wait for the disk
    (``synchronous_commit``: only a crash of the server could lose one, and the database is thrown away), and
    tests that commit are emptied afterwards by ``_empty_database``."""
    from django.db import connection
    from django.test import TransactionTestCase

    baseline = {}
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} "
                               "SET synchronous_commit TO off")
                cursor.execute("SELECT current_setting('is_superuser') = 'on'")
                baseline["superuser"] = cursor.fetchone()[0]
                baseline["rows"] = _static_rows(cursor)
            baseline["tables"] = [table for table in connection.introspection.django_table_names(
                only_existing=True, include_views=False) if table not in STATIC_TABLES]
            connection.close()  # its next connection, like every other, starts with the setting
    original = TransactionTestCase._fixture_teardown
    TransactionTestCase._fixture_teardown = _empty_database(original, baseline)
    yield
    TransactionTestCase._fixture_teardown = original


@pytest.fixture
def connections_kept():
    """Requests served straight by Django's WSGI handler (not the test client) keep their thread's database
    connection, as the test client's requests do and as production's do (``CONN_MAX_AGE``): the tests' settings
    would otherwise open and close a PostgreSQL connection for every request, a fifth of its time. The
    connections opened meanwhile (other threads' too) are closed afterwards."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections
    from django.db.backends.signals import connection_created

    opened = []

    def remember(sender, connection, **kwargs):
        opened.append(connection)

    connection_created.connect(remember, weak=False, dispatch_uid="tests.connections_kept")
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
        connection_created.disconnect(dispatch_uid="tests.connections_kept")
        for wrapper in opened:
            raw = wrapper.connection  # closed here, not by its own thread: the wrapper would refuse
            if wrapper._thread_ident != threading.get_ident() and raw is not None and not raw.closed:
                raw.close()
                wrapper.connection = None  # a later use of that thread's wrapper connects anew


@pytest.fixture(scope="session", autouse=True)
def _no_standin_outlives_the_suite(tmp_path_factory):
    """The simulated executor's notebook and service stand-ins are real processes: this session's live in a
    directory of its own (not the installation's var/), and at the end none it started may be left. One that is
    left is killed, and the session fails."""
    with override_settings(SIMULATION_STANDIN_DIR=tmp_path_factory.mktemp("standins")):
        yield
    serving = sys.modules.get(SERVING)
    if serving is not None:
        serving.stop_children()
    left = standins_of(os.getpid())
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"stand-in processes {left} outlived the test session"


@pytest.fixture(autouse=True)
def _standins_end_with_the_test():
    """A notebook or service a test started through the simulated executor ends with the test (its job is gone
    with the test's database); the tests that watch stand-ins stop their own first."""
    yield
    serving = sys.modules.get(SERVING)
    if serving is not None and serving.children():
        serving.stop_children()


@pytest.fixture(autouse=True)
def _site_language():
    """Each test starts in the site's language: a request leaves its language (LocaleMiddleware, a person's
    choice) active in the thread, and the next test would read Chinese where it expects English."""
    translation.activate(settings.LANGUAGE_CODE)
    yield
    translation.deactivate()


def _commits(item) -> bool:
    """The test runs on a database that really commits (and is emptied afterwards)."""
    marker = item.get_closest_marker("django_db")
    return bool(marker and marker.kwargs.get("transaction")) or bool(
        {"transactional_db", "live_server", "django_db_reset_sequences", "django_db_serialized_rollback"}
        & set(getattr(item, "fixturenames", ())))


def _touches_the_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db", "live_server"} & set(getattr(item, "fixturenames", ())))


@pytest.fixture(scope="module")
def module_world(request, django_db_setup, django_db_blocker):
    """The standard lab built once for a whole module, or None where that would change what a test sees.

    It is built in a transaction that the module's end rolls back; each test runs, as a ``db`` test does, in a
    savepoint inside it that its end rolls back, so every test still starts from the same lab and nothing it
    wrote. Only where every test of the module that reaches the database asks for the lab and none commits: a
    test that commits runs in a transaction of its own, and one that did not ask for the lab must not find it."""
    from django.db import transaction

    items = [item for item in request.session.items if item.module is request.module]
    database_tests = [item for item in items if _touches_the_database(item)]
    if not database_tests or any(_commits(item) or "world" not in item.fixturenames for item in database_tests):
        yield None
        return
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic._from_testcase = True  # a durable block in a test nests in it as in a test's own transaction
        atomic.__enter__()
        try:
            made = build_world()
        except BaseException:
            atomic.__exit__(*sys.exc_info())
            raise
    yield made
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        atomic.__exit__(None, None, None)


def fresh_world(made: dict) -> dict:
    """The lab's rows read again: a test that changes an object in memory leaves the next test nothing."""
    from django.contrib.auth import get_user_model

    from fleet.models import Cluster
    from tenants.models import Tenant

    tenants = Tenant.objects.in_bulk([tenant.pk for tenant in made["tenants"].values()])
    users = get_user_model().objects.in_bulk([user.pk for user in made["users"].values()])
    return {"cluster": Cluster.objects.get(pk=made["cluster"].pk),
            "tenants": {name: tenants[tenant.pk] for name, tenant in made["tenants"].items()},
            "users": {name: users[user.pk] for name, user in made["users"].items()}}


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


def require_chromium() -> None:
    """Debian's Chromium, never a downloaded one: a machine without it fails the test, naming the fix."""
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (scripts/ensure-services.sh)")


def launch_chromium(playwright):
    """Headless Debian Chromium that makes no request of its own (the browser tests watch every request)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])


def login(page, url: str, username: str) -> None:
    """Signs a demo user in through the sign-in form, as a person does, and waits for the dashboard."""
    page.goto(f"{url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "demo")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{url}/")


def logout(page) -> None:
    """Signs out through the header's button and waits for the sign-in page. At a phone's width the menu that
    holds the button is folded: a test there widens the window first."""
    page.click("header button.link")
    page.wait_for_selector("#id_username")


def choose_language(page, language: str) -> None:
    """Picks the site's language in the header (it applies at once, static/js/menu.js) and waits for the page to
    be in it."""
    page.select_option("#id_site_language", language)
    page.wait_for_function(f"document.documentElement.lang === '{language}'")


@pytest.fixture
def page(live_server, monkeypatch):
    require_chromium()
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls of fixtures are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
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
