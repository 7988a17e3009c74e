"""The page cache (gpuportal.storage.pagecache) on a real Redis: a second read of the dashboard or the API job list
costs no page queries, and any committed change a page shows (a job submitted or moving state, a quota) is
visible on the very next read — the cache never shows figures older than the last change."""

import os

import pytest
from django.contrib import messages
from django.contrib.messages.storage import default_storage
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpResponse
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gpuportal.storage import pagecache
from scheduling import lifecycle
from scheduling.jobs import actions as job_actions
from scheduling.models import Job, JobStatus, TaskType
from tenants.models import PlatformRole, Project, Quota
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)
CACHE_URL = os.environ.get("TEST_CACHE_URL", "redis://127.0.0.1:6379/10")


@pytest.fixture
def shared_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}
    settings.PAGE_CACHE = {"SECONDS": 60}
    cache.clear()
    yield
    cache.clear()


def _job(users, name: str, status=JobStatus.QUEUED) -> Job:
    project = Project.objects.get(tenant__name="vision", name="detection")
    task_type = TaskType.objects.get(code="research")
    return lifecycle.create_job(status=status, reason="test", tenant=project.tenant, project=project,
                                owner=users["alice"], name=name, task_type=task_type, gpu_model="A100",
                                gpus_per_node=1, image="img", max_runtime_minutes=60, priority=50,
                                submitted_at=timezone.now())


def _get(client, path: str, **headers):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, **headers)
    assert response.status_code == 200, (path, response.status_code)
    return response, len(captured)


def test_dashboard_is_kept_until_a_job_changes(client, users, shared_cache):
    client.login(username="alice", password="demo")
    client.get("/")  # the first page sets the CSRF cookie: an answer that sets a cookie is never kept
    first, rendered = _get(client, "/")
    again, kept = _get(client, "/")
    assert again.content == first.content
    assert kept < rendered and kept <= 3, (kept, rendered)  # the session and the user, no page queries

    job = _job(users, "fresh-submission")
    after_submit, _n = _get(client, "/")
    assert b"fresh-submission" in after_submit.content and b"fresh-submission" not in first.content

    lifecycle.transition(job, JobStatus.CANCELLED, "cancelled by test")
    after_cancel, _n = _get(client, "/")
    assert after_cancel.content != after_submit.content  # no longer waiting: the row moved


def test_api_job_list_follows_a_change_written_as_an_update_with_its_event(client, users, shared_cache):
    """A new task type is an UPDATE (no save signal on the job): its timeline event starts the new generation."""
    job = _job(users, "retyped")
    client.login(username="alice", password="demo")
    before, _n = _get(client, "/api/jobs/")
    job_actions.change_task_type(job, TaskType.objects.get(code="training"), "approved as training")
    after, _n = _get(client, "/api/jobs/")
    rows = {row["name"]: row for row in after.json()["results"]}
    assert after.json() != before.json() and rows["retyped"]["task_type"] == "training"


def test_dashboard_follows_a_quota_change(client, users, shared_cache):
    client.login(username="alice", password="demo")
    quota = Quota.objects.filter(tenant__name="vision").order_by("pk").first()
    before, _n = _get(client, "/")
    quota.limit_gpus += 37
    quota.save()
    after, _n = _get(client, "/")
    assert after.content != before.content
    assert str(quota.limit_gpus).encode() in after.content


def test_api_job_list_is_kept_per_caller_and_dropped_on_change(client, users, shared_cache):
    client.login(username="alice", password="demo")
    first, rendered = _get(client, "/api/jobs/")
    again, kept = _get(client, "/api/jobs/")
    assert again.json() == first.json() and kept < rendered
    _job(users, "api-fresh")
    after, _n = _get(client, "/api/jobs/")
    assert "api-fresh" in [row["name"] for row in after.json()["results"]]

    client.logout()
    client.login(username="bob", password="demo")  # another tenant: her own list, never alice's kept one
    other, _n = _get(client, "/api/jobs/")
    assert "api-fresh" not in [row["name"] for row in other.json()["results"]]


