"""Invariants of the embedded demo, checked on a live run.

The demo is seeded (its structure, a few days of history, its live jobs and governance), a handful of jobs is
added for what the seed's live jobs lack (each failure category, a retried infrastructure failure, a
preemption), and the simulated cluster runs with accelerated time until they are over. Then every job is read
the ways people read it — the API's list, detail and log, and the job page — and each must tell one story:

* placement: a GPU is held by one job at a time (now and in the past); a job shows only the GPUs it holds now,
  the same in the API and on its page; earlier attempts are listed apart, under "Attempts and retries";
* durations: every duration a message states is the one the stored start and finish say;
* timelines: consecutive status changes follow the lifecycle table, the stored times are those of their
  events, the executor's order holds (an image fails before containers start, a program fails only once
  started), no run outlives its max runtime, and the log lies within its run;
* failures: each failed job has a category, evidence (a log tail, a pod or node event, an agent reading) and a
  next step; each infrastructure failure is retried while retries are left, and its attempts are shown;
* waiting: each waiting job has a reason code, a sentence with its numbers and an estimated start.

With test_report_browser.py, the only tests that read the demo's seed: they test the demo itself.
"""

from __future__ import annotations

import html
import re
import time
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from demo.governance import seed_governance
from demo.world import seed_history, seed_live_jobs, seed_structure
from scheduling.jobs import submission
from scheduling.lifecycle import ALLOWED_TRANSITIONS
from scheduling.models import (
    ACTIVE_STATUSES,
    INFRASTRUCTURE_FAILURES,
    TERMINAL_STATUSES,
    WAITING_STATUSES,
    FailureCategory,
    Job,
    JobAllocation,
    JobEvent,
    JobStatus,
)
from scheduling.tasks import sync_job_status

pytestmark = pytest.mark.django_db(transaction=True)

S = JobStatus
#: What the seed's live jobs lack, submitted after them: (user, project, task type, model, GPUs per node, nodes,
#: command). Each failure category the simulated cluster produces, and a production run that preempts research.
EXTRA_JOBS = [
    ("frank", "nlp/chat-eval", "evaluation", "A100", 2, 1, "sim:outcome=out_of_memory sim:minutes=20"),
    ("frank", "nlp/chat-eval", "evaluation", "A100", 1, 1, "sim:outcome=exit_code sim:minutes=15"),
    ("bob", "nlp/chat-eval", "evaluation", "A100", 1, 1, "sim:outcome=image"),
    ("bob", "nlp/llm-pretrain", "research", "A100", 1, 1, "sim:outcome=node_fault sim:minutes=10"),
    ("erin", "speech/asr", "research", "A100", 1, 1, "sim:outcome=gpu_fault sim:minutes=10"),
    ("erin", "speech/asr", "research", "A100", 1, 2, "sim:outcome=communication sim:minutes=45"),
    ("carol", "vision/segmentation", "training", "H100", 8, 1, "sim:outcome=succeeded sim:minutes=30"),
]
#: Real seconds per simulated second while the cluster runs: a simulated minute lasts 2.4 ms, so the extra jobs'
#: attempts end in a blink while the seed's long runs (5000 simulated minutes) hold their GPUs for 12 s.
TIME_SCALE = 4e-5
#: How long the sync may notice an end after it happened (a run may outlive its max runtime by this).
SYNC_LAG = timedelta(seconds=30)
#: Evidence keys that show what happened: the log's tail or line, a pod's or node's event, the Job's condition,
#: the node agent's reading, the cluster's refusal.
EVIDENCE_KEYS = ("log_tail", "log_line", "pod", "reason", "condition", "agent", "error")
#: Categories in which the program ran before it failed (so its failure comes from ``running``).
RUN_FAILURES = (FailureCategory.EXIT_CODE, FailureCategory.OUT_OF_MEMORY, FailureCategory.TIMEOUT,
                FailureCategory.COMMUNICATION)
#: A duration in a message: "12.0 minutes", "46 s", "2 h 5 min", "1800047 milliseconds".
DURATION = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?) ?(milliseconds|ms|seconds?|s|minutes?|min|hours?|h|days?|d)\b")
UNIT_SECONDS = {"milliseconds": 0.001, "ms": 0.001, "second": 1, "seconds": 1, "s": 1, "minute": 60,
                "minutes": 60, "min": 60, "hour": 3600, "hours": 3600, "h": 3600, "day": 86400, "days": 86400,
                "d": 86400}
