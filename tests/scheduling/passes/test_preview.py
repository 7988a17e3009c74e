"""The what-if of the next pass sees a submission as the pass will once it is stored: the same engine fields, on
the same cluster (the choice to spare one's own jobs included)."""

import dataclasses

import pytest

from scheduling.jobs import submission
from scheduling.passes import preview
from scheduling.passes.snapshots import load_snapshots
from tests.conftest import job_payload
from tests.factories import build_world

pytestmark = pytest.mark.django_db

IGNORED = ("id", "submitted_at", "group", "group_limit")


def _fields(job) -> dict:
    """The engine fields, choices as their plain values (a TextChoices member equals its value)."""
    return {k: str(v) if isinstance(v, str) else v for k, v in dataclasses.asdict(job).items() if k not in IGNORED}


@pytest.mark.parametrize("payload", [
    job_payload(gpus_per_node=2, spare_own_jobs=True),
    job_payload(task_type="training", gpu_model="H100", gpus_per_node=8, nodes=2, topology="same_rack"),
    job_payload(kind="array", array="0-2", array_parallelism=2, gpu_share=0.5, gpus_per_node=1),
    job_payload(kind="service", replicas=2, gpus_per_node=1, max_runtime_minutes=None, task_type="inference"),
])
def test_a_new_job_is_seen_as_the_pass_will_see_it_stored(payload):
    alice = build_world()["users"]["alice"]
    payload = {k: v for k, v in payload.items() if v is not None}
    request = submission.validate_job_request(alice, payload)
    world, _nodes, _gpus = load_snapshots()
    foreseen = preview.with_new_jobs(preview.new_waiting_jobs(alice.pk, request, submission.timezone.now()))(world)
    submission.create_jobs(alice, request)
    stored, _nodes, _gpus = load_snapshots()
    for name in stored:
        assert sorted(map(str, map(_fields, foreseen[name].waiting))) == sorted(map(str, map(_fields,
                                                                                            stored[name].waiting)))
    array = [j for s in stored.values() for j in s.waiting if j.group]
    assert all(j.group_limit == 2 for j in array)

