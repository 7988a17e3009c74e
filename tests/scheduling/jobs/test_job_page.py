"""The job page tells the whole story: labels not codes, run time and deadline, hold and
release, and a confirmation before cancelling."""

import time

import pytest

from scheduling.jobs import submission
from scheduling.models import Job
from scheduling.tasks import sync_job_status
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def _page(client, job) -> str:
    return client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_waiting_job_shows_its_reason_as_a_label_and_can_be_held_and_released(client, users):
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    waiting = submission.submit_job(users["alice"], job_payload(gpus_per_node=8))
    client.login(username="alice", password="demo")
    page = _page(client, waiting)
    assert '<strong title="quota_exhausted">' in page and "<code>quota_exhausted</code>" not in page
    assert f'action="/jobs/{waiting.pk}/hold/"' in page

    client.post(f"/jobs/{waiting.pk}/hold/")
    assert Job.objects.get(pk=waiting.pk).held_by == "user"
    page = _page(client, waiting)
    assert f'action="/jobs/{waiting.pk}/release/"' in page
    client.post(f"/jobs/{waiting.pk}/release/")
    assert Job.objects.get(pk=waiting.pk).held_by == ""


def test_a_running_job_shows_how_long_it_runs_and_when_its_limit_stops_it(client, users, settings):
    job = submission.submit_job(users["alice"], job_payload(command=long_run(999), max_runtime_minutes=480))
    settings.SIMULATION_TIME_SCALE = 1e-3  # a real millisecond is a simulated second: the image pulls quickly
    for _ in range(100):
        time.sleep(0.01)
        sync_job_status()  # the simulated cluster reports the containers started
        job.refresh_from_db()
        if job.started_at:
            break
    assert job.started_at is not None
    client.login(username="alice", password="demo")
    page = _page(client, job)
    assert "8 h 0 min" in page  # the max runtime, readable
    assert 'id="run-time">running for' in page
    assert "by its 8 h 0 min limit unless it ends before" in page
    assert 'class="cancel" data-confirm="Cancel job #' in page


def test_another_tenants_user_cannot_hold(client, users):
    waiting = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    client.login(username="bob", password="demo")
    assert client.post(f"/jobs/{waiting.pk}/hold/").status_code == 404
    assert Job.objects.get(pk=waiting.pk).held_by == ""
