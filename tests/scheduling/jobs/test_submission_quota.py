"""What could never run is refused at submission: a model the tenant has no quota for, or
more GPUs than its effective limit — a 422 (API; 400 on the page) naming the field, with the numbers and where
to ask for quota."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Job
from tenants.models import QuotaBurst
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_model_without_quota_is_refused_with_a_link_to_ask(api):
    response = api("erin").post("/api/jobs/", job_payload(tenant="speech", project="asr", gpu_model="H100"),
                                format="json")
    assert response.status_code == 422, response.content
    message = response.json()["gpu_model"][0]
    assert "speech has no quota for H100" in message
    assert "/requests/new/?kind=quota&tenant=speech&gpu_model=H100" in message
    assert not Job.objects.exists()


def test_more_than_the_limit_is_refused_naming_the_numbers(api):
    client = api("alice")
    response = client.post("/api/jobs/", job_payload(gpus_per_node=8, nodes=3), format="json")
    assert response.status_code == 422, response.content
    assert "needs 24 A100 GPUs but tenant vision may hold at most 16" in response.json()["nodes"][0]
    assert not Job.objects.exists()
    # Exactly the limit may wait for its turn: it can run one day.
    assert client.post("/api/jobs/", job_payload(gpus_per_node=8, nodes=2), format="json").status_code == 201


def test_an_active_burst_raises_what_may_be_asked(api, world):
    now = timezone.now()
    QuotaBurst.objects.create(tenant=world["tenants"]["vision"], gpu_model="A100", extra_gpus=8,
                              start=now - timedelta(minutes=1), end=now + timedelta(hours=2))
    response = api("alice").post("/api/jobs/", job_payload(gpus_per_node=8, nodes=3), format="json")
    assert response.status_code == 201, response.content


def test_the_form_says_the_same(client, users):
    client.login(username="erin", password="demo")
    response = client.post("/jobs/new/", {**job_payload(tenant="speech", project="asr", gpu_model="H100"),
                                          "project": "speech/asr"})
    assert response.status_code == 400
    assert "speech has no quota for H100" in response.content.decode()
    assert not Job.objects.exists()