def test_a_refused_filter_is_not_kept(client, users, shared_cache):
    client.login(username="alice", password="demo")
    assert client.get("/api/jobs/?status=nonsense").status_code == 400
    assert client.get("/api/jobs/?status=nonsense").status_code == 400


def test_nothing_is_kept_without_a_shared_cache(client, users, settings):
    settings.PAGE_CACHE = {"SECONDS": 0}
    client.login(username="alice", password="demo")
    _first, rendered = _get(client, "/")
    _again, again = _get(client, "/")
    assert again == rendered


def test_a_revoked_platform_role_shows_on_the_next_read(client, users, shared_cache):
    _job(users, "vision-job")
    client.login(username="dave", password=PASSWORD)  # a manager reads every tenant's jobs
    names = [row["name"] for row in _get(client, "/api/jobs/")[0].json()["results"]]
    assert "vision-job" in names
    PlatformRole.objects.filter(user=users["dave"]).delete()
    assert "vision-job" not in [row["name"] for row in _get(client, "/api/jobs/")[0].json()["results"]]


def test_a_waiting_message_is_never_answered_from_the_cache(rf, users, shared_cache):
    request = rf.get("/")
    SessionMiddleware(lambda r: None).process_request(request)
    request.session.save()
    request.user = users["alice"]
    request._messages = default_storage(request)
    rendered = []

    def render():
        rendered.append(1)
        return HttpResponse(f"page {len(rendered)}")

    pagecache.cached_page(request, "test", render)
    assert pagecache.cached_page(request, "test", render).content == b"page 1"  # kept
    messages.success(request, "Saved.")
    assert pagecache.cached_page(request, "test", render).content == b"page 2"  # the message must be shown


def test_an_answer_drawn_while_the_data_changed_is_not_kept(rf, users, shared_cache):
    """It would be kept under the generation it was looked up under, which no reader asks for any more."""
    request = rf.get("/")
    SessionMiddleware(lambda r: None).process_request(request)
    request.session.save()
    request.user = users["alice"]
    rendered = []

    def render(changing: bool):
        rendered.append(1)
        if changing:
            pagecache.data_changed()  # outside a transaction: takes effect at once, as another process's commit
        return HttpResponse(f"page {len(rendered)}")

    looked_up = pagecache._key(request, "test")
    assert pagecache.cached_page(request, "test", lambda: render(True)).content == b"page 1"
    assert cache.get(looked_up.name) is None  # nothing kept under the generation it began with
    assert pagecache.cached_page(request, "test", lambda: render(False)).content == b"page 2"
    assert pagecache.cached_page(request, "test", lambda: render(False)).content == b"page 2"  # kept


def test_a_transaction_starts_one_generation_at_its_commit_however_many_writes_it_makes(users, shared_cache):
    """A job that moves saves its row and an event and says so itself: one new generation, at the commit. One
    that a rolled-back savepoint took away is asked for again by the next write."""
    before = pagecache.generation()
    with transaction.atomic():
        job = _job(users, "one-generation")
        lifecycle.transition(job, JobStatus.CANCELLED, "test: cancelled")
        pagecache.data_changed()
        assert pagecache.generation() == before  # nothing before the commit
    assert pagecache.generation() == before + 1

    with transaction.atomic():
        try:
            with transaction.atomic():
                pagecache.data_changed()
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        pagecache.data_changed()  # the savepoint's bump was dropped with it: this write asks again
        pagecache.data_changed()
    assert pagecache.generation() == before + 2

    with transaction.atomic():
        pagecache.data_changed()
        transaction.set_rollback(True)
    assert pagecache.generation() == before + 2  # a rolled-back transaction changed nothing
    pagecache.data_changed()  # outside a transaction: at once
    assert pagecache.generation() == before + 3
