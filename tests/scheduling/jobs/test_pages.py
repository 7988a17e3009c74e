"""Server-rendered pages: what they show, isolation, and the submit form's errors."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from scheduling.jobs import queries, submission
from scheduling.lifecycle import import_jobs
from scheduling.models import Job, JobStatus, queue_places
from tenants.models import Tenant
from tenants.quotas import grant_burst
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


def login(client, username):
    assert client.login(username=username, password="demo")
    return client


def test_login_page_and_redirect(client, world):
    assert client.get("/accounts/login/").status_code == 200
    response = client.get("/jobs/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_dashboard_shows_quota_bars_jobs_and_queue(client, users):
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    waiting = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="waits-for-quota"))
    html = login(client, "alice").get("/").content.decode()
    assert 'data-tenant="vision" data-model="A100"' in html
    assert "16 / 16 / 16" in html  # used / guaranteed / limit
    assert "waits-for-quota" in html and "quota_exhausted" in html
    assert "Tenant vision uses 16 of its 16 A100 GPUs" in html
    assert f'data-job-id="{waiting.pk}"' in html
    assert 'data-tenant="nlp"' not in html


def test_the_dashboard_queue_is_in_the_queue_table_s_order_and_unranked_jobs_come_last(client, users):
    """The rows come in the queue table's order (``queries.in_queue_order``), not in the order of submission; a
    job no pass has ranked yet comes after them. Text that is not ranks never reaches the job list's SQL."""
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(999)))
    waiting = [submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name=f"waits-{n}", task_type=kind))
               for n, kind in enumerate(("research", "evaluation", "training", "research"))]
    ranks = queue_places(fresh=True).ranks
    placed = sorted((job.pk for job in waiting), key=ranks.__getitem__)
    assert placed != [job.pk for job in waiting]  # the classes reorder them
    model = waiting[0]
    late = import_jobs([Job(tenant=model.tenant, project=model.project, owner=model.owner, name="not-ranked-yet",
                            task_type=model.task_type, gpu_model=model.gpu_model, gpus_per_node=8, image="img",
                            priority=100, submitted_at=timezone.now() - timedelta(days=1))], JobStatus.QUEUED,
                       "test: no pass has ranked it")[0]
    assert late.pk not in queue_places(fresh=True).ranks
    html = login(client, "alice").get("/").content.decode()
    queue = html[html.index("Queue of my tenants"):]
    shown = [queue.index(f'data-job-id="{pk}"') for pk in [*placed, late.pk]]
    assert shown == sorted(shown)
    assert queries.in_queue_order(Job.objects.waiting(), 2).count() == 2
    assert not queries.in_queue_order(Job.objects.filter(name="nothing"), 20).exists()
    with pytest.raises(ValueError):
        queries._RankOf("{\"1\": 1}'; SELECT 1; --", F("pk"))


def test_empty_pages_say_so(client, users):
    login(client, "alice")
    assert "You have not submitted any job yet." in client.get("/").content.decode()
    assert "No job matches these filters." in client.get("/jobs/").content.decode()


def test_job_list_filters(client, users):
    submission.submit_job(users["alice"], job_payload(name="on-a100"))
    submission.submit_job(users["alice"], job_payload(name="on-h100", gpu_model="H100"))
    login(client, "alice")
    html = client.get("/jobs/?gpu_model=H100").content.decode()
    assert "on-h100" in html and "on-a100" not in html
    assert "on-a100" in client.get("/jobs/?q=a100").content.decode()


def test_job_detail_shows_timeline_placement_and_failure(client, users, settings):
    from tests.scheduling.test_lifecycle import _run_until_done

    job = submission.submit_job(users["alice"], job_payload(command="sim:outcome=out_of_memory sim:minutes=10"))
    _run_until_done(job, settings)
    html = login(client, "alice").get(f"/jobs/{job.pk}/").content.decode()
    assert "Why it failed" in html and "out_of_memory" in html and "CUDA out of memory" in html
    for status in ("Queued", "Admitted", "Dispatching", "Running", "Failed"):
        assert status in html
    node = job.allocations.first().gpu.node.name
    assert node in html and "GPU 0" in html


def test_other_tenant_job_page_and_cancel_are_404(client, users):
    job = submission.submit_job(users["alice"], job_payload())
    login(client, "bob")
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 404
    assert job.name not in client.get("/jobs/").content.decode()
    assert job.name not in client.get("/").content.decode()


def test_submit_form_creates_job_and_redirects(client, users):
    login(client, "alice")
    form = client.get("/jobs/new/").content.decode()
    assert 'value="vision/detection"' in form and "nlp/" not in form
    response = client.post("/jobs/new/", {"project": "vision/detection", "task_type": "research", "gpu_model": "A100",
                                          "gpus_per_node": "2", "nodes": "1", "image": "registry.local/x:1",
                                          "command": "python a.py", "max_runtime_minutes": ""})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.max_runtime_minutes == 24 * 60  # the task type's default


def test_submit_form_bad_input_names_field_and_keeps_what_was_typed(client, users):
    login(client, "alice")
    response = client.post("/jobs/new/", {"project": "vision/detection", "task_type": "research",
                                          "gpu_model": "A100", "gpus_per_node": "12", "nodes": "1", "image": "",
                                          "command": "python keep-me.py --lr 3e-4", "name": "my-typed-name"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="error-gpus_per_node"' in html and "more than any A100 node has (at most 8)" in html
    assert 'id="error-image"' in html and "Image is required" in html
    assert "python keep-me.py --lr 3e-4" in html and 'value="my-typed-name"' in html and 'value="12"' in html
    assert Job.objects.count() == 0


def test_viewer_roles_cannot_submit(client, users):
    login(client, "dave")
    html = client.get("/jobs/new/").content.decode()
    assert "no project in which you may submit" in html


def test_cluster_page_lists_nodes(client, users):
    html = login(client, "bob").get("/cluster/").content.decode()
    assert "dc1-r1-h100-01" in html and "dc2-r2-l40s-04" in html


def test_dashboard_bar_shows_the_limit_with_an_active_burst(client, users):
    now = timezone.now()
    grant_burst(Tenant.objects.get(name="vision"), "A100", 8, now - timedelta(minutes=5), now + timedelta(hours=1))
    client.login(username="alice", password="demo")
    html = client.get("/").content.decode()
    row = html[html.index('data-tenant="vision" data-model="A100"'):]
    row = row[:row.index("</tr>")]
    assert "/ 16 / 24" in row and 'data-burst="8"' in row and "limit 16 + 8 burst" in row
    api_rows = client.get("/api/quotas/").json()["results"]
    a100 = next(r for r in api_rows if r["tenant"] == "vision" and r["gpu_model"] == "A100")
    assert a100["limit"] == 24 and a100["burst"] == 8
