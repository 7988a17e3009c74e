"""The scheduler's kept view (``passes.kept``): after any mix of changes, whoever made them, it holds what a full
read of the database holds, and the snapshots built from it are the ones a full read builds."""

import random

import pytest
from django.utils import timezone

from fleet.models import AdminState, Node
from gpuportal.models import OperationalCounter
from scheduling import lifecycle
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from scheduling.passes import kept, snapshots
from scheduling.passes.scheduler import run_pass
from tenants.models import Quota
from tests.conftest import job_payload
from tests.factories import build_world

pytestmark = pytest.mark.django_db


def _submit(users, rng):
    tenant, user, project = rng.choice([("vision", "alice", "detection"), ("nlp", "bob", "llm-pretrain")])
    return submission.submit_job(users[user], job_payload(tenant=tenant, project=project,
                                                          gpu_model=rng.choice(["A100", "H100", "L40S"]),
                                                          gpus_per_node=rng.choice([1, 2, 4, 8])))


def _finish(job):
    for status in (JobStatus.DISPATCHING, JobStatus.RUNNING, JobStatus.SUCCEEDED):
        lifecycle.transition(job, status, "test: moved on")


def _change(rng, users, round_):
    """One random change of each kind the pass must see, some through services, some as bare row updates."""
    for _ in range(rng.randint(1, 4)):
        _submit(users, rng)
    queued = list(Job.objects.filter(status=JobStatus.QUEUED))
    if queued:
        lifecycle.transition(rng.choice(queued), JobStatus.CANCELLED, "test: cancelled")
    admitted = list(Job.objects.filter(status=JobStatus.ADMITTED))
    if admitted:
        _finish(rng.choice(admitted))
    if queued:  # no service, no timestamp: only the row changes
        Job.objects.filter(pk=rng.choice(queued).pk).update(priority=rng.randint(1, 99))
    node = rng.choice(list(Node.objects.all()))
    Node.objects.filter(pk=node.pk).update(
        admin_state=AdminState.DRAINING if round_ % 2 == 0 else AdminState.ACTIVE)
    Quota.objects.filter(tenant__name="nlp", gpu_model="H100").update(limit_gpus=16 + round_)


def test_after_random_changes_the_kept_view_is_what_a_full_read_gives():
    users = build_world()["users"]
    rng, view = random.Random(7), kept.KeptView()
    for _ in range(16):  # more than the quotas let run: some wait
        _submit(users, rng)
    view.refresh()
    assert view.last["view"] == "rebuilt"
    for round_ in range(5):
        _change(rng, users, round_)
        if round_ % 2:
            run_pass()  # admissions and queue states written by the pass itself
        fleet, rows = view.refresh()
        assert view.last["view"] == "kept"
        read = view.last["waiting_read"] + view.last["running_read"]
        assert 0 < read < len(rows.waiting) + len(rows.running)  # only what changed was read again
        assert kept.differences(rows, snapshots.read_job_rows()) == []
        now = timezone.now()
        assert snapshots.load_snapshots(now, fleet=fleet, rows=rows)[0] == snapshots.load_snapshots(now)[0]


def test_the_periodic_check_repairs_and_counts_a_view_that_went_wrong(settings):
    users = build_world()["users"]
    rng, view = random.Random(3), kept.KeptView()
    job = _submit(users, rng)
    view.refresh()
    view.rows.waiting[job.pk]["priority"] = 1  # as if a change had been missed
    settings.SCHEDULER = {**settings.SCHEDULER, "SNAPSHOT_CHECK_PASSES": 1}
    view.refresh()  # the check runs on every pass now
    assert view.rows.waiting[job.pk]["priority"] == job.priority
    assert view.last["view"] == "rebuilt"
    counted = OperationalCounter.objects.get(name="gpuportal_scheduling_snapshot_mismatches_total")
    assert counted.value == 1


def test_a_waiting_row_written_again_in_the_same_transaction_is_read_again():
    """A waiting row's fingerprint is its version: two writes by one transaction share its id (``xmin``), and only
    the place of the new version (``ctid``) tells them apart. Bare updates, outside any savepoint, as a pass's
    own writes are made."""
    users = build_world()["users"]
    job = _submit(users, random.Random(5))
    view = kept.KeptView()
    Job.objects.filter(pk=job.pk).update(priority=5)
    view.refresh()
    Job.objects.filter(pk=job.pk).update(priority=6)
    _fleet, rows = view.refresh()
    assert view.last == {"view": "kept", "waiting_read": 1, "running_read": 0}
    assert rows.waiting[job.pk]["priority"] == 6
