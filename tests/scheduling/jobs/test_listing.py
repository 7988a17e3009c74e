"""The job list as a person shapes it: columns chosen and remembered, any column as the order, refused values said
on the page and not applied, the table's fragment for the refresh in place showing what the page shows, and the
filters as real, labelled controls."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Preference
from scheduling.jobs import columns
from scheduling.jobs.columns import nodes_of
from scheduling.jobs.efficiency import summaries_of
from scheduling.models import JobAllocation, JobStatus
from scheduling.templatetags import job_tables
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def login(client, username="alice"):
    assert client.login(username=username, password="demo")
    return client


def row_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', html)]


def headings(html: str) -> list[str]:
    table = html[html.index('<table class="jobs">'):]
    return re.findall(r'<th scope="col">([^<]*)</th>', table[:table.index("</thead>")])


def test_chosen_columns_are_shown_in_the_chosen_order_and_remembered(client, shaped_world):
    jobs = shaped_world["jobs"]
    html = login(client).get("/jobs/?shape=1&columns=name&columns=exit_code&columns=elapsed&columns=node"
                             "&sort=-elapsed").content.decode()
    assert headings(html) == ["#", "Name", "Elapsed", "Exit code", "On nodes"]
    assert row_ids(html)[:3] == [jobs["alpha"].pk, jobs["bravo"].pk, jobs["charlie"].pk]  # 2 h, 1 h 30, 20 min
    assert jobs["hidden"].pk not in row_ids(html)
    assert ">137</td>" in html and "2 h 0 min" in html and shaped_world["gpus"][40].node.name in html
    kept = Preference.objects.get(user=shaped_world["users"]["alice"])
    assert kept.job_columns == ["name", "elapsed", "exit_code", "node"] and kept.job_sort == "-elapsed"
    again = client.get("/jobs/").content.decode()  # the menu's link: as last shaped
    assert headings(again) == headings(html) and row_ids(again) == row_ids(html)
    assert 'value="-elapsed" selected' in again


def test_nothing_ticked_is_the_default_table_and_the_default_order(client, shaped_world):
    login(client).get("/jobs/?shape=1&columns=exit_code&sort=name")
    html = client.get("/jobs/?shape=1").content.decode()
    assert headings(html) == ["#", "Name", "Tenant / project", "Task type", "GPUs", "Status", "Queue position",
                              "Why / result", "Submitted"]
    jobs = shaped_world["jobs"]
    assert row_ids(html) == [jobs[k].pk for k in ("formula", "delta", "charlie", "bravo", "alpha")]  # newest first
    assert Preference.objects.get(user=shaped_world["users"]["alice"]).job_columns == []


def test_a_refused_column_or_order_is_said_and_not_applied_nor_remembered(client, shaped_world):
    login(client).get("/jobs/?shape=1&columns=wait&sort=wait")
    response = client.get("/jobs/?shape=1&columns=nope&sort=sideways&status=failed")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Unknown column nope: choose among name, project" in html
    assert "Sort by, not applied: Unknown order sideways" in html
    assert row_ids(html) == [shaped_world["jobs"]["bravo"].pk]  # the filter that was understood still applies
    assert headings(html)[1] == "Name"  # the default columns, not the refused ones
    kept = Preference.objects.get(user=shaped_world["users"]["alice"])
    assert kept.job_columns == ["wait"] and kept.job_sort == "wait"


def test_the_fragment_shows_the_pages_table(client, shaped_world):
    query = "shape=1&columns=efficiency&columns=end&sort=efficiency"
    page = login(client).get(f"/jobs/?{query}").content.decode()
    fragment = client.get(f"/jobs/rows/?{query}").content.decode()
    assert "<html" not in fragment and "<form" not in fragment
    assert row_ids(fragment) == row_ids(page) and headings(fragment) == headings(page)
    jobs = shaped_world["jobs"]
    assert row_ids(fragment)[:2] == [jobs["bravo"].pk, jobs["alpha"].pk]  # 10 % before 60 %, none last
    assert "60 % mean" in fragment and "10 % mean" in fragment
    assert f'data-live-url="/jobs/rows/?{query.replace("&", "&amp;")}"' in page


def test_filters_are_labelled_controls_and_the_export_link_carries_what_is_shown(client, shaped_world):
    html = login(client).get("/jobs/?shape=1&mine=on&columns=wait&gpu_model=&sort=-wait").content.decode()
    assert "Unknown" not in html
    assert re.search(r'<label for="id_mine">Only my jobs:</label> <input type="checkbox" name="mine"[^>]*checked',
                     html)
    for name in ("status", "task_type", "gpu_model", "tenant", "project", "owner", "q", "sort"):
        assert f'<label for="id_{name}">' in html and f'id="id_{name}"' in html
    assert "<legend>Columns</legend>" in html and '<label for="id_columns_0"><input type="checkbox"' in html
    export = re.search(r'id="export-csv" href="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert export == "/api/jobs/export/?mine=true&columns=wait&sort=-wait&format=csv"


def test_every_column_costs_the_same_queries_whatever_the_rows(client, shaped_world):
    """The nodes and the GPU use of a page are read in one query each, not one per row; rows read back from the
    cache build no job."""
    every = "&".join(f"columns={key}" for key in ("name", "start", "end", "elapsed", "wait", "exit_code", "node",
                                                  "efficiency"))
    login(client)
    client.get(f"/jobs/rows/?{every}&sort=-efficiency")
    with CaptureQueriesContext(connection) as few:
        client.get(f"/jobs/rows/?{every}&sort=-efficiency")
    alice, vision = shaped_world["users"]["alice"], shaped_world["tenants"]["vision"]
    for number in range(12):
        job = make_job(alice, vision, JobStatus.RUNNING, f"more-{number}", started_at=timezone.now())
        JobAllocation.objects.create(job=job, gpu=shaped_world["gpus"][number], allocated_at=timezone.now())
    client.get(f"/jobs/rows/?{every}&sort=-efficiency")  # draws the new rows
    with CaptureQueriesContext(connection) as many:
        html = client.get(f"/jobs/rows/?{every}&sort=-efficiency").content.decode()
    assert len(row_ids(html)) == 17
    assert len(many) == len(few)


def test_a_jobs_nodes_are_those_it_holds_else_those_of_its_latest_allocation(shaped_world):
    jobs, gpus, now = shaped_world["jobs"], shaped_world["gpus"], timezone.now()
    JobAllocation.objects.create(job=jobs["alpha"], gpu=gpus[8], allocated_at=now - timedelta(hours=5),
                                 released_at=now - timedelta(hours=4))  # an earlier attempt elsewhere
    JobAllocation.objects.create(job=jobs["charlie"], gpu=gpus[9], allocated_at=now - timedelta(hours=2),
                                 released_at=now - timedelta(hours=1))
    nodes = nodes_of([jobs["alpha"].pk, jobs["charlie"].pk, jobs["delta"].pk])
    assert nodes == {jobs["alpha"].pk: (gpus[0].node.name,), jobs["charlie"].pk: (gpus[40].node.name,)}


def test_every_column_is_drawn_sorted_and_exported():
    assert set(columns.COLUMNS) == set(job_tables._CELLS) == set(columns._EXPORTS)
    assert set(columns.LIVE_COLUMNS) | {"submitted"} == set(job_tables._LIVE)
    assert all(column.order for column in columns.COLUMNS.values())


def test_the_gpu_use_column_is_the_efficiency_summarys_mean(shaped_world):
    """The list reads the mean in SQL (it sorts by it); it is the figure of the job's efficiency summary."""
    jobs = list(shaped_world["jobs"].values())
    listed = columns.mean_utilization([job.pk for job in jobs])
    summaries = summaries_of(jobs)
    assert listed == {job.pk: summaries[job.pk].mean_gpu_utilization for job in jobs
                      if summaries[job.pk].mean_gpu_utilization is not None}
    assert listed[shaped_world["jobs"]["alpha"].pk] == 60.0
