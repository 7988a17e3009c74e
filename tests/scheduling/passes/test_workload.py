"""The site's recent job shapes (scheduling/passes/workload.py) and their way into the engine's snapshot."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduling.engine.fragmentation import TaskShape
from scheduling.jobs import submission
from scheduling.models import Job
from scheduling.passes import workload
from scheduling.passes.snapshots import load_snapshots
from scheduling.passes.workload import recent_shapes
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def test_recent_shapes_count_the_last_days_jobs_per_cluster(users, world, settings):
    for gpus in (4, 4, 2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=gpus))
    old = submission.submit_job(users["alice"], job_payload(gpus_per_node=8))
    Job.objects.filter(pk=old.pk).update(submitted_at=timezone.now() - timedelta(days=30))
    cluster = world["cluster"]
    workload.forget()  # the passes that ran after each submission read the shapes of the jobs before it
    history = dict(recent_shapes(timezone.now(), (cluster.pk,))[cluster.pk])
    by_gpus = {shape.gpus: shape for shape in history}
    assert sorted((shape.gpus, count) for shape, count in history.items()) == [(2, 1), (4, 2)]
    assert by_gpus[4].models == ("A100",) and isinstance(by_gpus[4], TaskShape)
    snapshot = load_snapshots()[0][cluster.name]
    assert dict(snapshot.history) == history
    with override_settings(SCHEDULER=settings.SCHEDULER | {"HISTORY_DAYS": 0}):
        assert recent_shapes(timezone.now(), (cluster.pk,)) == {}
