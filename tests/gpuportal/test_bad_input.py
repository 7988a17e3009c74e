"""Bad input anywhere is a 400 naming the field, never a 500, and stores nothing.

The inputs that answered 500 (or were taken silently) before: NUL bytes and lone surrogates, over-long text,
numbers out of range or of the wrong JSON type, impossible dates and months, bodies that are not one JSON
object, malformed JSON, the wrong content type, query parameters out of range, and identical creations at the
same moment. Each surface is tried: the API, the pages' forms and the job-token report endpoint.
"""

import json
import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from governance.models import PriorityRequest
from metering.models import AcceptanceNote, GpuPrice
from scheduling.jobs import submission
from scheduling.jobs import tokens as job_tokens
from scheduling.models import Job, JobArtifact, JobCheckpoint
from tests.conftest import job_payload, long_run

MB = "x" * 1_000_000
DEEP = "[" * 100_000 + "]" * 100_000

#: (what, body as JSON text, the field the 400 names)
JOB_BODIES = [
    ("NUL in name", json.dumps(job_payload(name="a\x00b")), "name"),
    ("NUL in image", json.dumps(job_payload(image="registry.local/a\x00b")), "image"),
    ("NUL in tenant", json.dumps(job_payload(tenant="vi\x00sion")), "tenant"),
    ("lone surrogate", json.dumps(job_payload(name="a\ud800b")), "name"),
    ("1 MB command", json.dumps(job_payload(command=MB)), "command"),
    ("1e999", json.dumps(job_payload()).replace('"gpus_per_node": 4', '"gpus_per_node": 1e999'), "gpus_per_node"),
    ("10**12", json.dumps(job_payload(gpus_per_node=10**12)), "gpus_per_node"),
    ("not a whole number", json.dumps(job_payload(gpus_per_node=1.5)), "gpus_per_node"),
    ("a number as a string", json.dumps(job_payload(gpus_per_node="4")), "gpus_per_node"),
    ("NaN is not JSON", json.dumps(job_payload()).replace('"nodes": 1', '"nodes": NaN'), "body"),
    ("a body that is a list", json.dumps([job_payload()]), "body"),
    ("a body that is a string", json.dumps("gpus"), "body"),
    ("a body that is null", "null", "body"),
    ("JSON nested 100,000 deep", '{"name": ' + DEEP + "}", "body"),
    ("malformed JSON", '{"name": "x",}', "body"),
]

#: (what, body of POST /api/priority-requests/, the field named)
REQUEST_BODIES = [
    ("1 MB justification", {"justification": MB}, "justification"),
    ("February 30", {"start": "2026-02-30T10:00:00Z"}, "start"),
    ("hour 25", {"start": "2026-12-01T25:00:00Z"}, "start"),
    ("offset +99:00", {"end": "2026-12-02T10:00:00+99:00"}, "end"),
    ("a date without its time", {"end": "2026-12-02"}, "end"),
]

#: (what, query of GET /api/jobs/, the parameter named)
QUERIES = [("page 0", "page=0", "page"), ("page_size -6.1e-05", "page_size=-6.1e-05", "page_size"),
           ("mine -3.3e+307", "mine=-3.3e%2B307", "mine"), ("NUL in a filter", "tenant=vi%00sion", "tenant"),
           ("a page that is not a number", "page=last", "page")]


def assert_refused(response, field, status=400):
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert field in response.json(), response.json()


@pytest.fixture
def alice_api(api):
    return api("alice")


def test_api_bodies_are_refused_naming_the_field(alice_api):
    for what, body, field in JOB_BODIES:
        response = alice_api.post("/api/jobs/", body, content_type="application/json")
        assert_refused(response, field), what
    assert alice_api.post("/api/jobs/", "gpus=4", content_type="text/plain").status_code == 415
    assert alice_api.post("/api/jobs/", job_payload(), format="multipart").status_code == 415
    assert not Job.objects.exists()
    burst = {"kind": "burst", "tenant": "vision", "gpu_model": "A100", "gpus": 2, "start": "2030-01-01T10:00:00Z",
             "end": "2030-01-02T10:00:00Z", "justification": "Ablations before the deadline."}
    for what, change, field in REQUEST_BODIES:
        assert_refused(alice_api.post("/api/priority-requests/", {**burst, **change}, format="json"), field), what
    assert not PriorityRequest.objects.exists()


def test_queries_and_paths_are_refused_naming_the_parameter(alice_api):
    for what, query, field in QUERIES:
        assert_refused(alice_api.get(f"/api/jobs/?{query}"), field), what
    assert_refused(alice_api.get("/api/nodes/a%00b/"), "path")
    assert alice_api.get("/api/jobs/0.5/").json() == {"detail": "Not found."}  # JSON, like every API error
    assert_refused(alice_api.get("/api/reports/monthly/2026-13/?tenant=vision"), "month")
    beyond = alice_api.get("/api/reports/monthly/9999-12/?tenant=vision")  # a well-formed month no report has
    assert beyond.status_code == 404 and "month" in beyond.json()["detail"]