MAX_RUNTIME = re.compile(r"max runtime of (\d+) minutes")
LOG_STAMP = re.compile(r"^(?:\[pod \d+\] )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z ")


@pytest.fixture
def extra_jobs(transactional_db, settings):
    """The demo seeded as ``seed_demo`` does (a few days of history: they hold every outcome; no metering), then
    the extra jobs, submitted after it: returned."""
    settings.SIMULATION_TIME_SCALE = TIME_SCALE
    world = seed_structure()
    seed_history(world["users"], timezone.now() - timedelta(days=4))
    seed_live_jobs(world["users"])
    seed_governance(world["users"])
    return [submission.submit_job(world["users"][user], {
        "project": project, "task_type": task, "gpu_model": model, "gpus_per_node": gpus, "nodes": nodes,
        "image": "registry.local/pytorch:2.4-cuda12", "command": command})
        for user, project, task, model, gpus, nodes, command in EXTRA_JOBS]


def test_every_job_tells_one_story_in_the_api_the_log_and_the_page(extra_jobs):
    admin = get_user_model().objects.get(username="admin")
    api, page = APIClient(), Client()
    api.force_authenticate(admin)
    page.force_login(admin)
    _run_for(seconds=0.3)  # the extra jobs' first attempts, while the seed's long runs go on and others wait
    busy = _walk(api, page)
    _run_for(seconds=45, until_over=extra_jobs)  # the long runs end, the waiting jobs start, retries find room
    over = _walk(api, page)
    _the_run_went_through_everything(busy["statuses"] | over["statuses"])
    problems = [f"while busy: {problem}" for problem in busy["problems"]] + over["problems"]
    assert not problems, f"{len(problems)} broken invariants:\n" + "\n".join(problems[:60])


# --- the scenario -------------------------------------------------------------------------------------------

def _run_for(seconds: float, until_over: list[Job] = ()) -> None:
    """Let simulated time pass, syncing the cluster, for ``seconds`` or until the jobs ``until_over`` ended."""
    deadline = time.monotonic() + seconds
    ids = [job.pk for job in until_over]
    while time.monotonic() < deadline:
        time.sleep(0.02)
        sync_job_status()
        if ids and not Job.objects.filter(pk__in=ids).exclude(status__in=TERMINAL_STATUSES).exists():
            return
    assert not ids, f"the extra jobs did not end within {seconds} s: " + ", ".join(
        f"#{job.pk} {job.status} ({job.wait_reason_message})" for job in Job.objects.filter(pk__in=ids)
        .exclude(status__in=TERMINAL_STATUSES))


def _walk(api, page) -> dict:
    """Read every job through the API's list, detail and log and its page: the statuses seen and the broken
    invariants found."""
    listed = _list_all(api)
    jobs = {job.pk: job for job in Job.objects.select_related("task_type")}
    assert sorted(listed) == sorted(jobs), "the job list shows every job once"
    problems: list[str] = []
    held: dict[tuple[str, int], int] = {}
    for job_id, job in sorted(jobs.items()):
        detail = api.get(f"/api/jobs/{job_id}/").json()
        text = page.get(f"/jobs/{job_id}/").content.decode()  # before the log: a running job's log grows
        log = api.get(f"/api/jobs/{job_id}/log/").json()
        found = [*_placement(job, listed[job_id], detail, text, held), *_timeline(job, detail, text),
                 *_durations(job, detail), *_failure(job, detail, text), *_attempts(job, detail, text),
                 *_waiting(job, detail, text), *_log(job, log, text)]
        problems += [f"job #{job_id} ({job.status}): {problem}" for problem in found]
    return {"statuses": {job.status for job in jobs.values()}, "problems": problems + _gpu_history()}


def _list_all(api) -> dict[int, dict]:
    rows, url = {}, "/api/jobs/?page_size=500"
    while url:
        body = api.get(url).json()
        for row in body["results"]:
            assert row["id"] not in rows, f"job #{row['id']} listed twice"
            rows[row["id"]] = row
        url = body["next"]
    return rows


