"""Named ports of a running job, end to end on the simulated cluster: a real stand-in answers each port (TensorBoard
among them), the job's JSON and page give where it opens, the portal's address sends the reader to the workload
origin with a ticket and serves nothing itself, the workload origin signs in per port and refuses whoever may not
open the job, and the stand-in is gone once the job ends."""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from scheduling.executors.simulated import serving as simulated_serving
from scheduling.jobs import actions, submission
from scheduling.models import Job, JobStatus
from scheduling.tasks import sync_job_status
from scheduling.workloads import origin as workload_origin
from tests.conftest import job_payload
from tests.factories import PASSWORD
from tests.scheduling.workloads.conftest import WORKLOAD_HOST

#: A planned run long enough to stay running through the test at the tests' time scale (1e-6: 60 s).
LONG_RUN = "sim:outcome=succeeded sim:minutes=1000000 python train.py"


def _client(username) -> Client:
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


def _running(users, owner="alice", **fields) -> Job:
    job = submission.submit_job(users[owner], job_payload(command=LONG_RUN, ports=["tensorboard:6006", "ui:8080"],
                                                          **fields))
    for _round in range(100):
        sync_job_status()
        job.refresh_from_db()
        if job.status == JobStatus.RUNNING and simulated_serving.alive(job.executor_state.get("ports_serving", {})):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job.pk} did not run with its ports: {job.status} {job.executor_state}")


def _ended(pid: int) -> bool:
    """The process is gone (or a zombie, whose command line is empty), within a moment of its stop."""
    for _round in range(100):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if not handle.read():
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def _on_workload_origin(client, method: str, url: str, **extra):
    parts = urlsplit(url)
    assert parts.netloc in ("", WORKLOAD_HOST), url
    return getattr(client, method)(parts.path + (f"?{parts.query}" if parts.query else ""), HTTP_HOST=WORKLOAD_HOST,
                                   **extra)


def _signed_in(client: Client, portal_path: str) -> str:
    entry = client.get(portal_path)
    assert entry.status_code == 302 and entry.content == b"", entry.content
    target = urlsplit(entry["Location"])
    assert (target.netloc, target.path) == (WORKLOAD_HOST, portal_path) and "ticket" in parse_qs(target.query)
    exchanged = _on_workload_origin(client, "get", entry["Location"])
    assert exchanged.status_code == 200, exchanged.content
    return re.search(r'id="continue" href="([^"]+)"', exchanged.content.decode())[1].replace("&amp;", "&")


def test_tensorboard_of_a_running_job_opens_through_the_workload_origin(users, serving, api):
    job = _running(users)
    answer = api("alice").get(f"/api/jobs/{job.pk}/").json()
    assert answer["ports"] == [
        {"name": "tensorboard", "port": 6006, "url": f"http://testserver/jobs/{job.pk}/ports/tensorboard/"},
        {"name": "ui", "port": 8080, "url": f"http://testserver/jobs/{job.pk}/ports/ui/"}]

    alice = _client("alice")
    page = alice.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/jobs/{job.pk}/ports/tensorboard/"' in page and 'id="open-port-ui"' in page

    clean = _signed_in(alice, f"/jobs/{job.pk}/ports/tensorboard/")
    assert clean == f"/jobs/{job.pk}/ports/tensorboard/"
    cookie = alice.cookies[workload_origin.COOKIE_NAME]
    assert cookie["path"] == clean and cookie["samesite"] == "Strict" and cookie["httponly"]
    board = _on_workload_origin(alice, "get", clean)
    assert board.status_code == 200 and b"TensorBoard of job" in board.content and b"(6006)" in board.content
    assert board["Content-Security-Policy"] == "frame-ancestors 'self'"  # the workload origin's default
    runs = _on_workload_origin(alice, "get", clean + "data/runs")
    assert runs.status_code == 200 and runs.json() == ["train", "validation"]

    # The tensorboard cookie opens that port only: the job's other port signs in for itself.
    other = _on_workload_origin(alice, "get", f"/jobs/{job.pk}/ports/ui/")
    assert other.status_code == 302 and other["Location"].endswith(f"/jobs/{job.pk}/ports/ui/")
    ui = _on_workload_origin(alice, "get", _signed_in(alice, f"/jobs/{job.pk}/ports/ui/"))
    assert ui.status_code == 200 and b"ui of job" in ui.content and b"(8080)" in ui.content

    # A program with an API token reaches a port on the workload origin; the portal's origin serves none.
    by_token = api("alice").get(f"/jobs/{job.pk}/ports/tensorboard/data/runs", HTTP_HOST=WORKLOAD_HOST)
    assert by_token.status_code == 200 and by_token.json() == ["train", "validation"]
    assert alice.get(f"/jobs/{job.pk}/ports/tensorboard/data/runs").status_code == 302


