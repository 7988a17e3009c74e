"""Job logs from both executors: the simulated log follows the job's timeline and its failures are classified
by the Kubernetes diagnosis rules; Kubernetes pods' logs read through the fake API server; the log API (shape,
bounds, visibility, ``complete``) and the job page's Log box."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from scheduling.executors import read_job_log
from scheduling.executors.kubernetes.diagnosis import PodState, diagnose
from scheduling.executors.logs import LogTail, kube_timestamped, merge_streams, stored_tail
from scheduling.executors.simulated import log as simulated_log
from scheduling.jobs import actions as job_actions
from scheduling.jobs import submission
from scheduling.models import FailureCategory, Job, JobStatus
from scheduling.tasks import sync_job_status
from tests.conftest import job_payload, long_run
from tests.scheduling.executors.test_kubernetes import submit
from tests.scheduling.test_lifecycle import _run_past_max_runtime, _run_until_done

pytestmark = pytest.mark.django_db(transaction=True)


def sim_job(users, command: str, **overrides) -> Job:
    return submission.submit_job(users["alice"], job_payload(command=command, **overrides))


def stamp(moment) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}Z"


# --- the simulated executor ---------------------------------------------------------------------------------

def test_a_successful_simulated_run_logs_its_timeline(users, settings):
    job = _run_until_done(sim_job(users, "sim:outcome=succeeded sim:minutes=30 python train.py"), settings)
    log = read_job_log(job, 5000)
    lines = log.lines
    node = job.allocations.first().gpu.node.name
    assert log.attempt == 1 and not log.gone and not log.error
    assert lines[0] == f"{stamp(job.started_at)} gpuportal-sim: job {job.pk} attempt 1, pod sim-{job.pk}-a0-0 " \
                       f"on {node} (4 x A100)"
    assert "+ sim:outcome=succeeded sim:minutes=30 python train.py" in lines[2]
    progress = [line for line in lines if " step " in line and " loss " in line]
    assert len(progress) == 30  # one per simulated minute of the plan
    steps = [int(line.split(" step ")[1].split()[0]) for line in progress]
    assert steps == sorted(steps) and steps[0] > 0
    assert f"training finished: {steps[-1]} steps" in lines[-2] and lines[-1].endswith("model.pt")
    assert all(stamp(job.started_at) <= line[:20] <= stamp(job.finished_at) for line in lines)
    assert read_job_log(job, 3).lines == lines[-3:]  # the tail is the end of the same log


def test_a_running_simulated_job_logs_one_line_per_simulated_minute_so_far(users):
    job = Job.objects.get(pk=sim_job(users, long_run(999)).pk)
    job.started_at = job.admitted_at
    job.executor_state["dispatched_at"] = (job.admitted_at - timedelta(seconds=1)).isoformat()
    job.status = JobStatus.RUNNING  # a copy in memory: what the log would say at that moment
    run = simulated_log.run_of(job, job.started_at + timedelta(seconds=10.5 * 60 * 0.02))
    assert run.ending is None and run.stopped == job.started_at + timedelta(seconds=10.5 * 60 * 0.02)
    [lines] = simulated_log.pod_streams(run, 5000).values()
    assert sum(" loss " in text for _at, text in lines) == 10
    assert [at for at, _text in lines] == sorted(at for at, _text in lines)
    assert not any("Traceback" in text or "finished" in text for _at, text in lines)


SIMULATED_FAILURES = [  # outcome, node count, category, a line of the log that shows it
    ("out_of_memory", 1, FailureCategory.OUT_OF_MEMORY, "torch.OutOfMemoryError: CUDA out of memory."),
    ("exit_code", 1, FailureCategory.EXIT_CODE, ""),
    ("communication", 2, FailureCategory.COMMUNICATION, "Watchdog caught collective operation timeout"),
    ("node_fault", 1, FailureCategory.NODE_FAULT, "NVRM: Xid"),
    ("gpu_fault", 1, FailureCategory.GPU_FAULT, "NVRM: Xid"),
]


@pytest.mark.parametrize(("outcome", "nodes", "category", "evidence"), SIMULATED_FAILURES)
def test_simulated_failures_log_what_the_diagnosis_rules_recognise(users, settings, outcome, nodes, category,
                                                                     evidence):
    job = _run_until_done(sim_job(users, f"sim:outcome={outcome} sim:minutes=20", nodes=nodes), settings)
    assert (job.status, job.failure_category) == (JobStatus.FAILED, category)
    lines = read_job_log(job, 5000).lines
    assert evidence in "\n".join(lines)
    assert all(stamp(job.started_at) <= line[:20] <= stamp(job.finished_at) for line in lines if line[:2] == "20")
    diagnosis = job.executor_state["diagnosis"]
    assert diagnosis["category"] == category and diagnosis["advice"] and diagnosis["message"] == job.failure_message
    # the same rules, given the log and the failed pod as Kubernetes would report it, say the same
    pods = [PodState(f"p{i}", phase="Failed", index=i, exit_code=job.exit_code,
                     reason="NodeLost" if category == FailureCategory.NODE_FAULT else "") for i in range(nodes)]
    pod_logs = {f"p{i}": "\n".join(line.removeprefix(f"[pod {i}] ") for line in lines
                                   if nodes == 1 or line.startswith(f"[pod {i}] ")) for i in range(nodes)}
    assert diagnose(pods, node_count=nodes, logs=pod_logs).category == category
    kept = diagnosis["evidence"].get("log_tail")
    if kept:  # the evidence is the end of the log the page shows
        assert [line if nodes == 1 else f"[pod 0] {line}" for line in kept][-3:] == [
            line for line in lines if nodes == 1 or line.startswith("[pod 0] ")][-3:]


@pytest.mark.parametrize(("code", "last_lines"), [
    (1, [error[-1] for error in simulated_log.PROGRAM_ERRORS]),
    (2, ["train.py: error: unrecognized arguments"]), (127, ["sacrebleu: command not found"]),
    (139, ["Segmentation fault (core dumped)"])])
def test_each_program_exit_code_prints_its_own_error(users, code, last_lines):
    job = Job.objects.get(pk=sim_job(users, "sim:outcome=exit_code").pk)
    job.started_at, job.status = datetime.fromisoformat(job.executor_state["dispatched_at"]), JobStatus.RUNNING
    job.executor_state["plan"]["exit_code"] = code
    run = simulated_log.run_of(job, job.started_at + timedelta(seconds=3), ending=FailureCategory.EXIT_CODE)
    [lines] = simulated_log.pod_streams(run, 50).values()
    assert any(last in lines[-1][1] for last in last_lines) and run.exit_code == code
    failed = diagnose([PodState("p", phase="Failed", exit_code=code)], logs={"p": "\n".join(t for _a, t in lines)})
    assert failed.category == FailureCategory.EXIT_CODE
    assert failed.evidence["signature"] and failed.evidence["log_line"] in [t for _a, t in lines]  # its log names it


def test_image_that_cannot_be_pulled_and_timeout(users, settings):
    image = _run_until_done(sim_job(users, "sim:outcome=image"), settings)
    assert image.failure_category == FailureCategory.IMAGE and "ErrImagePull" in image.failure_message
    assert read_job_log(image, 200).lines == () and not read_job_log(image, 200).gone  # it never started
    late = _run_past_max_runtime(sim_job(users, long_run(1e9), max_runtime_minutes=60), settings)
    assert late.failure_category == FailureCategory.TIMEOUT and "max runtime of 60 minutes" in late.failure_message
    assert read_job_log(late, 1).lines[0].endswith("; exiting") and "received SIGTERM at step" in read_job_log(
        late, 1).lines[0]
    assert late.executor_state["diagnosis"]["evidence"]["condition"]["reason"] == "DeadlineExceeded"


def test_a_fault_the_node_agent_reported_ends_the_simulated_log(users, settings):
    job = sim_job(users, long_run(999))
    settings.SIMULATION_TIME_SCALE = 1e-6
    sync_job_status()
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.RUNNING
    node = job.allocations.first().gpu.node.name
    # retries used up (a GPU fault is retried otherwise): the failure is final
    Job.objects.filter(pk=job.pk).update(retry_count=2, executor_state={**job.executor_state, "fault": {
        "category": "gpu_fault", "node": node, "gpu_id": None, "message": "XID 79: GPU has fallen off the bus",
        "at": timezone.now().isoformat()}})
    sync_job_status()
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.failure_category) == (JobStatus.FAILED, FailureCategory.GPU_FAULT)
    assert "XID 79" in job.failure_message and job.executor_state["diagnosis"]["evidence"]["agent"]["node"] == node
    lines = read_job_log(job, 200).lines
    assert lines[-1] == "RuntimeError: CUDA error: unspecified launch failure"
    assert not any("Xid" in line for line in lines)  # the program only sees its GPU fail; the agent saw the Xid


# --- the Kubernetes executor --------------------------------------------------------------------------------

def test_kubernetes_pods_logs_are_read_merged_and_then_kept(kube, users, client):
    job = submit(users, nodes=2, task_type="evaluation")
    Job.objects.filter(pk=job.pk).update(retry_count=2)  # retries used up: a failure is final
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.RUNNING
    namespace, name = kube.objects_of(job)
    first, second = (pod["metadata"]["name"] for pod in kube.fake.pods(namespace, name))
    kube.fake.set_log(namespace, first, "rank 0 up\nstep 1 loss 2.1\nstep 2 loss 1.9")
    kube.fake.set_log(namespace, second, "rank 8 up")
    log = read_job_log(Job.objects.select_related("cluster").get(pk=job.pk), 200)
    assert log.lines == ("[pod 0] rank 0 up", "[pod 0] step 1 loss 2.1", "[pod 0] step 2 loss 1.9",
                         "[pod 1] rank 8 up") and log.attempt == 1  # the attempt its pods belong to
    assert read_job_log(job, 1).lines == ("[pod 1] rank 8 up",)
    kube.fake.exit(namespace, name, code=1, index=1, log="rank 8 up\nNCCL WARN NET/IB : Got completion with "
                                                         "error 12", others=1)
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.FAILED and kube.fake.pods(namespace, name) == []  # deleted with the attempt
    log = read_job_log(job, 200)  # what the diagnosis kept
    assert "NCCL WARN NET/IB : Got completion with error 12" in log.lines and not log.gone


def test_kubernetes_log_of_a_cancelled_job_is_gone_and_an_unreachable_cluster_is_said(kube, users, client):
    job = submit(users)
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    kube.fake.fail_next(2, code=503, method="GET", path="/pods")
    log = read_job_log(job, 200)
    assert log.error.startswith("503") and log.lines == ()
    client.login(username="alice", password="demo")
    assert client.get(f"/api/jobs/{job.pk}/log/").status_code == 200  # the injected failures are used up
    kube.fake.fail_next(2, code=503, method="GET", path="/pods")
    answer = client.get(f"/api/jobs/{job.pk}/log/")
    assert answer.status_code == 503 and "503" in answer.json()["detail"]
    job_actions.cancel_job(users["alice"], job, "no longer needed")
    log = read_job_log(Job.objects.get(pk=job.pk), 200)
    assert log.gone and log.lines == ()
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "The log is no longer available" in page


def test_kubernetes_timestamps_order_a_gang_log():
    pod0 = kube_timestamped("2024-05-01T10:00:00.5Z start\n2024-05-01T10:00:02.25Z step 1\ncontinued")
    pod1 = kube_timestamped("2024-05-01T10:00:00.123456789Z hello\n2024-05-01T10:00:01Z ready")
    assert pod0[2] == (pod0[1][0], "continued")
    assert merge_streams({0: pod0, 1: pod1}, 10) == (
        "[pod 1] hello", "[pod 0] start", "[pod 1] ready", "[pod 0] step 1", "[pod 0] continued")
    assert merge_streams({0: pod0}, 2) == ("step 1", "continued")


def test_an_xid_in_the_log_is_a_gpu_fault():
    found = diagnose([PodState("p", node="n1", phase="Failed", exit_code=1)],
                     logs={"p": "step 9\nNVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."})
    assert (found.category, found.node) == ("gpu_fault", "n1") and "Xid" in found.evidence["log_line"]


# --- the API and the page -----------------------------------------------------------------------------------

def test_log_api_shape_bounds_visibility_and_complete(users, api, settings):
    job = sim_job(users, long_run(999))
    alice = api("alice")
    answer = alice.get(f"/api/jobs/{job.pk}/log/")
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"job", "attempt", "lines", "complete"}
    assert (body["job"], body["attempt"], body["complete"]) == (job.pk, 1, False)
    for bad in ("0", "5001", "abc", "2.5"):
        refused = alice.get(f"/api/jobs/{job.pk}/log/?tail={bad}")
        assert refused.status_code == 400 and "tail" in refused.json(), bad
    assert "at most 5000" in alice.get(f"/api/jobs/{job.pk}/log/?tail=5001").json()["tail"][0]
    assert api("bob").get(f"/api/jobs/{job.pk}/log/").status_code == 404
    assert api("bob").get(f"/api/jobs/{job.pk}/log/?tail=0").status_code == 404
    assert api("dave").get(f"/api/jobs/{job.pk}/log/").status_code == 200  # a manager sees every tenant
    assert alice.get("/api/jobs/999999/log/").status_code == 404
    done = _run_until_done(sim_job(users, "sim:outcome=out_of_memory sim:minutes=20"), settings)
    body = alice.get(f"/api/jobs/{done.pk}/log/?tail=4").json()
    assert body["complete"] is True and len(body["lines"]) == 4
    assert "CUDA out of memory" in body["lines"][-1]


def test_job_page_shows_the_log_tail_and_its_refresh(users, client, settings):
    client.login(username="alice", password="demo")
    waiting = sim_job(users, long_run(999))  # dispatched, its image not pulled yet
    assert waiting.status == JobStatus.DISPATCHING
    assert "No log yet" in client.get(f"/jobs/{waiting.pk}/").content.decode()
    job = _run_until_done(sim_job(users, "sim:outcome=exit_code sim:minutes=5"), settings)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    last = read_job_log(job, 200).lines[-1]
    assert 'id="job-log"' in page and f'data-log-url="/api/jobs/{job.pk}/log/"' in page
    assert 'data-complete="true"' in page and "js/job_log.js" in page
    assert last.replace("'", "&#x27;") in page and "What to do next" in page


@pytest.mark.browser
def test_the_log_box_refreshes_while_the_job_runs(page, live_server, users, settings):
    job = sim_job(users, long_run(999))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "demo")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    assert page.locator("#log-lines").is_hidden() and "No log yet" in page.locator("#log-status").inner_text()
    settings.SIMULATION_TIME_SCALE = 1e-3  # its image is pulled at once; a simulated minute lasts 60 ms
    sync_job_status()
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    page.wait_for_selector("#log-lines:not([hidden])", timeout=15000)  # the script's next look, no reload
    assert f"gpuportal-sim: job {job.pk} attempt 1" in page.locator("#log-lines").inner_text()
    assert "refreshed while the job runs" in page.locator("#log-status").inner_text()


def test_a_job_waiting_for_its_retry_shows_what_was_kept_of_the_failed_attempt():
    waiting = Job(pk=1, status=JobStatus.QUEUED, retry_count=1, executor_state={"attempts": [
        {"attempt": 0, "category": "communication", "evidence": {"log_tail": ["step 9", "NCCL WARN timeout"]}}]})
    assert stored_tail(waiting, 1) == LogTail(1, ("NCCL WARN timeout",))
    assert stored_tail(Job(pk=2, status=JobStatus.QUEUED, retry_count=0), 200) == LogTail(1)