def test_prices_refuse_impossible_values_and_one_of_eight_identical_posts_wins(api):
    admin = api("admin")
    price = {"gpu_model": "A100", "price_per_gpu_hour": "2.5", "effective_from": "2026-12-01"}
    for field, value in (("effective_from", "2026-02-30"), ("price_per_gpu_hour", "1e999"),
                         ("price_per_gpu_hour", 2.5), ("note", "n" * 201), ("gpu_model", "A\x00100")):
        assert_refused(admin.post("/api/prices/", {**price, field: value}, format="json"), field)
    assert not GpuPrice.objects.exists()

    token = admin._credentials["HTTP_AUTHORIZATION"]
    start, answers = threading.Barrier(8), []

    def post():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=token)
        start.wait()
        try:
            answers.append(client.post("/api/prices/", price, format="json"))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses.count(201) == 1 and set(statuses) <= {201, 409, 422}, statuses
    assert all("effective_from" in answer.json() for answer in answers if answer.status_code != 201)
    assert GpuPrice.objects.count() == 1


def test_the_job_token_report_refuses_bad_fields_and_stores_nothing(users):
    job = submission.submit_job(users["alice"], job_payload(command=long_run(999)))
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {job_tokens.token_for(job)}")
    url = f"/api/jobs/{job.pk}/report/"
    for body, field in (({"message": "epoch\x00 3"}, "message"), ({"message": MB}, "message"),
                        ({"step": 1e300}, "step"), ({"step": "12"}, "step"), ({"step": -1}, "step"),
                        ({"checkpoint": {"path": "p" * 1001}}, "checkpoint.path"),
                        ({"checkpoint": {"path": "/c", "size_bytes": 10**30}}, "checkpoint.size_bytes"),
                        ({"artifacts": [{"name": "n" * 201, "uri": "s3://x"}]}, "artifacts.0.name"),
                        ({"artifacts": [{"name": "m", "uri": "s3://x", "size_bytes": "big"}]},
                         "artifacts.0.size_bytes"),
                        ({"step": 5, "total": 2}, "step")):
        assert_refused(client.post(url, {**body, "total": body.get("total", 10)}, format="json"), field)
    assert_refused(client.post(url, "[1, 2]", content_type="application/json"), "body")
    assert client.post(url, {}, format="json", HTTP_AUTHORIZATION="").status_code == 401
    stored = Job.objects.get(pk=job.pk)
    assert stored.progress_step is None and stored.progress_message == ""
    assert not JobCheckpoint.objects.exists() and not JobArtifact.objects.exists()


def form_error(response, field) -> bool:
    """The page names the field: a form error under it, or the refusal page's list."""
    html = response.content.decode()
    return f'id="error-{field}"' in html or f"<strong>{field}</strong>" in html


def test_forms_refuse_bad_input_naming_the_field(users):
    browser = Client()
    browser.login(username="alice", password="demo")
    job = {"project": "vision/detection", "task_type": "research", "gpu_model": "A100", "gpus_per_node": "1",
           "nodes": "1", "topology": "any", "image": "registry.local/x:1"}
    for field, value in (("name", "a\x00b"), ("command", MB), ("gpus_per_node", "1e999"),
                         ("max_runtime_minutes", str(10**12)), ("gpu_share", "nan")):
        response = browser.post("/jobs/new/", {**job, field: value})
        assert response.status_code == 400 and form_error(response, field), field
    assert not Job.objects.exists()
    ask = {"kind": "burst", "tenant": "vision", "gpu_model": "A100", "gpus": "2", "start": "2030-01-01T10:00",
           "end": "2030-01-02T10:00", "justification": "Ablations before the deadline."}
    for field, value in (("justification", MB), ("start", "2026-02-30T10:00"), ("start", "2026-12-01T25:00"),
                         ("end", "2026-12-02T10:00+99:00"), ("gpus", "1e999"), ("gpu_model", "A\x00100")):
        response = browser.post("/requests/new/", {**ask, field: value})
        assert response.status_code == 400 and form_error(response, field), field
    assert not PriorityRequest.objects.exists()
    response = browser.post("/account/tokens/", {"name": "laptop\x00", "days": "10"})
    assert response.status_code == 400 and form_error(response, "name")
    running = submission.submit_job(users["alice"], job_payload(command=long_run(999)))
    response = browser.post(f"/jobs/{running.pk}/cancel/", {"reason": "oops\x00"})
    assert response.status_code == 400 and form_error(response, "reason")
    assert not Job.objects.get(pk=running.pk).is_terminal
    assert browser.get("/reports/9999-12/").status_code == 404


def test_an_oversized_form_is_refused_before_it_is_read(users, settings):
    """A form body above MAX_FORM_BODY_BYTES is refused naming the limit, before Django would spool it to disk;
    one under it reaches the form, whose own limit names the field."""
    settings.MAX_FORM_BODY_BYTES = 2 * 2**20
    browser = Client()
    browser.login(username="admin", password="demo")
    big = SimpleUploadedFile("shot.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * (3 * 2**20), content_type="image/png")
    response = browser.post("/acceptance/notes/", {"area": "multi_card", "text": "kept?", "screenshot": big})
    assert response.status_code == 400 and form_error(response, "body")
    assert "at most 2 MB" in response.content.decode()
    assert not AcceptanceNote.objects.exists()
