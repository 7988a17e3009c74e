"""Requests for a pass are coalesced in the broker's Redis: at most one pass queued that has not started, a request
after a pass started queues the next, and nothing is held back longer than one beat interval (the real Redis)."""

import time
from unittest import mock

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from scheduling import tasks, triggers


@pytest.fixture
def broker():
    """Tasks queued to the test Redis (not run here): what ``send`` was asked for is counted."""
    url = settings.TEST_REDIS_URL
    client = redis.Redis.from_url(url)
    client.delete(triggers.PASS_QUEUED_KEY)
    triggers._client.cache_clear()
    with override_settings(CELERY_TASK_ALWAYS_EAGER=False, CELERY_BROKER_URL=url), \
            mock.patch("scheduling.triggers.send", return_value=True) as send:
        yield client, send
    client.delete(triggers.PASS_QUEUED_KEY)
    triggers._client.cache_clear()


def test_requests_share_the_pass_that_has_not_started(broker):
    client, send = broker
    for _ in range(50):  # a burst of submissions
        assert triggers.queue_pass() is True
    assert send.call_count == 1
    assert 0 < client.ttl(triggers.PASS_QUEUED_KEY) <= settings.SCHEDULER["PASS_INTERVAL_SECONDS"]

    triggers.pass_started()  # the queued pass starts: what comes after it asks for the next one
    triggers.queue_pass()
    triggers.queue_pass()
    assert send.call_count == 2


def test_a_pass_clears_the_mark_before_it_reads(broker):
    client, send = broker
    triggers.queue_pass()
    with mock.patch("scheduling.tasks.run_pass", side_effect=lambda: (
            triggers.queue_pass(), tasks.PassReport())[1]):  # a submission while the pass runs
        tasks.run_scheduling_pass()
    assert send.call_count == 2  # the change made during the pass has a pass of its own queued
    assert client.exists(triggers.PASS_QUEUED_KEY)


def test_a_lost_message_holds_requests_back_one_beat_interval_at_most(broker):
    client, send = broker
    send.return_value = False  # the broker refused it: the mark goes, the next request tries again
    assert triggers.queue_pass() is False
    assert not client.exists(triggers.PASS_QUEUED_KEY)
    send.return_value = True
    triggers.queue_pass()  # accepted, then lost by the broker: only the expiry ends the mark
    triggers.queue_pass()
    assert send.call_count == 2
    client.pexpire(triggers.PASS_QUEUED_KEY, 50)  # the beat interval, shortened
    time.sleep(0.1)
    triggers.queue_pass()
    assert send.call_count == 3


def test_without_redis_or_with_eager_tasks_every_request_queues(broker):
    _client, send = broker
    triggers._client.cache_clear()
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0", CELERY_BROKER_CONNECTION_TIMEOUT=0.2):
        triggers.queue_pass()
        triggers.queue_pass()
    triggers._client.cache_clear()
    with override_settings(CELERY_TASK_ALWAYS_EAGER=True):
        triggers.queue_pass()
        triggers.queue_pass()
        triggers.pass_started()
    assert send.call_count == 4
