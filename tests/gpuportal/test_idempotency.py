"""Idempotency-Key on the creating API calls: a retried request gets the first answer, never a duplicate."""

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from governance.models import PriorityRequest
from gpuportal.models import IdempotencyRecord
from gpuportal.tasks import prune_idempotency_records
from scheduling.models import Job
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_same_key_returns_the_first_answer_without_a_duplicate(api, users):
    first = api("alice").post("/api/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="retry-1")
    again = api("alice").post("/api/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="retry-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1
    other = api("alice").post("/api/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="retry-2")
    assert other.status_code == 201 and Job.objects.count() == 2
    bob = api("bob").post("/api/jobs/", job_payload(tenant="nlp", project="chat-eval"), format="json",
                          HTTP_IDEMPOTENCY_KEY="retry-1")  # keys are per user
    assert bob.status_code == 201 and bob.json()["id"] != first.json()["id"]


def test_a_reused_key_with_another_body_or_a_bad_key_is_refused(api, users):
    assert api("alice").post("/api/jobs/", job_payload(), format="json",
                             HTTP_IDEMPOTENCY_KEY="k").status_code == 201
    changed = api("alice").post("/api/jobs/", job_payload(gpus_per_node=2), format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert changed.status_code == 422 and "Idempotency-Key" in changed.json()
    bad = api("alice").post("/api/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="x" * 256)
    assert bad.status_code == 400 and "255" in bad.json()["Idempotency-Key"][0]
    assert Job.objects.count() == 1


def test_an_error_is_not_remembered(api, users):
    refused = api("alice").post("/api/jobs/", job_payload(gpus_per_node=99), format="json", HTTP_IDEMPOTENCY_KEY="e")
    assert refused.status_code == 422 and "gpus_per_node" in refused.json()
    assert api("alice").post("/api/jobs/", job_payload(gpus_per_node=99), format="json",
                             HTTP_IDEMPOTENCY_KEY="e").status_code == 422
    assert Job.objects.count() == 0


def test_concurrent_retries_with_one_key_create_one_job(api, users):
    client = api("alice")
    answers = []

    def post():
        answers.append(client.post("/api/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="race"))
        connections.close_all()

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [a.status_code for a in answers] == [201] * 4
    assert len({a.json()["id"] for a in answers}) == 1 and Job.objects.count() == 1


def test_priority_requests_take_the_key_too(api, users):
    body = {"kind": "quota", "tenant": "vision", "gpu_model": "A100", "guaranteed": 16, "limit": 20,
            "justification": "More borrowing room for the autumn experiments."}
    first = api("frank").post("/api/priority-requests/", {**body, "tenant": "nlp"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="q1")
    again = api("frank").post("/api/priority-requests/", {**body, "tenant": "nlp"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="q1")
    assert first.status_code == again.status_code == 201, first.content
    assert again.json()["id"] == first.json()["id"] and PriorityRequest.objects.count() == 1


def test_old_keys_are_forgotten(api, users, settings):
    assert api("alice").post("/api/jobs/", job_payload(), format="json",
                             HTTP_IDEMPOTENCY_KEY="old").status_code == 201
    IdempotencyRecord.objects.update(created=timezone.now() - timedelta(hours=settings.IDEMPOTENCY_TTL_HOURS + 1))
    assert prune_idempotency_records() == 1
    assert api("alice").post("/api/jobs/", job_payload(), format="json",
                             HTTP_IDEMPOTENCY_KEY="old").status_code == 201
    assert Job.objects.count() == 2
