"""``gpuportal jobs --sort``: the job page's order from the command line; an unknown order is refused, naming it."""

from datetime import timedelta

from django.utils import timezone

from scheduling.models import JobStatus
from tests.factories import make_job


def test_jobs_in_the_order_asked(cli, world, users):
    now, vision = timezone.now(), world["tenants"]["vision"]
    ran = {minutes: make_job(users["alice"], vision, JobStatus.SUCCEEDED, f"ran-{minutes}",
                             started_at=now - timedelta(minutes=minutes + 1), finished_at=now - timedelta(minutes=1))
           for minutes in (30, 5, 90)}
    cli.login("alice")
    listed = cli("jobs", "--sort=-elapsed", "--json")
    assert listed.code == 0, listed.err
    assert [job["id"] for job in listed.json["results"]] == [ran[90].pk, ran[30].pk, ran[5].pk]
    assert [job["id"] for job in cli("jobs", "--sort", "elapsed", "--json").json["results"]] == [
        ran[5].pk, ran[30].pk, ran[90].pk]
    refused = cli("jobs", "--sort", "sideways")
    assert refused.code != 0 and "sort" in refused.err and "Unknown order sideways" in refused.err
