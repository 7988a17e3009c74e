"""The API job list's rows kept by what they show (scheduling/api/rows.py): the rows the serializer gives, read
back without building the jobs, and drawn again as soon as anything a row shows changes."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.api.serializers import JobSerializer
from scheduling.api.views import JobViewSet, job_queryset
from scheduling.models import (
    NO_TIME,
    PLACE_FIELDS,
    Job,
    JobAllocation,
    JobQueueState,
    JobStatus,
    WorkloadKind,
    queue_places,
)
from scheduling.passes import queue_states
from tenants.models import Tenant
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def _world(client) -> dict[str, int]:
    """A running job (its GPUs), one waiting for quota (its reason and place), one waiting for the first (its
    dependency) and a failed one (its diagnosis)."""
    def submit(**overrides) -> int:
        response = client.post("/api/jobs/", job_payload(**overrides), format="json")
        assert response.status_code == 201, response.content[:300]
        return response.json()["id"]

    running = submit(command=long_run(999))
    child = submit(gpus_per_node=1, depends_on=f"afterok:{running}")
    submit(gpus_per_node=8, command=long_run(999))
    queued = submit(gpus_per_node=8)
    failed = submit(name="broken")
    Job.objects.filter(pk=failed).update(status=JobStatus.FAILED, failure_category="out_of_memory",
                                         failure_message="out of memory", exit_code=137)
    return {"running": running, "child": child, "queued": queued, "failed": failed}


def _listed(client) -> list[dict]:
    response = client.get("/api/jobs/", {"page_size": 100})
    assert response.status_code == 200, response.content[:300]
    return response.json()["results"]


def _afresh(client) -> list[dict]:
    """The list with nothing kept: every row drawn by the serializer now."""
    cache.clear()
    return _listed(client)


@pytest.fixture
def drawn(monkeypatch) -> list[list[int]]:
    """The job ids each read of the list drew (the rest came back from the cache)."""
    calls, draw = [], JobViewSet._draw

    def recording(self, ids, depends):
        calls.append(sorted(ids))
        return draw(self, ids, depends)

    monkeypatch.setattr(JobViewSet, "_draw", recording)
    return calls


def test_kept_rows_are_the_serializers_and_build_no_job(api, users, drawn):
    client = api("alice")
    ids = _world(client)
    cache.clear()
    with CaptureQueriesContext(connection) as first:
        cold = _listed(client)
    with CaptureQueriesContext(connection) as second:
        warm = _listed(client)
    assert warm == cold
    assert len(drawn) == 1 and set(ids.values()) <= set(drawn[0])  # the second read drew nothing
    assert len(second) < len(first)  # nor read the jobs as instances
    listed = job_queryset(users["alice"]).filter(pk__in=[row["id"] for row in warm])
    request = client.get("/api/jobs/").wsgi_request
    assert warm == JobSerializer(sorted(listed, key=lambda job: [row["id"] for row in warm].index(job.pk)),
                                 many=True, context={"request": request}).data  # what the serializer gives them
    by_id = {row["id"]: row for row in warm}
    assert by_id[ids["running"]]["placement"] and by_id[ids["queued"]]["wait_reason"]["code"] == "quota_exhausted"
    assert by_id[ids["child"]]["depends_on"] == [{"job": ids["running"], "condition": "afterok", "satisfied": False}]
    assert by_id[ids["failed"]]["failure"]["category"] == "out_of_memory"


def test_a_row_is_drawn_again_when_anything_it_shows_changes(api, drawn):
    client = api("alice")
    ids = _world(client)
    before = {row["id"]: row for row in _afresh(client)}
    held = JobAllocation.objects.filter(job_id=ids["running"])
    held.filter(pk__in=held.values("pk")[:1]).delete()  # one GPU less: no column of the job moves
    drawn.clear()
    after = {row["id"]: row for row in _listed(client)}
    assert drawn == [[ids["running"]]]
    assert sum(map(len, (p["gpus"] for p in after[ids["running"]]["placement"]))) == 3
    Job.objects.filter(pk=ids["running"]).update(status=JobStatus.SUCCEEDED)  # its dependant's dependency is met
    JobQueueState.objects.filter(job_id=ids["queued"]).update(  # a reason alone
        wait_reason="held", wait_reason_params={"held_by": "owner"})
    Tenant.objects.filter(name="vision").update(display_name="Vision")  # not shown: nothing drawn for it
    drawn.clear()
    after = {row["id"]: row for row in _listed(client)}
    assert after == {row["id"]: row for row in _afresh(client)}
    assert drawn[0] == sorted([ids["running"], ids["child"], ids["queued"]])
    assert after[ids["running"]]["status"] == "succeeded"
    assert after[ids["child"]]["depends_on"][0]["satisfied"] is True
    assert after[ids["queued"]]["wait_reason"]["code"] == "held"
    assert after[ids["failed"]] == before[ids["failed"]]


def test_the_reader_is_part_of_the_key(api, users, drawn):
    client = api("alice")
    ids = _world(client)
    english = {row["id"]: row for row in _afresh(client)}
    drawn.clear()
    chinese = {row["id"]: row for row in client.get("/api/jobs/", {"page_size": 100},
                                                    HTTP_ACCEPT_LANGUAGE="zh-hans").json()["results"]}
    assert drawn and ids["queued"] in drawn[0]
    assert chinese[ids["queued"]]["wait_reason"]["message"] != english[ids["queued"]]["wait_reason"]["message"]


def test_a_service_replica_row_is_drawn_every_time(api, drawn):
    """Its ready replicas are probed when it is shown, so its row is never kept."""
    client = api("alice")
    ids = _world(client)
    Job.objects.filter(pk=ids["failed"]).update(kind=WorkloadKind.SERVICE)
    _afresh(client)
    drawn.clear()
    _listed(client)
    _listed(client)
    assert drawn == [[ids["failed"]], [ids["failed"]]]


def test_a_waiting_rows_place_is_filled_in_from_the_queue_table_without_drawing_it(api, drawn):
    """Every pass that starts one job moves every job behind it: the kept rows outlive the table's rewrites."""
    client = api("alice")
    ids = _world(client)
    before = {row["id"]: row for row in _afresh(client)}
    assert before[ids["queued"]]["queue_position"] is not None
    table = queue_places(fresh=True)
    width, moved = len(PLACE_FIELDS), []
    for at in range(0, len(table.numbers), width):
        row = list(table.numbers[at:at + width])
        if row[0] == ids["queued"]:
            row[1] += 5  # five places further back, an hour later
            row[4:] = [NO_TIME if t == NO_TIME else t + 3_600_000 for t in row[4:]]
        moved.append(tuple(row))
    assert queue_states.write_table(moved, timezone.now())
    drawn.clear()
    after = {row["id"]: row for row in _listed(client)}
    assert drawn == []
    assert after[ids["queued"]]["queue_position"] == before[ids["queued"]]["queue_position"] + 5
    assert after == {row["id"]: row for row in _afresh(client)}
    assert after[ids["queued"]] != before[ids["queued"]]
