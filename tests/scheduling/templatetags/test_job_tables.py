"""The job tables keep each row by what it shows: a change to one job draws that row again and no other, a row
read back is the row drawn afresh, and the relative time of its submission follows the clock."""

import pytest
from django.core.cache import cache
from django.utils import timezone, translation

from scheduling import lifecycle
from scheduling.jobs.queries import table_rows
from scheduling.models import Job, JobQueueState, JobStatus
from scheduling.templatetags import job_tables
from tenants.models import Project
from tests.factories import make_task_type, make_tenant, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def drawn(monkeypatch):
    """Three waiting jobs; the ids of the rows drawn (not read from the cache) by each table."""
    cache.clear()
    tenant = make_tenant("rows", quotas={"A100": (4, 8)})
    owner, task_type = make_user("rowan", tenant), make_task_type("test", 10)
    jobs = lifecycle.import_jobs([
        Job(tenant=tenant, project=Project.objects.get(tenant=tenant), owner=owner, name=f"row-{i}",
            task_type=task_type, gpu_model="A100", gpus_per_node=1, image="img", max_runtime_minutes=60,
            priority=10, submitted_at=timezone.now()) for i in range(3)], JobStatus.QUEUED, "test fixture")
    JobQueueState.objects.bulk_create(
        JobQueueState(job=job, wait_reason="held", wait_reason_params={"held_by": "rowan"}, queue_position=i + 1,
                      tenant_queue_position=i + 1) for i, job in enumerate(jobs))
    ids: list[int] = []
    draw = job_tables._row
    monkeypatch.setattr(job_tables, "_row", lambda job, labels: ids.append(job.pk) or draw(job, labels))
    return ids


def table() -> str:
    return job_tables.job_table(table_rows(Job.objects.order_by("pk")), "none")


def test_a_change_draws_only_its_row(drawn):
    first = table()
    first_ids = list(drawn)
    assert len(first_ids) == 3
    drawn.clear()
    assert table() == first and drawn == []  # read back: the same markup, nothing drawn
    changed, renamed = first_ids[1], first_ids[2]
    JobQueueState.objects.filter(job_id=changed).update(queue_position=42)
    Job.objects.filter(pk=renamed).update(name="renamed")
    again = table()
    assert sorted(drawn) == [changed, renamed]
    assert "42 (tenant: 2)" in again and "renamed" in again and "row-2" not in again
    drawn.clear()
    with translation.override("zh-hans"):  # another reader's language: rows of their own
        table()
    assert len(drawn) == 3


def test_the_relative_time_is_read_at_each_draw(drawn, monkeypatch):
    table()
    drawn.clear()
    monkeypatch.setattr(job_tables, "relative_time", lambda moment: "a moment ago")
    assert table().count('<time title="a moment ago">') == 3 and drawn == []


def test_rows_read_back_build_no_job(drawn, django_assert_num_queries):
    """Read back, a table reads the shown columns as tuples, in one query; a drawn row is kept under what its
    job shows, read the same way (a job without a queue state too)."""
    JobQueueState.objects.filter(job_id=Job.objects.order_by("pk").first().pk).delete()
    first = table()
    assert len(drawn) == 3
    with django_assert_num_queries(1):
        assert table() == first
    assert len(drawn) == 3
