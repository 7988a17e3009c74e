"""A job page keeps its timeline by the events it shows: read back while nothing happens (no query for the events),
drawn again as soon as an event is added."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling import lifecycle
from scheduling.lifecycle import note
from scheduling.models import Job, JobEvent, JobStatus
from tenants.models import Project
from tests.factories import make_task_type, make_tenant, make_user

pytestmark = pytest.mark.django_db


def events_read(captured) -> int:
    return sum('FROM "scheduling_jobevent" LEFT OUTER JOIN "auth_user"' in q["sql"] for q in captured.captured_queries)


def test_a_new_event_draws_the_timeline_again(client):
    cache.clear()
    tenant = make_tenant("timeline")
    owner = make_user("tilda", tenant)
    [job] = lifecycle.import_jobs([Job(
        tenant=tenant, project=Project.objects.get(tenant=tenant), owner=owner, name="timed",
        task_type=make_task_type("test", 10), gpu_model="A100", gpus_per_node=1, image="img",
        max_runtime_minutes=60, priority=10, submitted_at=timezone.now())], JobStatus.SUCCEEDED, "first event")
    client.force_login(owner)
    path = f"/jobs/{job.pk}/"
    with CaptureQueriesContext(connection) as drawn:
        assert "first event" in client.get(path).content.decode()
    with CaptureQueriesContext(connection) as read_back:
        assert "first event" in client.get(path).content.decode()
    # Read back, only the timeline's version (newest id, count) was asked for, not the events with their actors.
    assert [events_read(drawn), events_read(read_back)] == [1, 0]
    note(job, JobEvent.Kind.EXECUTOR, "second event")
    page = client.get(path).content.decode()
    assert "first event" in page and "second event" in page
