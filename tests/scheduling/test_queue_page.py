"""The queue page and ``/api/queue/``: a sentence per job (never a bare code), other tenants' rows with their reason
but nothing that names their job or people, positions counted per GPU model, a filter by model, likely start with
its time zone."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.engine.reasons import WaitReason
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus, TaskType
from tenants.models import Project
from tests.conftest import job_payload, long_run
from tests.factories import make_queue_state

pytestmark = pytest.mark.django_db(transaction=True)

PRIORITY_PARAMS = {"blocker_id": 4242, "blocker_priority": 80, "blocker_tenant": "nlp", "gpu_model": "H100",
                   "blocker_gpus": 16, "total_free": 4}


def waiting(tenant: str, project: str, owner, name: str, model: str, position: int, reason=WaitReason.PRIORITY,
            params=None, start=None) -> Job:
    """A queued job with the queue state a pass would have written (no pass runs: the page reads what it finds)."""
    project_row = Project.objects.get(tenant__name=tenant, name=project)
    [job] = lifecycle.import_jobs([Job(tenant=project_row.tenant, project=project_row, owner=owner, name=name,
                                       task_type=TaskType.objects.get(code="research"), gpu_model=model,
                                       gpus_per_node=8, image="img", max_runtime_minutes=60, priority=50,
                                       submitted_at=timezone.now())], JobStatus.QUEUED, "test fixture")
    make_queue_state(job, reason, params or PRIORITY_PARAMS, position, estimated_start=start, earliest_start=start,
                     latest_start=start and start + timedelta(hours=2))
    return job


def test_rows_read_as_sentences_and_other_tenants_rows_name_no_job(client, users, api):
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    mine = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="alice-waits"))
    assert mine.wait_reason == WaitReason.QUOTA_EXHAUSTED
    theirs = waiting("nlp", "llm-pretrain", users["bob"], "bob-secret-run", "H100", 1)

    assert client.login(username="alice", password="demo")
    html = client.get("/queue/").content.decode()
    assert "quota_exhausted" not in html and "<code>" not in html  # no bare codes
    assert "Quota exhausted" in html and "Tenant vision uses 16 of its 16 A100 GPUs" in html
    assert f"#{mine.pk} alice-waits" in html
    # bob's job: its reason in words, without its name, its id, the blocking job's id or its tenant's name
    assert "bob-secret-run" not in html and f"#{theirs.pk}" not in html and "4242" not in html
    assert "A job with priority 80 is ahead in the H100 queue and waits for 16 GPUs (4 free)" in html

    rows = {r["tenant"]: r for r in api("alice").get("/api/queue/").json()["results"]}
    assert rows["nlp"]["job"] is None and "4242" not in rows["nlp"]["message"]
    assert rows["nlp"]["message"].startswith("A job with priority 80 is ahead")
    assert rows["vision"]["job"] == mine.pk and "16 of its 16 A100" in rows["vision"]["message"]
    # bob reads his own job's sentence whole, as on its page
    own = api("bob").get("/api/queue/?gpu_model=H100").json()["results"]
    assert [r["job"] for r in own] == [theirs.pk] and own[0]["message"] == theirs.wait_reason_message
    assert "#4242" in own[0]["message"]


def test_positions_count_per_gpu_model_and_the_filter_keeps_them(client, users, api):
    alice = users["alice"]
    # the pass's positions run across models: H100 1, A100 2, H100 3, A100 4
    jobs = [waiting("vision", "detection", alice, f"job-{n}", model, n)
            for n, model in enumerate(("H100", "A100", "H100", "A100"), start=1)]
    rows = api("alice").get("/api/queue/").json()["results"]
    assert [(r["job"], r["gpu_model"], r["position"], r["model_position"]) for r in rows] == [
        (jobs[0].pk, "H100", 1, 1), (jobs[1].pk, "A100", 2, 1), (jobs[2].pk, "H100", 3, 2),
        (jobs[3].pk, "A100", 4, 2)]
    assert [Job.objects.get(pk=job.pk).model_queue_position for job in jobs[2:]] == [2, 2]
    a100 = api("alice").get("/api/queue/?gpu_model=A100").json()["results"]
    assert [(r["job"], r["model_position"]) for r in a100] == [(jobs[1].pk, 1), (jobs[3].pk, 2)]

    assert client.login(username="alice", password="demo")
    html = client.get("/queue/?gpu_model=A100").content.decode()
    assert '<label for="gm">GPU model</label>' in html and '<select id="gm" name="gpu_model">' in html
    assert '<option value="A100" selected>A100</option>' in html and '<option value="H100">H100</option>' in html
    assert "job-2" in html and "job-4" in html and "job-1" not in html and "job-3" not in html
    assert 'data-model-position="1"' in html and "1 for A100" in html and "2 for A100" in html


def test_likely_start_names_its_time_zone(client, users, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    start = timezone.now() + timedelta(hours=3)
    waiting("vision", "detection", users["alice"], "later", "A100", 1, reason=WaitReason.INSUFFICIENT_GPUS,
            params={"requested": 8, "gpu_model": "A100", "best_free": 4, "total_free": 12}, start=start)
    assert client.login(username="alice", password="demo")
    html = client.get("/queue/").content.decode()
    assert html.count("Asia/Shanghai") == 1 and '<span class="muted tz">Asia/Shanghai</span>' in html  # named once
    assert "between" in html and "Needs 8 A100 GPUs on one node" in html
