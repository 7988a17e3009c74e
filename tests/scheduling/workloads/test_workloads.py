"""Notebooks, inference services and arrays end to end on the simulated cluster: the API, the workload origin's
proxy to the real stand-in servers, rolling updates and scaling, arrays with a limit on tasks at once."""

from __future__ import annotations

import re
import time
from importlib import import_module
from urllib.parse import urlsplit

import pytest
from django.apps import apps as django_apps
from django.test import Client

from scheduling import engine
from scheduling.executors.simulated import serving as simulated_serving
from scheduling.jobs import submission
from scheduling.models import Job, JobAllocation, JobStatus, JobTemplate
from scheduling.tasks import sync_job_status
from tests.conftest import job_payload
from tests.factories import PASSWORD
from tests.scheduling.workloads.conftest import WORKLOAD_HOST


def _client(username) -> Client:
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


def _sign_in_to_workload(client, portal_path) -> None:
    """The portal's redirect to the workload origin, and the exchange of its ticket for the workload cookie."""
    entry = client.get(portal_path)
    assert entry.status_code == 302 and urlsplit(entry["Location"]).netloc == WORKLOAD_HOST, entry
    target = urlsplit(entry["Location"])
    assert client.get(f"{target.path}?{target.query}", HTTP_HOST=WORKLOAD_HOST).status_code == 200


def _sync_until(check, rounds=80):
    for _round in range(rounds):
        sync_job_status()
        if check():
            return True
        time.sleep(0.05)
    return False


def _running(job_id) -> bool:
    return Job.objects.get(pk=job_id).status == JobStatus.RUNNING


def test_notebook_opens_for_its_owner_only(api, users, serving):
    created = api("alice").post("/api/jobs/", job_payload(kind="notebook", task_type="notebook", gpus_per_node=1),
                                format="json")
    assert created.status_code == 201, created.content
    job_id = created.json()["id"]
    assert created.json()["kind"] == "notebook"
    assert created.json()["url"] is None  # nothing to open before it runs
    assert _sync_until(lambda: _running(job_id))
    shown = api("alice").get(f"/api/jobs/{job_id}/").json()
    assert shown["url"].endswith(f"/jobs/{job_id}/open/")

    owner = _client("alice")
    _sign_in_to_workload(owner, f"/jobs/{job_id}/open/")
    page = owner.get(f"/jobs/{job_id}/open/", HTTP_HOST=WORKLOAD_HOST)
    assert page.status_code == 200 and b"Jupyter stand-in" in page.content
    kernel = owner.post(f"/jobs/{job_id}/open/api/kernels", data=b"{}", content_type="application/json",
                        HTTP_HOST=WORKLOAD_HOST)
    assert kernel.status_code == 201
    status = owner.get(f"/jobs/{job_id}/open/api/status", HTTP_HOST=WORKLOAD_HOST).json()
    assert status["kernels"] == 1
    assert "Open" in owner.get(f"/jobs/{job_id}/").content.decode()

    assert _client("carol").get(f"/jobs/{job_id}/open/").status_code == 403  # same tenant, not the owner
    assert _client("bob").get(f"/jobs/{job_id}/open/").status_code == 404  # another tenant: no such job
    assert Client().get(f"/jobs/{job_id}/open/").status_code == 302  # to the sign-in page
    refused = owner.get(f"/jobs/{job_id}/open-auth/")  # only an ingress with the shared secret is answered
    assert refused.status_code == 403 and "Authorization" not in refused

    job = Job.objects.get(pk=job_id)
    port = job.executor_state["serving"]["port"]
    assert api("alice").post(f"/api/jobs/{job_id}/cancel/", {}, format="json").status_code == 200
    assert not simulated_serving.alive(job.executor_state["serving"])
    assert simulated_serving.ask({"port": port}, "/healthz")[0] == 0  # the server is gone
    assert owner.get(f"/jobs/{job_id}/open/").status_code == 409


def _service(api, gid):
    response = api("alice").get(f"/api/services/{gid}/")
    assert response.status_code == 200, response.content
    return response.json()