def _the_run_went_through_everything(statuses: set[str]) -> None:
    """The scenario did what the invariants are about: jobs running and waiting, preemptions, retries, and
    failures of every category the simulated cluster produces."""
    assert {S.RUNNING, S.QUEUED, S.SUCCEEDED, S.FAILED, S.CANCELLED} <= statuses, statuses
    jobs = list(Job.objects.all())
    categories = {job.failure_category for job in jobs if job.status == S.FAILED}
    for job in jobs:
        categories.update(a.get("category") for a in (job.executor_state or {}).get("attempts", []))
    assert {*RUN_FAILURES, FailureCategory.IMAGE, *INFRASTRUCTURE_FAILURES} <= categories, categories
    changes = JobEvent.objects.filter(kind=JobEvent.Kind.STATUS)
    assert changes.filter(to_status=S.PREEMPTED).exists(), "no preemption"
    assert changes.filter(from_status__in=ACTIVE_STATUSES, to_status=S.QUEUED).exists(), "no retry"


# --- placement ----------------------------------------------------------------------------------------------

def _held_now(job: Job) -> set[tuple[str, int]]:
    return {(a.gpu.node.name, a.gpu.index) for a in JobAllocation.objects.filter(
        job=job, released_at__isnull=True).select_related("gpu__node")}


def _shown(placement: list[dict]) -> list[tuple[str, int]]:
    return [(row["node"], index) for row in placement for index in row["gpus"]]


def _page_placement(text: str) -> list[tuple[str, int]]:
    """(node, GPU index) of each GPU chip in the page's Placement table."""
    section = text.split("<h2>Placement</h2>", 1)[1].split("</section>", 1)[0]
    return [(node, int(index)) for node, row in re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", section, re.S)
            for index in re.findall(r'class="gpu-chip"[^>]*>GPU (\d+)', row)]


def _placement(job: Job, row: dict, detail: dict, text: str, held: dict) -> list[str]:
    """The GPUs the job holds now, each once, the same in the list, the detail and the page; none once it
    stopped holding them; no GPU held by two jobs."""
    problems = []
    now = _held_now(job)
    shown = _shown(detail["placement"])
    if len(shown) != len(set(shown)):
        problems.append(f"a GPU shown twice: {shown}")
    if set(shown) != now:
        problems.append(f"placement {sorted(shown)} is not what it holds now {sorted(now)}")
    if row["placement"] != detail["placement"]:
        problems.append("the list and the detail show different placements")
    if sorted(_page_placement(text)) != sorted(shown):
        problems.append(f"the page shows {_page_placement(text)}, the API {shown}")
    if now and job.status not in ACTIVE_STATUSES:
        problems.append(f"holds {sorted(now)} while {job.status}")
    for gpu in now:
        if gpu in held:
            problems.append(f"GPU {gpu} is also held by job #{held[gpu]}")
        held[gpu] = job.pk
    return problems


def _gpu_history() -> list[str]:
    """No GPU was ever given to two jobs at once."""
    clashes, last = {}, {}
    for allocation in JobAllocation.objects.select_related("gpu__node").order_by("gpu_id", "allocated_at", "id"):
        before = last.get(allocation.gpu_id)
        if before is not None and (before.released_at is None or before.released_at > allocation.allocated_at):
            clashes.setdefault((before.job_id, allocation.job_id, allocation.gpu.node.name), []).append(
                allocation.gpu.index)
        last[allocation.gpu_id] = allocation
    return [f"job #{second} was given GPUs {gpus} of {node} while job #{first} held them"
            for (first, second, node), gpus in clashes.items()]


# --- timelines ----------------------------------------------------------------------------------------------

