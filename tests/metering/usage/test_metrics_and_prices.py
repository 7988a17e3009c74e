"""/metrics for Prometheus, counters shared by processes, GPU prices over the API, the operations page."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from gpuportal.observability import telemetry
from metering.models import GpuPrice
from scheduling import lifecycle
from scheduling.models import Job, JobStatus, TaskType
from scheduling.passes.scheduler import run_pass
from tenants.models import Project
from tests.metering.helpers import gpus_of, ran_job


def waiting_job(owner, project="vision/detection", model="A100", minutes_ago=30):
    tenant, name = project.split("/")
    project_row = Project.objects.get(tenant__name=tenant, name=name)
    task = TaskType.objects.get(code="research")
    return lifecycle.create_job(status=JobStatus.QUEUED, reason="test", tenant=project_row.tenant,
                                project=project_row, owner=owner, task_type=task, gpu_model=model, name="w",
                                gpus_per_node=1, image="img", max_runtime_minutes=60, priority=task.priority,
                                submitted_at=timezone.now() - timedelta(minutes=minutes_ago))


def parse(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_metrics_show_queue_health_and_counters(client, users):
    waiting_job(users["alice"], minutes_ago=30)
    waiting_job(users["bob"], "nlp/chat-eval", model="H100", minutes_ago=5)
    Job.objects.update(held_by="user")  # keep them waiting through the pass below
    run_pass()
    telemetry.increment("gpuportal_agent_poll_failures_total", 2)
    telemetry.increment("gpuportal_dispatch_errors_total", cluster="sim")
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    values = parse(response.content.decode())
    assert values['gpuportal_queue_depth{gpu_model="A100",tenant="vision"}'] == 1
    assert values['gpuportal_queue_oldest_wait_seconds{gpu_model="A100",tenant="vision"}'] >= 30 * 60
    assert values['gpuportal_gpus{gpu_model="H100",health="healthy"}'] == 32
    assert values["gpuportal_scheduling_pass_duration_seconds_count"] == 1
    assert values["gpuportal_agent_poll_failures_total"] == 2
    assert values['gpuportal_dispatch_errors_total{cluster="sim"}'] == 1
    names = [line.split("{")[0].split(" ")[0] for line in response.content.decode().splitlines()
             if not line.startswith("#")]
    assert names == sorted(names)  # each metric's samples form one group, as the text format requires


def test_metrics_are_protected(client, settings, world):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    settings.METRICS = {"TOKEN": "s3cret", "ALLOWED_IPS": []}
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


def test_production_metrics_need_the_bearer_token_even_from_loopback(client, settings, world):
    settings.ENVIRONMENT = "production"
    settings.METRICS = {"TOKEN": "", "ALLOWED_IPS": ["127.0.0.1"]}
    refused = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert refused.status_code == 403 and b"GPUPORTAL_METRICS_TOKEN" in refused.content
    settings.METRICS = {"TOKEN": "s3cret", "ALLOWED_IPS": ["127.0.0.1"]}
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


def test_prices_are_set_by_platform_admins_with_errors_naming_the_field(api):
    admin = api("admin")
    created = admin.post("/api/prices/", {"gpu_model": "H100", "price_per_gpu_hour": "3.25",
                                          "effective_from": "2026-11-01"}, format="json")
    assert created.status_code == 201 and created.json()["created_by"] == "admin"
    bad = admin.post("/api/prices/", {"gpu_model": "V100", "price_per_gpu_hour": "-1", "effective_from": "Nov"},
                     format="json")
    assert bad.status_code == 400
    assert set(bad.json()) >= {"gpu_model", "price_per_gpu_hour", "effective_from"}
    again = admin.post("/api/prices/", {"gpu_model": "H100", "price_per_gpu_hour": "3.5",
                                        "effective_from": "2026-11-01"}, format="json")
    assert again.status_code == 422 and "effective_from" in again.json()
    assert api("dave").post("/api/prices/", {"gpu_model": "H100", "price_per_gpu_hour": "1",
                                                 "effective_from": "2026-12-01"}, format="json").status_code == 403
    assert GpuPrice.objects.count() == 1
    assert [p["price_per_gpu_hour"] for p in api("alice").get("/api/prices/").json()] == ["3.2500"]


def test_operations_dashboard_has_three_groups_for_managers_only(client, users):
    from datetime import date

    from metering.usage.rollup import rollup

    now = timezone.now()
    gpus = gpus_of("dc1-r3-a100-01", 2)
    ran_job(users["alice"], "vision/detection", gpus, now - timedelta(days=2, hours=5), now - timedelta(days=2),
            status=JobStatus.FAILED, category="out_of_memory", wait=timedelta(hours=3))
    rollup(date.today() - timedelta(days=3), date.today())
    client.login(username="alice", password="demo")
    assert client.get("/reports/operations/").status_code == 403
    client.login(username="dave", password="demo")
    html = client.get("/reports/operations/?days=7").content.decode()
    for group in ("group-resources", "group-jobs", "group-governance"):
        assert group in html
    for section in ("section-gpu_utilisation", "section-wait", "section-failure_trend", "section-slowest_to_start",
                    "section-tenant_usage", "section-capacity_advice", "section-changes", "section-checkpoints"):
        assert section in html
    failures = client.get("/reports/operations/?days=7&csv=failure_trend").content.decode().splitlines()
    assert failures[0] == "day,category,jobs" and failures[1].endswith(",out_of_memory,1")


@pytest.fixture
def anonymous():
    return APIClient()


def test_reports_need_a_login(client, anonymous, world):
    assert client.get("/reports/").status_code == 302
    assert anonymous.get("/api/reports/monthly/2026-10/").status_code in (401, 403)


def test_report_index_says_when_there_is_nothing(client, world):
    client.login(username="alice", password="demo")
    assert "No usage has been rolled up yet" in client.get("/reports/").content.decode()
