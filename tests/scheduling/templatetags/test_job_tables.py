"""The job tables keep each row by what it shows: a change to one job draws that row again and no other, a row
read back is the row drawn afresh, and the relative time of its submission follows the clock."""

import pytest
from django.core.cache import cache
from django.urls import reverse, set_script_prefix
from django.utils import timezone, translation

from scheduling import lifecycle
from scheduling.jobs.columns import read_fields
from scheduling.jobs.queries import table_rows
from scheduling.models import Job, JobQueueState, JobStatus
from scheduling.templatetags import job_tables
from tenants.models import Project
from tests.factories import make_queue_state, make_task_type, make_tenant, make_user

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
    for i, job in enumerate(jobs):
        make_queue_state(job, "held", {"held_by": "rowan"}, i + 1, i + 1)
    ids: list[int] = []
    draw = job_tables._row
    monkeypatch.setattr(job_tables, "_row", lambda job, *args: ids.append(job.pk) or draw(job, *args))
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
    make_queue_state(Job.objects.get(pk=changed), "held", {"held_by": "rowan"}, 42, 2)
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
    """Read back, a table reads the shown columns as tuples, in one query, and the queue table's token (the
    places decoded once per table); a drawn row is kept under what its job shows, read the same way (a job
    without a queue state too)."""
    JobQueueState.objects.filter(job_id=Job.objects.order_by("pk").first().pk).delete()
    first = table()
    assert len(drawn) == 3
    with django_assert_num_queries(2):
        assert table() == first
    assert len(drawn) == 3


def test_the_columns_shown_key_their_rows_and_the_wait_follows_the_clock(drawn, monkeypatch):
    """Rows of other columns are rows of their own; a cell that follows the clock (how long a job has waited) is
    filled in at each read, like the relative time."""
    shown = ("name", "wait", "exit_code")
    table()
    drawn.clear()
    first = job_tables.job_table(table_rows(Job.objects.order_by("pk"), read_fields(shown)), "none", shown)
    assert len(drawn) == 3 and "Exit code" in first and "Task type" not in first
    drawn.clear()
    monkeypatch.setattr(job_tables, "duration_text", lambda seconds: "a long while")
    again = job_tables.job_table(table_rows(Job.objects.order_by("pk"), read_fields(shown)), "none", shown)
    assert drawn == [] and again.count('data-label="Waited">a long while</td>') == 3


def test_a_row_links_the_address_reverse_gives_under_any_prefix():
    """A table asks ``reverse`` once and fills in each row's id: the same address as a ``reverse`` per row."""
    try:
        for prefix in ("/", "/portal/987654321/"):
            set_script_prefix(prefix)
            url_of = job_tables._job_url()
            for pk in (1, 42, 987654321, 10**12):
                assert url_of(pk) == reverse("scheduling:job-detail", args=[pk]), (prefix, pk)
    finally:
        set_script_prefix("/")