def test_service_rolls_out_and_scales(api, users, serving):
    payload = job_payload(kind="service", task_type="inference", gpus_per_node=1, replicas=2, port=8000,
                          image="registry.local/vllm:0.5", command="vllm serve")
    del payload["max_runtime_minutes"]  # a service runs until stopped
    created = api("alice").post("/api/jobs/", payload, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["kind"] == "service" and body["replicas"] == 2 and body["max_runtime_minutes"] is None
    gid = body["group"]
    assert _sync_until(lambda: _service(api, gid)["ready_replicas"] == 2)
    endpoint = f"/services/{gid}/endpoint/v1/completions"
    answer = api("alice").post(endpoint, {"prompt": "abc"}, format="json", HTTP_HOST=WORKLOAD_HOST)
    assert answer.status_code == 200 and answer.json()["revision"] == 1 and answer.json()["choices"][0]["text"] == "cba"
    assert api("bob").post(endpoint, {"prompt": "x"}, format="json",
                           HTTP_HOST=WORKLOAD_HOST).status_code == 404  # another tenant

    rolled = api("alice").post(f"/api/services/{gid}/rollout/", {"image": "registry.local/vllm:0.6"}, format="json")
    assert rolled.status_code == 200 and rolled.json()["revision"] == 2 and rolled.json()["rolling_out"]
    revisions_served = set()
    for _round in range(120):
        sync_job_status()
        answer = api("alice").post(endpoint, {"prompt": "x"}, format="json", HTTP_HOST=WORKLOAD_HOST)
        assert answer.status_code == 200, "the service stopped answering during the rolling update"
        revisions_served.add(answer.json()["revision"])
        state = _service(api, gid)
        if not state["rolling_out"] and state["ready_replicas"] == 2:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the rollout did not finish: {state}")
    assert revisions_served >= {2}
    live = [m for m in state["members"] if m["status"] == "running"]
    assert [m["revision"] for m in live] == [2, 2]
    old = Job.objects.filter(group_id=gid, revision=1)
    assert all(j.status == JobStatus.CANCELLED for j in old)
    assert all("rolling update" in j.events.last().reason for j in old)

    assert api("alice").post(f"/api/services/{gid}/scale/", {"replicas": 3}, format="json").status_code == 200
    assert _sync_until(lambda: _service(api, gid)["ready_replicas"] == 3)
    scaled = api("alice").post(f"/api/services/{gid}/scale/", {"replicas": 1}, format="json")
    assert scaled.status_code == 200 and scaled.json()["replicas"] == 1
    removed = Job.objects.filter(group_id=gid, revision=2, status=JobStatus.CANCELLED)
    assert removed.count() == 2
    assert not JobAllocation.objects.filter(job__in=removed, released_at__isnull=True).exists()  # GPUs freed
    too_many = api("alice").post(f"/api/services/{gid}/scale/", {"replicas": 40}, format="json")
    assert too_many.status_code == 422 and "replicas" in too_many.json()  # well-formed, beyond the quota

    stopped = api("alice").post(f"/api/services/{gid}/stop/", {}, format="json")
    assert stopped.status_code == 200 and stopped.json()["stopped_at"]
    assert not Job.objects.filter(group_id=gid).exclude(status__in=(JobStatus.CANCELLED,)).exists()


def test_crash_looping_replica_is_explained(api, users, serving):
    created = api("alice").post("/api/jobs/", job_payload(
        kind="service", task_type="inference", gpus_per_node=1, replicas=1, command="serve sim:crash=0.2"),
        format="json")
    gid = created.json()["group"]
    assert _sync_until(lambda: _service(api, gid)["members"][0]["restarts"] >= 2, rounds=150)
    member = _service(api, gid)["members"][0]
    assert member["status"] == "running" and "Crash loop" in member["problem"]
    page = _client("alice").get(f"/services/{gid}/").content.decode()
    assert "Crash loop" in page and "illegal memory access" in page  # the log lines are the evidence


def test_array_of_100_tasks_runs_ten_at_once(api, users, serving):
    created = api("alice").post("/api/jobs/", job_payload(
        kind="array", task_type="test", gpu_model="L40S", gpus_per_node=1, array="0-99", array_parallelism=10),
        format="json")
    assert created.status_code == 201, created.content
    gid = created.json()["group"]
    assert created.json()["kind"] == "array" and created.json()["array_index"] == 0
    array = api("alice").get(f"/api/arrays/{gid}/").json()
    assert array["size"] == 100 and [t["index"] for t in array["tasks"]] == list(range(100))
    assert array["counts"]["queued"] == 90  # ten hold GPUs (admitted, dispatching or running)
    waiting = Job.objects.filter(group_id=gid, status=JobStatus.QUEUED).first()
    shown = api("alice").get(f"/api/jobs/{waiting.pk}/").json()
    assert shown["wait_reason"]["code"] == "array_limit"
    assert "may run 10 tasks at once and runs 10" in shown["wait_reason"]["message"]

    listing = _client("alice").get("/jobs/").content.decode()
    assert listing.count('class="group-row"') == 1 and f"[{waiting.group_index}]" not in listing
    assert "Queued 90" in listing  # its members counted by state, as the array's own answer counts them
    bad = api("alice").post("/api/jobs/", job_payload(kind="array", array="5-1"), format="json")
    assert bad.status_code == 422 and "array" in bad.json()  # as every submission rule answers
    cancelled = api("alice").post(f"/api/arrays/{gid}/cancel/", {}, format="json")
    assert cancelled.status_code == 200 and cancelled.json()["counts"] == {"cancelled": 100}


def test_engine_counts_array_tasks_against_their_limit():
    nodes = (engine.NodeSnapshot(1, "n1", "A100", tuple(range(8))),)
    running = (engine.RunningJob(1, "t", "A100", (engine.Placement(1, (0,)),), group="#7 sweep"),)
    waiting = tuple(engine.WaitingJob(i, "t", "A100", 1, submitted_at=i, group="#7 sweep", group_limit=2)
                    for i in (2, 3, 4))
    result = engine.schedule(engine.Snapshot(now=100.0, nodes=nodes, running=running, waiting=waiting,
                                             quotas=(engine.QuotaSnapshot("t", "A100", 8, 8),)))
    assert [a.job_id for a in result.admissions] == [2]
    assert {w.job_id: w.reason for w in result.waiting if w.job_id in (3, 4)} == {
        3: engine.WaitReason.ARRAY_LIMIT, 4: engine.WaitReason.ARRAY_LIMIT}


def _sign_in(page, live_server, username):
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def test_browser_refuses_the_notebook_to_another_tenant(page, live_server, users, serving):
    """Opening it in a browser, on the workload origin, is test_workload_origin.py's (this page fixture allows
    one origin only)."""
    job = submission.submit_job(users["alice"], job_payload(kind="notebook", task_type="notebook", gpus_per_node=1))
    assert _sync_until(lambda: _running(job.pk))
    _sign_in(page, live_server, "bob")
    refused = page.goto(f"{live_server.url}/jobs/{job.pk}/open/")
    assert refused.status == 404 and "Jupyter" not in page.content()


def test_a_job_behind_a_service_has_no_made_up_start():
    """A service never ends: what waits for its GPUs gets no estimate, what waits for a batch job's does."""
    nodes = (engine.NodeSnapshot(1, "n1", "A100", tuple(range(8))),)
    whole = engine.RunningJob(1, "t", "A100", (engine.Placement(1, tuple(range(8))),), preemptible=False)
    service = engine.RunningJob(1, "t", "A100", (engine.Placement(1, tuple(range(7))),), preemptible=False)
    batch = engine.RunningJob(3, "t", "A100", (engine.Placement(1, (7,)),), max_runtime=3600)
    quotas = (engine.QuotaSnapshot("t", "A100", 16, 16),)
    for running, waits_for_batch in (((whole,), False), ((service, batch), True)):
        waiting = (engine.WaitingJob(2, "t", "A100", 1, submitted_at=1),)
        result = engine.schedule(engine.Snapshot(now=100.0, nodes=nodes, running=running, waiting=waiting,
                                                 quotas=quotas))
        estimate = result.waiting[0].estimated_start
        assert (estimate == 3600) if waits_for_batch else (estimate is None)


def test_browser_scales_a_service_and_cancels_an_array(page, live_server, users, serving):
    payload = job_payload(kind="service", task_type="inference", gpus_per_node=1, replicas=2, name="chat")
    del payload["max_runtime_minutes"]
    group = submission.submit_job(users["alice"], payload).group
    assert _sync_until(lambda: sum(1 for m in group.members.all() if m.status == JobStatus.RUNNING) == 2)
    _sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/services/{group.pk}/")
    page.wait_for_function("document.querySelector('#replicas-ready').innerText.startsWith('2 of 2')")
    page.fill("#id_replicas", "40")
    page.click("#service-actions button:has-text('Scale')")
    assert "tenant vision may hold at most" in page.locator("#service-errors").inner_text()
    assert page.input_value("#id_replicas") == "40"  # what was typed is kept
    page.fill("#id_replicas", "1")
    page.click("#service-actions button:has-text('Scale')")
    assert "Scaled to 1 replicas." in page.content()
    assert group.members.filter(status=JobStatus.CANCELLED).count() == 1

    array = submission.submit_job(users["alice"], job_payload(kind="array", task_type="test", gpu_model="L40S",
                                                              gpus_per_node=1, array="0-19", name="sweep")).group
    page.goto(f"{live_server.url}/jobs/")
    row = page.locator("tr.group-row", has_text="sweep")
    counts = row.locator("td.counts").inner_text()  # one row for the 20 tasks, with their counts by state
    assert row.count() == 1 and sum(int(n) for n in re.findall(r"\d+", counts)) == 20
    row.locator("a").click()
    assert page.locator("#tasks tbody tr").count() == 20
    page.click("#array-summary button")
    assert "Cancelled 20 tasks." in page.content()
    assert array.members.exclude(status=JobStatus.CANCELLED).count() == 0


def test_browser_submits_from_a_template_and_clones_the_job(page, live_server, users, serving):
    if not JobTemplate.objects.filter(builtin=True).exists():  # a transactional test emptied the tables
        import_module("scheduling.migrations.0010_builtin_templates").install(django_apps)
    _sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/jobs/new/")
    page.select_option("#id_template", label="PyTorch, one GPU (v1)")
    page.click(".start-from-template input[type=submit]")
    assert "Started from template" in page.locator(".template-origin").inner_text()
    assert page.is_hidden("#id_replicas") and page.is_hidden("#id_array")  # a batch job's fields only
    page.select_option("#id_project", "vision/detection")
    page.fill("#id_param_epochs", "3")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    job = Job.objects.latest("pk")
    assert job.template_version.template.name == "PyTorch, one GPU" and "--epochs 3" in job.command

    page.click("p.clone a")
    assert f"A copy of job #{job.pk}" in page.content()
    page.select_option("#id_kind", "array")
    assert page.is_visible("#id_array")  # the array's fields show once the kind asks for them
    page.fill("#id_array", "0-3")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    clone = Job.objects.latest("pk")
    assert clone.kind == "array" and clone.group.size == 4 and clone.command == job.command