def test_only_who_may_open_the_job_reaches_its_ports(users, serving, api):
    job = _running(users)
    assert _client("bob").get(f"/jobs/{job.pk}/ports/tensorboard/").status_code == 404  # another tenant's job
    for reader in ("carol", "dave"):  # the tenant's researcher, a read-only manager: they see it, may not open it
        assert _client(reader).get(f"/jobs/{job.pk}/ports/tensorboard/").status_code == 403, reader
        page = _client(reader).get(f"/jobs/{job.pk}/").content.decode()
        assert 'id="open-port-tensorboard"' not in page and "may open its ports" in page
        token = api(reader).get(f"/jobs/{job.pk}/ports/tensorboard/", HTTP_HOST=WORKLOAD_HOST)
        assert token.status_code in (403, 404) and b"TensorBoard" not in token.content
    assert _client("alice").get(f"/jobs/{job.pk}/ports/jupyter/").status_code == 404  # not declared
    unsigned = Client().get(f"/jobs/{job.pk}/ports/tensorboard/", HTTP_HOST=WORKLOAD_HOST)
    assert unsigned.status_code == 302 and unsigned["Location"].endswith(f"/jobs/{job.pk}/ports/tensorboard/")


def test_ports_close_when_the_job_ends_and_their_standin_stops(users, serving, api):
    job = _running(users)
    alice = _client("alice")
    clean = _signed_in(alice, f"/jobs/{job.pk}/ports/tensorboard/")
    ports_serving = job.executor_state["ports_serving"]
    actions.cancel_job(users["alice"], job, "done looking")
    assert not simulated_serving.alive(ports_serving)
    assert _ended(ports_serving["pid"])
    assert _on_workload_origin(alice, "get", clean).status_code == 409
    closed = alice.get(f"/jobs/{job.pk}/ports/tensorboard/")
    assert closed.status_code == 409 and "opens only while the job runs" in closed.content.decode()
    assert api("alice").get(f"/api/jobs/{job.pk}/").json()["ports"][0]["url"] is None

    short = submission.submit_job(users["alice"], job_payload(command="sim:outcome=succeeded sim:minutes=1",
                                                              ports=["tensorboard:6006"]))
    started = None
    for _round in range(100):
        sync_job_status()
        short.refresh_from_db()
        started = started or short.executor_state.get("ports_serving")
        if short.is_terminal:
            break
        time.sleep(0.05)
    assert short.status == JobStatus.SUCCEEDED and started and started["port"]["tensorboard"]
    assert not simulated_serving.alive(started)  # stopped with the attempt that succeeded


def test_a_standin_that_died_is_started_again_while_the_job_runs(users, serving):
    job = _running(users, kind="notebook", task_type="notebook", gpus_per_node=1)
    first = job.executor_state["ports_serving"]
    assert job.executor_state["serving"]["port"] not in first["port"].values()  # the notebook serves apart
    simulated_serving.stop(first)
    sync_job_status()
    job.refresh_from_db()
    again = job.executor_state["ports_serving"]
    assert again["pid"] != first["pid"] and simulated_serving.alive(again)
    assert simulated_serving.port_upstream(again, "tensorboard").startswith("http://127.0.0.1:")
    assert simulated_serving.port_upstream(again, "jupyter") == ""


@pytest.mark.parametrize("shared", [False, True])
def test_each_port_has_a_host_of_its_own_on_a_per_workload_origin(users, serving, settings, shared):
    if not shared:
        settings.WORKLOADS = {**settings.WORKLOADS, "ORIGIN": "http://*.apps.test"}
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, ".apps.test"]
    job = _running(users)
    alice = _client("alice")
    entry = urlsplit(alice.get(f"/jobs/{job.pk}/ports/tensorboard/")["Location"])
    if shared:
        assert entry.netloc == WORKLOAD_HOST
        return
    assert entry.netloc == f"pt-{job.pk}-tensorboard.apps.test"
    own_host = {"HTTP_HOST": entry.netloc}
    assert alice.get(f"{entry.path}?{entry.query}", **own_host).status_code == 200
    assert b"TensorBoard of job" in alice.get(entry.path, **own_host).content
    # The job's other port, or a notebook's path, on this port's host: nothing.
    assert alice.get(f"/jobs/{job.pk}/ports/ui/", **own_host).status_code == 404
    assert alice.get(f"/jobs/{job.pk}/open/", **own_host).status_code == 404
