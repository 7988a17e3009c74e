"""Every page and API list runs a bounded number of SQL queries, whatever the number of jobs: the count with
30 jobs equals the count with 3."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling import lifecycle
from scheduling.jobs import actions as job_actions
from scheduling.models import Job, JobEvent, JobStatus, TaskType
from scheduling.passes import workload
from tenants.models import Project

pytestmark = pytest.mark.django_db(transaction=True)
PAGES = ["/", "/jobs/", "/queue/", "/cluster/", "/inventory/", "/api/jobs/", "/api/quotas/", "/api/queue/",
         "/api/nodes/", "/reports/operations/"]


def add_jobs(users, count: int) -> None:
    """Waiting, running and finished jobs of alice, imported directly (no pass needed)."""
    project = Project.objects.get(tenant__name="vision", name="detection")
    task_type = TaskType.objects.get(code="research")
    now = timezone.now()
    for status in (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED):
        lifecycle.import_jobs([Job(tenant=project.tenant, project=project, owner=users["alice"], name=f"q-{i}",
                                   task_type=task_type, gpu_model="A100", gpus_per_node=1, image="img",
                                   max_runtime_minutes=60, priority=50, submitted_at=now)
                               for i in range(count // 3)], status, "test fixture")


def cold() -> None:
    cache.clear()
    workload.forget()


def queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(captured)


def test_queries_do_not_grow_with_the_number_of_jobs(client, users):
    client.login(username="admin", password="demo")
    add_jobs(users, 3)
    cold()  # both counts from cold caches: a page read back (job rows, filter fields, history) reads less
    few = {path: queries(client, path) for path in PAGES}
    add_jobs(users, 27)
    cold()
    many = {path: queries(client, path) for path in PAGES}
    assert many == few
    job = Job.objects.filter(status=JobStatus.RUNNING).first()
    for path in (f"/jobs/{job.pk}/", f"/api/jobs/{job.pk}/"):
        before = queries(client, path)
        for i in range(10):
            job_actions.note(job, JobEvent.Kind.EXECUTOR, f"event {i}")
        assert queries(client, path) == before, path
