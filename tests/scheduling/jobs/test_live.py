"""The job page's refresh in place asks ``?since=<version>``: 204 while nothing it shows changed, the page with a
new version once the job moves; an ended job's page polls no more. Scripts come from files (the CSP allows no
inline script)."""

import re

import pytest
from django.core.cache import cache

from scheduling import lifecycle
from scheduling.models import JobStatus
from tests.factories import build_world, make_job, make_queue_state

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting():
    cache.clear()
    world = build_world()
    job = make_job(world["users"]["alice"], world["tenants"]["vision"], JobStatus.QUEUED, "waits")
    make_queue_state(job, "held", {"held_by": "alice"}, 3, 1)
    return job


def version_of(html: str) -> str:
    return re.search(r'id="job-live" data-live-page="[^"]*" data-live-version="([0-9a-f]+)"', html).group(1)


def test_unchanged_is_204_and_a_change_is_the_page_with_a_new_version(client, waiting):
    assert client.login(username="alice", password="demo")
    url = f"/jobs/{waiting.pk}/"
    html = client.get(url).content.decode()
    version = version_of(html)
    assert 'id="job-state" data-live-region' in html and 'id="job-timeline" data-live-region' in html
    unchanged = client.get(f"{url}?since={version}")
    assert unchanged.status_code == 204 and unchanged.content == b""
    make_queue_state(waiting, "held", {"held_by": "alice"}, 1, 1)
    moved = client.get(f"{url}?since={version}")
    assert moved.status_code == 200 and version_of(moved.content.decode()) != version
    assert "Queue position 1" in moved.content.decode()
    assert client.get(f"{url}?since={version_of(moved.content.decode())}").status_code == 204


def test_an_ended_job_is_not_polled_and_scripts_are_files(client, waiting):
    assert client.login(username="alice", password="demo")
    lifecycle.transition(waiting, JobStatus.CANCELLED, "test: cancelled")
    html = client.get(f"/jobs/{waiting.pk}/").content.decode()
    assert 'id="job-live"' not in html
    for page in (html, client.get("/jobs/").content.decode()):
        scripts = re.findall(r"<script([^>]*)>", page)
        assert scripts and all("src=" in attributes for attributes in scripts)
        assert '/static/js/live.js"' in page
