"""A hold wins every race with a scheduling pass: taken before the pass applies its decisions, the job is not
admitted; taken while the pass holds the job's row, it waits and is refused with the state the pass moved the job
to (409 in the API), never answered "held" for a job that starts anyway."""

import threading
from unittest import mock

import pytest
from django.db import connection

from gpuportal.web.conflicts import StateConflict
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from scheduling.passes import scheduler
from tenants.models import Quota
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def _queued_until_quota(users) -> Job:
    """A job that waits only for a quota the test then grants: the next pass admits it."""
    Quota.objects.filter(tenant__name="vision", gpu_model="A100").update(guaranteed_gpus=2, limit_gpus=2)
    submission.submit_job(users["alice"], job_payload(gpus_per_node=2, command=long_run(999)))
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=2))
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED
    Quota.objects.filter(tenant__name="vision", gpu_model="A100").update(guaranteed_gpus=8, limit_gpus=8)
    return job


def _in_thread(target, out: dict) -> dict:
    """Run ``target`` on its own database connection; ``out`` gets what it returned or raised."""
    def run():
        try:
            out["value"] = target()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    out["thread"] = thread
    return out


def test_a_hold_after_the_passes_snapshot_wins_over_its_admission(users):
    job = _queued_until_quota(users)
    loaded = scheduler.load_snapshots

    def snapshot_then_hold():
        snapshots = loaded()  # the pass has decided from a view in which the job is not held
        holder = _in_thread(lambda: job_actions.set_hold(users["alice"], Job.objects.get(pk=job.pk), True), {})
        holder["thread"].join(10)
        assert holder["value"].held_by == "user", holder
        return snapshots

    with mock.patch("scheduling.passes.scheduler.load_snapshots", snapshot_then_hold):
        report = scheduler.run_pass()
    assert job.pk not in report.admitted_ids
    job.refresh_from_db()
    assert (job.status, job.held_by) == (JobStatus.QUEUED, "user")
    assert not job.allocations.exists()
    scheduler.run_pass()
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.queue_state.wait_reason == "held"


def test_a_hold_racing_with_the_apply_step_waits_and_is_refused_with_the_new_state(users):
    job = _queued_until_quota(users)
    stale = Job.objects.get(pk=job.pk)  # what the hold request loaded: still queued
    store_waits = scheduler._store_waits
    holder = {}

    def hold_while_the_pass_holds_the_row(waiting, *args, **kwargs):
        if holder or not Job.objects.filter(pk=job.pk, status=JobStatus.ADMITTED).exists():
            return store_waits(waiting, *args, **kwargs)  # another cluster's, or the job's cluster once held
        _in_thread(lambda: job_actions.set_hold(users["alice"], stale, True), holder)
        holder["thread"].join(1.0)
        assert holder["thread"].is_alive()  # it waits for the pass's lock on the job's row
        return store_waits(waiting, *args, **kwargs)

    with mock.patch("scheduling.passes.scheduler._store_waits", hold_while_the_pass_holds_the_row):
        report = scheduler.run_pass()
    holder["thread"].join(10)
    assert job.pk in report.admitted_ids
    assert isinstance(holder.get("error"), StateConflict), holder
    assert "is Admitted now" in " ".join(holder["error"].messages)
    job.refresh_from_db()
    assert job.held_by == "" and job.status != JobStatus.QUEUED
    assert not job.events.filter(kind="hold").exists()


def test_the_api_answers_409_naming_the_state_for_a_hold_on_a_job_no_longer_waiting(users, api):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=1))
    job.refresh_from_db()
    assert job.status not in (JobStatus.QUEUED, JobStatus.PENDING)
    response = api("alice").post(f"/api/jobs/{job.pk}/hold/")
    assert response.status_code == 409, response.content
    assert job.get_status_display() in response.json()["status"][0]
    assert api("alice").post(f"/api/jobs/{job.pk}/release/").status_code == 409
    assert Job.objects.get(pk=job.pk).held_by == ""
