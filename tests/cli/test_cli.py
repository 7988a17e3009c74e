"""The ``gpuportal`` client end to end against the live test server: every command a researcher uses, the
JSON for scripts, and the exit codes and messages of what goes wrong."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from accounts.models import ApiToken
from governance.models import PriorityRequest
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus, TaskType
from tests.conftest import job_payload, long_run
from tests.scheduling.test_lifecycle import _run_until_done

pytestmark = pytest.mark.django_db(transaction=True)

SUBMIT = ("--project", "vision/detection", "--task-type", "research", "--gpu-model", "A100",
          "--image", "registry.local/pytorch:2.4")


def fill_vision_a100(users):
    """Vision holds its whole A100 limit (16 GPUs): its next A100 job waits for quota."""
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(9999)))


def waiting_job(cli, users, name="waits") -> str:
    fill_vision_a100(users)
    result = cli("submit", *SUBMIT, "--gpus-per-node", "8", "--name", name, "--json")
    assert result.code == 0, result.err
    assert result.json["wait_reason"]["code"] == "quota_exhausted"
    return str(result.json["id"])


def test_login_keeps_the_token_private_and_only_for_its_portal(cli):
    result = cli("login", "--url", cli.url + "/api/", "-u", "alice", "--password-stdin", "--json", stdin="demo\n")
    assert result.code == 0, result.err
    answer = result.json
    assert "token" not in answer and answer["username"] == "alice" and answer["url"] == cli.url
    path = Path(answer["config"])
    assert path == cli.config_home / "alice" / "gpuportal" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    saved = json.loads(path.read_text())
    assert saved["url"] == cli.url and saved["token"].startswith("gpt_")
    assert ApiToken.objects.get(pk=saved["token_id"]).user.username == "alice"
    assert cli("jobs").out.strip() == "No jobs match."

    other_address = cli.url.replace("localhost", "127.0.0.1")
    assert other_address != cli.url
    elsewhere = cli("jobs", "--url", other_address)  # the same server, but the token was issued for cli.url
    assert elsewhere.code == 3 and "Not logged in" in elsewhere.err

    wrong = cli("login", "--url", cli.url, "-u", "bob", "--password-stdin", user="bob", stdin="nope\n")
    assert wrong.code == 3 and "Unable to log in with these credentials" in wrong.err
    assert not (cli.config_home / "bob" / "gpuportal" / "config.json").exists()
    nobody = cli("quota", "--url", cli.url, user="erin")
    assert nobody.code == 3 and f"gpuportal login --url {cli.url}" in nobody.err

    logged_out = cli("logout")
    assert logged_out.code == 0 and "revoked" in logged_out.out
    assert ApiToken.objects.get(pk=saved["token_id"]).revoked_at is not None
    assert "token" not in json.loads(path.read_text())
    assert cli("jobs").code == 3


def test_submit_by_flags_and_by_job_file_then_list_show_and_why(cli, tmp_path):
    cli.login("alice")
    first = cli("submit", *SUBMIT, "--gpus-per-node", "8", "--command", long_run(9999), "--name", "first",
                "--json")
    assert first.code == 0, first.err
    assert first.json["name"] == "first" and first.json["gpus_per_node"] == 8 and first.json["status"] in (
        "admitted", "dispatching", "running")
    assert cli("submit", *SUBMIT, "--gpus-per-node", "8", "--command", long_run(9999)).code == 0
    job_file = tmp_path / "job.yaml"
    job_file.write_text("project: vision/detection\ntask-type: research\ngpu_model: A100\ngpus_per_node: 4\n"
                        "image: registry.local/pytorch:2.4\nname: from-file\nmax_runtime_minutes: 90\n")
    waiting = cli("submit", "-f", job_file, "--gpus-per-node", "8")  # the flag overrides the file
    assert waiting.code == 0, waiting.err
    [job_id] = re.findall(r"Submitted job (\d+) \(from-file\): queued\.", waiting.out)
    assert "[quota_exhausted]" in waiting.out and "Queue position: 1 in the cluster, 1 in tenant vision." in waiting.out
    stored = Job.objects.get(pk=job_id)
    assert (stored.gpus_per_node, stored.max_runtime_minutes, stored.owner.username) == (8, 90, "alice")

    listed = cli("jobs", "--status", "queued", "--json").json
    assert listed["count"] == 1 and [job["id"] for job in listed["results"]] == [int(job_id)]
    header, row = cli("jobs", "--status", "queued").out.splitlines()
    assert header.split()[:2] == ["ID", "NAME"] and row.split()[:2] == [job_id, "from-file"]
    assert "quota_exhausted" in row
    assert cli("jobs", "--mine", "--gpu-model", "A100", "--json").json["count"] == 3

    why = cli("why", job_id).out
    assert f"Job {job_id} (from-file, 1 x 8 A100, tenant vision) is queued." in why
    assert "Tenant vision uses 16 of its 16 A100 GPUs" in why and "Estimated start: about" in why
    assert "Likely start: between " in why  # the calibrated range
    shown = cli("show", job_id).out
    assert "Timeline:" in shown and "Submitted by alice" in shown and "registry.local/pytorch:2.4" in shown
    detail = cli("--json", "show", job_id).json  # --json before the command works too
    assert detail["id"] == int(job_id) and detail["wait_reason"]["code"] == "quota_exhausted" and detail["events"]

    batch_file = tmp_path / "batch.yaml"  # a batch is all or nothing: the second job's size is refused
    batch_file.write_text("".join(f"- project: vision/detection\n  task-type: research\n  gpu_model: A100\n"
                                  f"  gpus_per_node: {size}\n  image: registry.local/pytorch:2.4\n" for size in (1, 0)))
    refused = cli("submit", "--batch", batch_file)
    assert refused.code != 0 and "jobs.1.gpus_per_node" in refused.err and Job.objects.count() == 3
    batch_file.write_text(batch_file.read_text().replace("gpus_per_node: 0", "gpus_per_node: 2"))
    mixed = cli("submit", "--batch", batch_file, "--project", "vision/segmentation", "--gpus-per-node", "1")
    assert mixed.code != 0 and "leave out --project, --gpus-per-node" in mixed.err and Job.objects.count() == 3
    batch = cli("submit", "--batch", batch_file)
    assert batch.code == 0 and batch.out.startswith("Submitted 2 jobs in one batch: ") and Job.objects.count() == 5


def test_why_shows_a_failure_with_its_evidence(cli, settings):
    cli.login("alice")
    submitted = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--command", "sim:outcome=out_of_memory sim:minutes=20",
                    "--json")
    _run_until_done(Job.objects.get(pk=submitted.json["id"]), settings)
    job = cli("why", submitted.json["id"], "--json").json
    assert job["status"] == "failed" and job["failure"]["category"] == "out_of_memory"
    why = cli("why", submitted.json["id"])
    assert why.code == 0 and f"Job {job['id']} ({job['name']}, 1 x 1 A100, tenant vision) is failed." in why.out
    assert f"Why it failed: {job['failure']['message']} [out_of_memory]" in why.out
    if job["exit_code"] is not None:
        assert f"Exit code: {job['exit_code']}" in why.out
    for key in job["failure"]["evidence"]:  # every piece of evidence the portal gives is shown
        assert f"  {key}:" in why.out


def test_hold_release_and_cancel(cli, users):
    cli.login("alice")
    job_id = waiting_job(cli, users)
    held = cli("hold", job_id, "--json").json
    assert held["held_by"] == "user"
    assert "[held]" in cli("why", job_id).out
    released = cli("release", job_id)
    assert released.code == 0 and "[quota_exhausted]" in released.out
    assert Job.objects.get(pk=job_id).held_by == ""
    cancelled = cli("cancel", job_id, "--reason", "wrong dataset")
    assert cancelled.code == 0 and "is cancelled." in cancelled.out and "wrong dataset" in cancelled.out
    assert Job.objects.get(pk=job_id).status == JobStatus.CANCELLED
    again = cli("cancel", job_id)
    assert again.code == 1 and "HTTP 422" in again.err
    missing = cli("why", "999999")
    assert missing.code == 4 and "Job 999999 was not found" in missing.err
    assert cli("hold", "999999").code == 4

    retry = ("submit", *SUBMIT, "--gpus-per-node", "1", "--idempotency-key", "nightly-42", "--json")
    assert cli(*retry).json["id"] == cli(*retry).json["id"]  # a retried submission is not a second job
    assert Job.objects.filter(gpus_per_node=1).count() == 1


def test_quota_queue_and_reports(cli, users):
    cli.login("alice")
    job_id = waiting_job(cli, users)
    rows = {(q["tenant"], q["gpu_model"]): q for q in cli("quota", "--json").json["results"]}
    assert rows[("vision", "A100")] | {} == {"tenant": "vision", "gpu_model": "A100", "guaranteed": 16, "limit": 16,
                                             "burst": 0, "used": 16, "queued": 8}
    assert ("nlp", "A100") not in rows
    quota_table = cli("quota").out.splitlines()
    assert quota_table[0].split()[:2] == ["TENANT", "GPU"] and any(
        line.split()[:4] == ["vision", "A100", "16", "8"] for line in quota_table)
    queue = cli("queue", "--json").json["results"]
    assert [(row["job"], row["wait_reason"]) for row in queue] == [(int(job_id), "quota_exhausted")]
    queue_table = cli("queue").out.splitlines()  # the place among the jobs waiting for the same model
    assert queue_table[0].split()[:3] == ["GPU", "MODEL", "POS"]
    assert any(line.split()[:3] == [queue[0]["gpu_model"], "1", job_id] for line in queue_table[1:])

    month = f"{timezone.now():%Y-%m}"
    tenant_report = cli("report", "--month", month, "--tenant", "vision")
    assert tenant_report.code == 0 and f"Report for {month}, tenant vision" in tenant_report.out
    platform = cli("report", "--month", month)
    assert platform.code == 1 and "managers and platform admins" in platform.err
    assert cli("report", "--month", month, "--tenant", "nlp").code == 4
    bad_month = cli("report", "--month", "2026-13", "--tenant", "vision")
    assert bad_month.code == 1 and "month: month must look like 2026-10" in bad_month.err
    cli.login("dave")
    manager = cli("report", "--month", month, "--json", user="dave").json
    assert manager["scope"] == "platform" and manager["month"] == month and "by_tenant" in manager


def test_requests_ask_approve_and_deny(cli, users):
    cli.login("alice")
    cli.login("carol")
    job_id = waiting_job(cli, users)
    asked = cli("requests", "ask", "--kind", "priority", "--job", job_id, "--task-type", "training",
                "--justification", "Paper deadline on Friday.")
    assert asked.code == 0, asked.err
    [request_id] = re.findall(r"Request (\d+) \(priority, tenant vision\) by alice is pending\.", asked.out)
    pending = cli("requests", "list", "--state", "pending", "--json", user="carol").json["results"]
    assert [r["id"] for r in pending] == [int(request_id)]
    assert request_id in cli("requests", user="carol").out
    approved = cli("requests", "approve", request_id, "--comment", "Go ahead.", user="carol")
    assert approved.code == 0 and "is approved." in approved.out and "Decided by carol" in approved.out
    seen = cli("requests", "show", request_id, "--json").json
    assert (seen["state"], seen["decided_by"], seen["comment"]) == ("approved", "carol", "Go ahead.")
    assert cli("why", job_id, "--json").json["task_type"] == "training"

    second = cli("requests", "ask", "--kind", "runtime_extension", "--job", job_id, "--max-runtime-minutes", "2880",
                 "--justification", "Two days, not one.", "--json").json
    own = cli("requests", "approve", second["id"])
    assert own.code == 1 and "own request" in own.err
    denied = cli("requests", "deny", second["id"], "--comment", "Split the run.", "--json", user="carol").json
    assert denied["state"] == "denied" and PriorityRequest.objects.get(pk=second["id"]).state == "denied"
    bad = cli("requests", "ask", "--kind", "burst", "--justification", "More.", "--gpus", "0")
    assert bad.code == 1 and "HTTP 400" in bad.err


def test_a_request_shared_by_an_array_says_how_many_jobs_it_decides(cli, users, api):
    TaskType.objects.filter(code="inference").update(requires_approval=True)
    sweep = api("alice").post("/api/jobs/batch/", {"jobs": [job_payload(
        task_type="inference", gpus_per_node=1, kind="array", array="0-4")]}, format="json").json()["jobs"][0]
    [request] = PriorityRequest.objects.filter(job_id=min(sweep["ids"]))
    cli.login("carol")
    listed = cli("requests", "list", "--state", "pending", user="carol")
    assert listed.code == 0 and f"{min(sweep['ids'])} (+4)" in listed.out, listed.out
    shown = cli("requests", "show", str(request.pk), user="carol")
    assert f"job={min(sweep['ids'])}" in shown.out and "jobs=5" in shown.out, shown.out


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_errors_name_the_cause_and_exit_with_their_code(cli, monkeypatch):
    cli.login("alice")
    refused = cli("submit", *SUBMIT, "--gpus-per-node", "16")
    assert refused.code == 1
    assert "gpus_per_node: 16 GPUs per node is more than any A100 node has (at most 8)." in refused.err
    as_json = cli("submit", *SUBMIT, "--gpus-per-node", "16", "--json")
    error = as_json.json["error"]
    assert (as_json.code, error["exit_code"], error["status"]) == (1, 1, 422) and "gpus_per_node" in error["detail"]
    assert not Job.objects.exists()

    login = ("login", "-u", "alice", "--password-stdin")
    unreachable = cli(*login, "--url", f"http://127.0.0.1:{_closed_port()}", user="nobody", stdin="demo\n")
    assert unreachable.code == 5 and "Cannot reach the portal at http://127.0.0.1:" in unreachable.err
    not_api = cli(*login, "--url", cli.url + "/nothing-here", user="nobody", stdin="demo\n")
    assert not_api.code == 5 and "did not answer like a GPU Portal API" in not_api.err
    monkeypatch.setenv("GPUPORTAL_URL", f"http://127.0.0.1:{_closed_port()}")  # the variable beats the saved URL
    monkeypatch.setenv("GPUPORTAL_TOKEN", "gpt_anything")
    assert cli("jobs", "--json").json["error"]["exit_code"] == 5
    monkeypatch.delenv("GPUPORTAL_URL")
    monkeypatch.delenv("GPUPORTAL_TOKEN")
    assert cli("jobs", "--url", "ftp://example.org").code == 2
    assert cli("jobs", user="nobody").code == 2 and "No portal URL" in cli("jobs", user="nobody").err

    monkeypatch.setenv("GPUPORTAL_TOKEN", "gpt_made-up")
    bad_token = cli("jobs")
    assert bad_token.code == 3 and "GPUPORTAL_TOKEN was refused" in bad_token.err
    monkeypatch.delenv("GPUPORTAL_TOKEN")
    ApiToken.objects.filter(user__username="alice").update(expires_at=timezone.now() - timedelta(minutes=1))
    expired = cli("jobs")
    assert expired.code == 3 and "log in again with `gpuportal login`" in expired.err

    assert cli("submit", "--gpus-per-node", "eight").code == 2  # argparse's usage error
    assert cli("jobs", "--limit", "0").code == 2
    job_file = cli.config_home / "list.yaml"
    job_file.write_text("- not\n- a mapping\n")
    not_mapping = cli("submit", "-f", job_file)
    assert not_mapping.code == 2 and "must be a mapping" in not_mapping.err


def test_the_installed_console_script(cli):
    """The ``gpuportal`` entry point of ``pip install ./cli`` (``make venv`` installs it into .venv)."""
    script = Path(sys.executable).parent / "gpuportal"
    assert script.exists(), "gpuportal is not installed: run `make venv` (requirements.txt installs ./cli)"
    cli.login("alice")
    env = {**os.environ, "XDG_CONFIG_HOME": str(cli.config_home / "alice")}
    env.pop("GPUPORTAL_TOKEN", None)
    listed = subprocess.run([script, "jobs", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"count": 0, "results": []}
    missing = subprocess.run([script, "why", "424242"], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 4 and "Job 424242 was not found" in missing.stderr


def test_logs_tail_and_follow_until_the_job_ends(cli):
    """Needs ``GET /api/jobs/{id}/log/?tail=N`` (``{"job", "attempt", "lines", "complete"}``)."""
    cli.login("alice")
    job_id = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--command", long_run(9999), "--json").json["id"]
    tail = cli("logs", job_id, "--tail", "5", "--json")
    assert tail.code == 0, tail.err
    assert tail.json["job"] == job_id and isinstance(tail.json["lines"], list) and len(tail.json["lines"]) <= 5
    assert tail.json["complete"] is False
    assert cli("cancel", job_id).code == 0
    followed = cli("logs", job_id, "--follow", "--interval", "0.1", "--json")
    assert followed.code == 0, followed.err
    assert json.loads(followed.out.splitlines()[-1])["complete"] is True
    assert cli("logs", "999999").code == 4
