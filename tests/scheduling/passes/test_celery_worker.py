"""A real Celery worker process on the Redis broker runs the scheduling pass and the dispatch it triggers."""

import os
import subprocess
import sys
import time
from unittest import mock

import pytest
import redis
from celery import Celery
from django.conf import settings

from gpuportal.storage.db import database_url
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, long_run

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker():
    """`celery -A gpuportal worker` against this test's database and Redis database 15."""
    broker = settings.TEST_REDIS_URL
    redis.Redis.from_url(broker).flushdb()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings", "CELERY_BROKER_URL": broker,
           "CELERY_RESULT_BACKEND": broker, "CELERY_TASK_ALWAYS_EAGER": "0", "DATABASE_URL": database_url()}
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", "--pool=solo", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "-l", "INFO", "-n", "test-worker@%h"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = Celery(broker=broker, backend=broker, set_as_current=False)  # leave the app under test alone
    try:
        deadline = time.monotonic() + 60
        while not client.control.ping(timeout=0.5):
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "worker did not answer pings"
        yield client
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        client.close()


def test_worker_runs_the_pass_and_dispatches(users, worker):
    with mock.patch("scheduling.jobs.submission.request_scheduling_pass"):  # leave the pass to the worker
        first, second, third = (
            submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
            for _ in range(3))
    assert {first.status, second.status, third.status} == {JobStatus.QUEUED}

    result = worker.send_task("scheduling.tasks.run_scheduling_pass").get(timeout=60)
    assert result["ran"] is True
    assert result["admitted"] == [first.pk, second.pk] and result["waiting"] == 1

    third.refresh_from_db()
    assert third.status == JobStatus.QUEUED and third.wait_reason == "quota_exhausted"
    assert third.queue_position == 1
    deadline = time.monotonic() + 30  # the pass queued dispatch_job through Redis; the worker runs it too
    while Job.objects.filter(pk__in=[first.pk, second.pk], status=JobStatus.DISPATCHING).count() < 2:
        assert time.monotonic() < deadline, list(Job.objects.values_list("status", flat=True))
        time.sleep(0.2)
    first.refresh_from_db()
    assert first.allocations.filter(released_at__isnull=True).count() == 8
    assert [e.to_status for e in first.events.all()][-2:] == ["admitted", "dispatching"]