def _at(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _page_reasons(text: str) -> list[str]:
    timeline = text.split('<ol class="timeline">', 1)[1].split("</ol>", 1)[0]
    return [html.unescape(reason) for reason in re.findall(r'<span class="why">(.*?)</span>', timeline, re.S)]


def _timeline(job: Job, detail: dict, text: str) -> list[str]:
    """Status changes chain by the lifecycle table in time order, from the first to the job's status; the
    stored moments are those of their events; each attempt goes admitted -> dispatching -> running in that
    order and ends where its cause says; the page shows the same timeline."""
    problems = []
    events = detail["events"]
    changes = [e for e in events if e["kind"] == "status"]
    status, last_at = "", None
    for event in events:
        at = _at(event["at"])
        if last_at and at < last_at:
            problems.append(f"event at {at} comes before the one at {last_at}")
        last_at = at
        if event["kind"] != "status":
            if event["from_status"] != status or event["to_status"] != status:
                problems.append(f"note {event['reason']!r} says {event['from_status']}, the job was {status}")
            continue
        if event["from_status"] != status:
            problems.append(f"{event['from_status']} -> {event['to_status']} follows {status or 'nothing'}")
        if event["to_status"] not in ALLOWED_TRANSITIONS.get(event["from_status"], ()):
            problems.append(f"{event['from_status']} -> {event['to_status']} is not in the lifecycle table")
        problems += _executor_order(job, event)
        status = event["to_status"]
    if status != job.status:
        problems.append(f"the timeline ends in {status}, the job is {job.status}")
    problems += _stored_moments(job, detail, changes)
    if _page_reasons(text) != [e["reason"] for e in events]:
        problems.append("the page's timeline is not the API's")
    return problems


def _executor_order(job: Job, event: dict) -> list[str]:
    """An attempt's end comes from where its cause can happen."""
    came_from, to = event["from_status"], event["to_status"]
    category = (event.get("data") or {}).get("category") or (job.failure_category if to == S.FAILED else "")
    if to == S.FAILED or (to == S.QUEUED and came_from in ACTIVE_STATUSES):
        if category == FailureCategory.IMAGE and came_from == S.RUNNING:
            return [f"the image failed after the containers started: {event['reason']!r}"]
        if category in RUN_FAILURES and came_from != S.RUNNING:
            return [f"{category} while {came_from}, before the program started: {event['reason']!r}"]
        if to == S.QUEUED and category not in INFRASTRUCTURE_FAILURES:
            return [f"requeued from {came_from} for {category or 'no cause'}: {event['reason']!r}"]
    if to == S.SUCCEEDED and came_from != S.RUNNING:
        return [f"succeeded from {came_from}"]
    return []


def _stored_moments(job: Job, detail: dict, changes: list[dict]) -> list[str]:
    """Admitted, started and finished are the moments of the last such events; no run outlives its max
    runtime (by more than the sync's lag), and one that timed out lasted at least that long."""
    problems = []
    requeued = [i for i, e in enumerate(changes) if e["to_status"] == S.QUEUED and e["from_status"] in (
        *ACTIVE_STATUSES, S.PREEMPTED)]
    current = changes[requeued[-1] + 1:] if requeued else changes  # a requeued job shows its current attempt only
    for field, statuses in (("admitted_at", (S.ADMITTED,)), ("started_at", (S.RUNNING,)),
                            ("finished_at", TERMINAL_STATUSES)):
        moments = [e["at"] for e in (changes if field == "finished_at" else current) if e["to_status"] in statuses]
        if field == "finished_at" and job.status not in TERMINAL_STATUSES:
            moments = []
        stored, expected = _at(detail[field]), _at(moments[-1]) if moments else None
        if stored != expected:
            problems.append(f"{field} is {stored}, its event's moment {expected}")
    for start, end in _runs(changes):
        limit = timedelta(minutes=job.max_runtime_minutes)
        if end["at"] - start > limit + SYNC_LAG:
            problems.append(f"a run of {end['at'] - start} outlived its max runtime of {limit}")
        timed_out = (end["event"].get("data") or {}).get("category") == FailureCategory.TIMEOUT
        if timed_out and end["at"] - start < limit:
            problems.append(f"timed out after {end['at'] - start}, before its max runtime of {limit}")
    return problems


def _runs(changes: list[dict]) -> list[tuple[datetime, dict]]:
    """(start, end) of each run that ended: from entering ``running`` to leaving it."""
    runs, start = [], None
    for event in changes:
        if event["to_status"] == S.RUNNING:
            start = _at(event["at"])
        elif start is not None and event["from_status"] == S.RUNNING:
            runs.append((start, {"at": _at(event["at"]), "event": event}))
            start = None
    return runs


# --- durations ----------------------------------------------------------------------------------------------

def _durations_in(text: str) -> list[tuple[float, float, str]]:
    """(seconds, resolution in seconds, context) of each duration written in ``text``; "2 h 5 min" is one."""
    found, previous_end = [], -2
    for match in DURATION.finditer(text):
        seconds, unit = float(match[1]) * UNIT_SECONDS[match[2]], UNIT_SECONDS[match[2]]
        resolution = unit * (0.1 if "." in match[1] else 1)
        if found and match.start() == previous_end + 1:  # "2 h 5 min": the parts of one duration
            total, _res, context = found.pop()
            found.append((total + seconds, resolution, context))
        else:
            found.append((seconds, resolution, text[max(match.start() - 40, 0):match.end() + 20]))
        previous_end = match.end()
    return found


def _durations(job: Job, detail: dict) -> list[str]:
    """Each duration in an attempt's end, its diagnosis, the job's failure and next step is the run's stored
    length; a max runtime named is the job's; a program's own timeout (NCCL's watchdog) is no longer than the
    run."""
    problems, texts, started, ran = [], [], None, None
    for event in detail["events"]:
        if event["kind"] == "status" and event["to_status"] == S.RUNNING:
            started = _at(event["at"])
        elif event["kind"] == "status" and event["from_status"] in ACTIVE_STATUSES:
            ran = (_at(event["at"]) - started).total_seconds() if event["from_status"] == S.RUNNING else None
            data = event.get("data") or {}
            texts += [(event["reason"], ran), (data.get("message", ""), ran), (data.get("advice", ""), ran)]
    if job.status == S.FAILED:
        texts += [(detail["failure"]["message"], ran), (detail["failure"]["advice"], ran)]
    for text, seconds_run in texts:
        problems += [f"names a max runtime of {limit} minutes, the job's is {job.max_runtime_minutes}"
                     for limit in MAX_RUNTIME.findall(text or "") if int(limit) != job.max_runtime_minutes]
        for seconds, resolution, context in _durations_in(MAX_RUNTIME.sub("", text or "")):
            if seconds_run is None:
                problems.append(f"says {context!r} of a run that never started")
            elif "before timing out" in context:  # the program's own timeout: within the run
                if seconds > seconds_run + resolution:
                    problems.append(f"says {context!r}, but the run lasted {seconds_run:.1f} s")
            elif not seconds - 1 <= seconds_run < seconds + resolution + 1:
                problems.append(f"says {context!r}, but the run lasted {seconds_run:.1f} s")
    return problems


# --- failures, attempts, waiting ----------------------------------------------------------------------------

def _failure(job: Job, detail: dict, text: str) -> list[str]:
    """A failed job says why (its category), shows evidence and a next step, in the API and on its page."""
    if job.status != S.FAILED:
        return ["a failure on a job that did not fail"] if detail["failure"] and job.status != S.PREEMPTED else []
    failure = detail["failure"] or {}
    problems = []
    if failure.get("category") not in FailureCategory.values:
        problems.append(f"no category: {failure}")
    evidence = failure.get("evidence") or {}
    if not any(evidence.get(key) for key in EVIDENCE_KEYS):
        problems.append(f"no evidence: {evidence}")
    if not failure.get("advice"):
        problems.append("no next step")
    section = text.split('<section class="card failure">', 1)[-1].split("</section>", 1)[0]
    if not all(shown in section for shown in (f'title="{failure.get("category")}"', 'id="failure-advice"',
                                              "<summary>Evidence</summary>")):
        problems.append("the page shows no category, no next step or no evidence")
    if failure.get("category") in INFRASTRUCTURE_FAILURES:
        if job.retry_count < job.task_type.infrastructure_retries:
            problems.append(f"an infrastructure failure not retried ({job.retry_count} of "
                            f"{job.task_type.infrastructure_retries} retries used)")
        if "retried automatically" in failure.get("advice", ""):
            problems.append(f"promises a retry that will not come: {failure['advice']!r}")
    return problems


def _attempts(job: Job, detail: dict, text: str) -> list[str]:
    """Every infrastructure failure (a retry, or the last failure) is among the attempts the page lists."""
    retries = [e for e in detail["events"] if e["kind"] == "status" and e["to_status"] == S.QUEUED
               and e["from_status"] in ACTIVE_STATUSES]
    failures = [*retries, *[e for e in detail["events"] if e["to_status"] == S.FAILED and e["kind"] == "status"]]
    infrastructure = [e for e in failures if (e.get("data") or {}).get("category") in INFRASTRUCTURE_FAILURES]
    attempts = (job.executor_state or {}).get("attempts", [])
    problems = []
    if len(retries) + sum(e["from_status"] == S.PREEMPTED for e in detail["events"]
                          if e["to_status"] == S.QUEUED) != detail["retry_count"]:
        problems.append(f"retry_count {detail['retry_count']}, but {len(retries)} retries in its timeline")
    if not infrastructure:
        return problems
    listed = {int(number): html.unescape(item) for number, item in re.findall(
        r'<li class="attempt[^"]*" id="attempt-(\d+)"[^>]*>(.*?)</li>', text.split('<ol class="attempts">', 1)[-1]
        .split("</ol>", 1)[0], re.S)} if '<ol class="attempts">' in text else {}
    for event in infrastructure:
        data, at = event["data"], _at(event["at"])
        kept = [a for a in attempts if _at(a.get("at")) == at and a.get("category") == data["category"]]
        if not kept:
            problems.append(f"the attempt that failed with {data['category']} at {at} is not among its attempts")
        elif not all(shown in listed.get(kept[0]["attempt"] + 1, "") for shown in (
                f'title="{data["category"]}">{FailureCategory(data["category"]).label}<', data["message"])):
            problems.append(f"the page does not list attempt {kept[0]['attempt'] + 1} ({data['category']})")
    return problems


def _waiting(job: Job, detail: dict, text: str) -> list[str]:
    """A waiting job says why (a code and a sentence with its numbers) and when it should start."""
    if job.status not in WAITING_STATUSES:
        return ["a wait reason on a job that is not waiting"] if detail["wait_reason"] else []
    reason = detail["wait_reason"] or {}
    problems = []
    if not reason.get("code") or not re.search(r"\d", reason.get("message", "")):
        problems.append(f"no code or no numbers in its wait reason: {reason}")
    if not detail["estimated_start"]:
        problems.append("no estimated start")
    if 'class="likely-start"' not in text or html.escape(reason.get("message", "")) not in text:
        problems.append("the page shows no likely start or not its reason")
    return problems


# --- the log ------------------------------------------------------------------------------------------------

def _log(job: Job, log: dict, text: str) -> list[str]:
    """The log belongs to the attempt the job is in (or last ran), its lines stamped within that run, and the
    page shows the same lines."""
    problems = []
    if log["complete"] != (job.status in TERMINAL_STATUSES):
        problems.append(f"the log says complete={log['complete']}")
    if log["attempt"] != job.retry_count + 1 and not (job.status in (S.QUEUED, S.PENDING) and job.retry_count):
        problems.append(f"the log is of attempt {log['attempt']}, the job is in attempt {job.retry_count + 1}")
    started = job.started_at if job.status not in (S.QUEUED, S.PENDING, S.ADMITTED, S.DISPATCHING) else None
    if started is None and job.status not in (S.QUEUED, S.PENDING) and log["lines"]:
        problems.append("a log from a program that never started")
    end = job.finished_at or timezone.now()
    for line in log["lines"]:
        stamp = LOG_STAMP.match(line)
        if stamp and started is not None and not (
                started.replace(microsecond=0) <= _at(stamp[1] + "+00:00") <= end):
            problems.append(f"log line outside its run ({started:%H:%M:%S}-{end:%H:%M:%S}): {line[:80]!r}")
            break
    page_lines = re.search(r'<pre class="log" id="log-lines"[^>]*>(.*?)</pre>', text, re.S)
    shown = html.unescape(page_lines[1]).splitlines() if page_lines else []
    if not _same_log(shown, log["lines"], running=job.status in ACTIVE_STATUSES):
        problems.append("the page's log is not the API's")
    return problems


def _same_log(page: list[str], api: list[str], running: bool) -> bool:
    """The page (read first) and the API show the same log; while the job runs, the API's may have grown
    since: then it goes on from the page's (its first lines are the end of the page's)."""
    if not running or not page:
        return page == api
    return any(page[start:] == api[:len(page) - start] for start in range(len(page)))
