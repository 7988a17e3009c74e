"""An API request whose database connection is terminated under it (a failover, ``pg_terminate_backend``)
answers 503 with Retry-After, never a 500: the client retries, with its Idempotency-Key for a submission."""

import psycopg
import pytest
from django.db import connection

from gpuportal.storage.db import database_url
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def _terminate_this_connection() -> None:
    """End this thread's database session from another one, as a failover would."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(database_url(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_submission_whose_connection_dies_answers_503_and_a_retry_is_stored_once(api):
    client = api("alice")
    _terminate_this_connection()
    response = client.post("/api/jobs/", job_payload(gpus_per_node=1), format="json",
                           HTTP_IDEMPOTENCY_KEY="failover-1")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "2"
    assert "try again" in response.json()["detail"]
    connection.close()  # what Django does at the end of a request whose connection broke
    first = client.post("/api/jobs/", job_payload(gpus_per_node=1), format="json", HTTP_IDEMPOTENCY_KEY="failover-1")
    again = client.post("/api/jobs/", job_payload(gpus_per_node=1), format="json", HTTP_IDEMPOTENCY_KEY="failover-1")
    assert first.status_code == 201 and again.status_code == 201
    assert first.json()["id"] == again.json()["id"]


def test_the_schema_documents_the_503(api):
    schema = api("alice").get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/jobs/"]["post"]
    assert "503" in operation["responses"] and "Retry-After" in operation["responses"]["503"]["headers"]


@pytest.mark.parametrize(("path", "kind"), [("/", "text/html"), ("/api/jobs/", "application/json")])
def test_a_connection_lost_outside_the_apis_views_is_a_503_too(client, users, path, kind):
    """Middleware (the session, the log context) and commits touch the database outside DRF's views: the 500
    handler answers a lost connection with the same 503 (found by the chaos soak)."""
    client.force_login(users["alice"])
    client.raise_request_exception = False  # what a browser gets, not the test client's re-raise
    _terminate_this_connection()
    response = client.get(path)
    connection.close()
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "2" and response["Content-Type"].startswith(kind)
    assert b"try again in a few seconds" in response.content
