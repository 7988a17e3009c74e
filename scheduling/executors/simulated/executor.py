"""A simulated cluster: jobs start, run for a realistic time and end by themselves.

Each job gets a plan when dispatched, drawn from a random generator seeded with the job's id (so a test
or a demo replays the same way): image pull time, run time, and outcome. Most jobs succeed; the rest fail
in each of the ways real clusters fail, with the kind of evidence real clusters give. A command may force
the plan with ``sim:outcome=<category>`` and ``sim:minutes=<n>`` (docs/kubernetes.md, "The simulated cluster").

A failure is diagnosed by the Kubernetes executor's rules (``kubernetes/diagnosis.py``) from what a
cluster would show for it: the pods' states, the Job's condition, the node agent's fault, and the log
(``simulated_log``: made up from the plan and the job's timeline, read by ``read_log`` the same way). So a
simulated failure has the same category, evidence (the log tail among it) and next step as a real one.

Simulated time runs ``1 / SIMULATION_TIME_SCALE`` times faster than real time so demo jobs that would
take an hour finish in about a minute. It speeds up the program's work (the image pull, the planned run),
not the clock: what the portal stores and says is real time (a run's length is its stored start to finish),
and the max runtime is a limit in real time as on any cluster. Failures are retried as the Kubernetes
executor's are (``lifecycle.fail_or_retry``); each attempt draws its own plan unless the command forces it.
"""

from __future__ import annotations

import contextlib
import random
import re
from dataclasses import replace

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from fleet.catalogue import vendor_of
from gpuportal.text.formatting import duration_parts
from gpuportal.text.phrases import Phrase
from scheduling.executors.base import Executor, ExecutorUpdate, LiveState
from scheduling.executors.failures import category_phrase
from scheduling.executors.kubernetes.diagnosis import Diagnosis, PodState, diagnose
from scheduling.executors.logs import LogTail, has_run, merge_streams, stored_tail
from scheduling.executors.simulated import log as simulated_log
from scheduling.executors.simulated import serving as simulated_serving
from scheduling.jobs.tokens import notebook_token
from scheduling.models import LONG_RUNNING_KINDS, FailureCategory, JobGroup, JobStatus, WorkloadKind

_DIRECTIVE = re.compile(r"sim:(outcome|minutes)=([\w.]+)")
_SERVING_DIRECTIVE = re.compile(r"sim:(ready|crash)=([\d.]+)")
#: A replica restarted this often is in a crash loop (as Kubernetes' back-off says).
CRASH_LOOP_RESTARTS = 2
#: Failures a plan may end a run with (a ``sim:outcome`` may also name gpu_fault); anything else is a program error.
RUN_FAILURES = (FailureCategory.EXIT_CODE, FailureCategory.OUT_OF_MEMORY, FailureCategory.NODE_FAULT,
                FailureCategory.GPU_FAULT, FailureCategory.COMMUNICATION)
_OUTCOMES = [  # (outcome, weight)
    ("succeeded", 80),
    (FailureCategory.EXIT_CODE, 6),
    (FailureCategory.OUT_OF_MEMORY, 5),
    (FailureCategory.IMAGE, 3),
    (FailureCategory.NODE_FAULT, 3),
    (FailureCategory.COMMUNICATION, 3),
]


def plan_for(job) -> dict:
    """The plan of the job's current attempt (a retry draws again: the fault of one node does not follow the job)."""
    rng = random.Random(job.pk + 1_000_003 * job.retry_count)
    outcome = rng.choices([o for o, _w in _OUTCOMES], weights=[w for _o, w in _OUTCOMES])[0]
    minutes = round(rng.lognormvariate(3.2, 0.9), 1)  # median ~25 min, long tail
    pull_seconds = rng.randint(5, 90)
    for key, value in _DIRECTIVE.findall(job.command or ""):
        if key == "outcome":
            outcome = value
        else:
            minutes = float(value)
    if outcome == FailureCategory.COMMUNICATION and job.node_count < 2:
        outcome = FailureCategory.NODE_FAULT  # one node has no cross-node network to fail
    if outcome == FailureCategory.IMAGE:
        minutes = 0.0
    elif outcome != "succeeded":
        minutes = round(minutes * rng.uniform(0.1, 0.9), 1)
    if outcome == FailureCategory.COMMUNICATION:  # NCCL's watchdog fires only after its timeout
        minutes = max(minutes, simulated_log.WATCHDOG_SECONDS / 60 + 1)
    return {"outcome": outcome, "run_minutes": minutes, "pull_seconds": pull_seconds,
            "failing_gpu": rng.randrange(max(job.gpus_per_node, 1)), "exit_code": rng.choice([1, 2, 127, 139])}


def serving_plan(job) -> dict:
    """A notebook's or replica's plan: an image pull, then a server that stays up. ``sim:ready=<s>`` delays its
    readiness (a model loading), ``sim:crash=<s>`` makes it exit that many seconds after each start."""
    rng = random.Random(job.pk + 1_000_003 * job.retry_count)
    plan = {"outcome": "serve", "pull_seconds": rng.randint(5, 30), "ready_seconds": 0.0, "crash_seconds": 0.0}
    for key, value in _SERVING_DIRECTIVE.findall(job.command or ""):
        plan[f"{key}_seconds"] = float(value)
    return plan


class SimulatedExecutor(Executor):
    def dispatch(self, job) -> dict:
        return {"plan": serving_plan(job) if job.kind in LONG_RUNNING_KINDS else plan_for(job)}

    def observe(self, job, now) -> ExecutorUpdate | None:
        return self._follow_ports(job, self._observe_attempt(job, now))

    def _follow_ports(self, job, update: ExecutorUpdate | None) -> ExecutorUpdate | None:
        """Keep the stand-in of a job's named ports up while the job runs, and stop it when the attempt ends.
        Level-triggered, as a replica's restarts are: a job that runs without a live one (seeded running, its
        stand-in died, the process that started it ended) gets one at the next sync, started under the job's row
        lock (``_wanted_state``) so that two syncs start one between them."""
        if not job.ports:
            return update
        running = update.status == JobStatus.RUNNING if update is not None else job.status == JobStatus.RUNNING
        serving = (job.executor_state or {}).get("ports_serving") or {}
        if not running:
            if update is not None:
                _stop_ports(job, serving)
            return update
        if simulated_serving.alive(serving):
            return update
        with _recorded() as started:
            fresh = self._wanted_state(job, job.status)
            if fresh is None:
                return update
            current = fresh.get("ports_serving") or {}
            if not simulated_serving.alive(current):
                simulated_serving.stop(current)
                current = started(simulated_serving.start_ports(job))
                fresh = {**fresh, "ports_serving": current}
                type(job).objects.filter(pk=job.pk).update(executor_state=fresh)
            job.executor_state = fresh
        return replace(update, state={**(update.state or {}), "ports_serving": current}) if update else None

    def port_upstream(self, job, port) -> str:
        return simulated_serving.port_upstream((job.executor_state or {}).get("ports_serving") or {}, port["name"])

    def _observe_attempt(self, job, now) -> ExecutorUpdate | None:
        plan = job.executor_state.get("plan")
        if not plan:
            return None
        if plan.get("outcome") == "serve":
            return self._observe_serving(job, now, plan)
        fault = job.executor_state.get("fault")
        if fault:  # the hardware under the job failed (seen by the agent poller): so does the job
            return self._failed(job, fault["category"], now, Phrase(gettext_noop("Lost its hardware.")))
        scale = simulated_log.time_scale(job)
        if job.status == JobStatus.DISPATCHING:
            dispatched = job.executor_state.get("dispatched_at")
            if dispatched and (now - parse_datetime(dispatched)).total_seconds() >= plan["pull_seconds"] * scale:
                if plan["outcome"] == FailureCategory.IMAGE:
                    return self._failed(job, FailureCategory.IMAGE, now,
                                        Phrase(gettext_noop("Image could not be pulled.")))
                nodes = sorted({a.gpu.node.name for a in job.allocations.all() if a.released_at is None})
                return ExecutorUpdate(JobStatus.RUNNING, Phrase(gettext_noop("Containers started on %(nodes)s."), {
                    "nodes": ", ".join(nodes)}))
            return None
        if job.status != JobStatus.RUNNING or not job.started_at:
            return None
        ran, planned = (now - job.started_at).total_seconds(), plan["run_minutes"] * 60 * scale
        limit = job.max_runtime_minutes * 60
        if ran >= limit and planned >= limit:
            stopped = Phrase(gettext_noop("Stopped after its max runtime of %(m)d minutes; ask for a longer runtime or "
                                          "checkpoint more often."), {"m": job.max_runtime_minutes})
            return self._failed(job, FailureCategory.TIMEOUT, now, Phrase(gettext_noop("Reached its max runtime.")),
                                stopped)
        if ran < planned:
            return None
        if plan["outcome"] == "succeeded":  # how long it ran is what its stored start and finish will say
            return ExecutorUpdate(JobStatus.SUCCEEDED, Phrase(gettext_noop("Finished with exit code 0 after %(d)s."), {
                "d": Phrase(*duration_parts(ran))}), exit_code=0)
        category = plan["outcome"] if plan["outcome"] in RUN_FAILURES else FailureCategory.EXIT_CODE
        return self._failed(job, category, now)

    def _observe_serving(self, job, now, plan: dict) -> ExecutorUpdate | None:
        """Start the server once the image is pulled; then keep it up: a notebook whose server died fails, a
        replica's is restarted (counted) as a Deployment would.

        Level-triggered, as Kubernetes' controllers are: ``job`` may be a copy read before a cancel, a stop of its
        service or another sync's start, so a server is started only under the job's row lock, when the row read
        fresh under it still says it should run (``_wanted_state``), and is recorded in that same transaction: a
        stopped service or a cancelled job never gets a new server, and a second sync finds the one the first
        started instead of starting another."""
        state = job.executor_state
        if state.get("fault"):
            return self._serving_failed(job, FailureCategory(state["fault"]["category"]),
                                        Phrase(gettext_noop("Lost its hardware.")))
        if job.status == JobStatus.DISPATCHING:
            dispatched = state.get("dispatched_at")
            if not dispatched or (now - parse_datetime(dispatched)).total_seconds() < plan["pull_seconds"] * \
                    simulated_log.time_scale(job):
                return None
            with _recorded() as started:
                fresh = self._wanted_state(job, JobStatus.DISPATCHING)
                if fresh is None:
                    return None
                serving = fresh.get("serving")
                if not serving:  # nobody started it yet; whichever sync moves the job on, this is its server
                    serving = started(simulated_serving.start(job, 0, plan["ready_seconds"], plan["crash_seconds"]))
                    fresh = {**fresh, "serving": serving}
                    type(job).objects.filter(pk=job.pk).update(executor_state=fresh)
                job.executor_state = fresh  # the transition saves the fresh state, not the copy read before
            if not serving["port"]:
                return self._serving_failed(job, FailureCategory.EXIT_CODE,
                                            Phrase(gettext_noop("The server did not start.")), serving)
            nodes = ", ".join(sorted({a.gpu.node.name for a in job.allocations.all() if a.released_at is None}))
            text = (gettext_noop("Notebook server started on %(nodes)s.") if job.kind == WorkloadKind.NOTEBOOK
                    else gettext_noop("Replica started on %(nodes)s (revision %(revision)d)."))
            return ExecutorUpdate(JobStatus.RUNNING, Phrase(text, {"nodes": nodes, "revision": job.revision or 1}),
                                  state={"serving": serving})
        if job.status != JobStatus.RUNNING or not job.started_at:
            return None
        if job.max_runtime_minutes is not None and (now - job.started_at).total_seconds() >= \
                job.max_runtime_minutes * 60:
            return self._serving_failed(job, FailureCategory.TIMEOUT, Phrase(gettext_noop("Reached its max runtime.")))
        serving = state.get("serving") or {}
        if simulated_serving.alive(serving):
            return None
        if job.kind == WorkloadKind.NOTEBOOK:
            return self._serving_failed(job, FailureCategory.EXIT_CODE,
                                        Phrase(gettext_noop("The notebook server exited.")))
        with _recorded() as started:
            fresh = self._wanted_state(job, JobStatus.RUNNING)
            if fresh is None:
                return None
            current = fresh.get("serving") or {}
            if _server_of(current) != _server_of(serving):  # another sync restarted it already: that one serves
                job.executor_state = fresh
                return None
            restarted = started(simulated_serving.start(job, current.get("restarts", 0) + 1, plan["ready_seconds"],
                                                        plan["crash_seconds"]))
            job.executor_state = {**fresh, "serving": restarted}
            type(job).objects.filter(pk=job.pk).update(executor_state=job.executor_state)
        return None

    @staticmethod
    def _wanted_state(job, status: str) -> dict | None:
        """The job's executor state, read under its row lock (held until the caller's transaction ends), while the
        row still says its server should run: ``status`` in the same attempt, no fault, not a replica of a stopped
        service. None when it should not (cancelled, scaled down, stopped, failed or retried meanwhile)."""
        row = (type(job).objects.select_for_update().filter(pk=job.pk)
               .values_list("status", "retry_count", "group_id", "executor_state").first())
        if row is None:
            return None
        status_now, attempt, group_id, state = row[0], row[1], row[2], dict(row[3] or {})
        if status_now != status or attempt != job.retry_count or state.get("fault"):
            return None
        if group_id is not None and JobGroup.objects.filter(pk=group_id, stopped_at__isnull=False).exists():
            return None  # stop_service marks the service stopped before it cancels the replicas one by one
        return state

    def _serving_failed(self, job, category: str, message: str, serving: dict | None = None) -> ExecutorUpdate:
        serving = serving or job.executor_state.get("serving") or {}
        _stop_servers(job, serving)
        advice = (Phrase(gettext_noop("Open the job's log for the server's last lines; clone the job to start it "
                                      "again.")) if category == FailureCategory.EXIT_CODE else "")
        diagnosis = Diagnosis(category, message, advice, exit_code=1 if category == FailureCategory.EXIT_CODE
                              else None, evidence={"log": simulated_serving.log_tail(serving, 20)})
        return ExecutorUpdate(JobStatus.FAILED, message, category, message, diagnosis.exit_code, diagnosis.as_dict())

    def probe(self, job) -> LiveState:
        serving = (job.executor_state or {}).get("serving") or {}
        if job.status != JobStatus.RUNNING or not serving:
            return LiveState()
        up = simulated_serving.alive(serving)
        restarts = serving.get("restarts", 0)
        if job.kind == WorkloadKind.NOTEBOOK:
            code, status = simulated_serving.ask(serving, f"{simulated_serving.base_url(job)}api/status",
                                                 notebook_token(job)) if up else (0, {})
            activity = parse_datetime(status["last_activity"].replace("Z", "+00:00")) if status.get(
                "last_activity") else None
            return LiveState(simulated_serving.upstream(serving), ready=code == 200, last_activity=activity)
        code, _body = simulated_serving.ask(serving, "/healthz") if up else (0, {})
        problem, evidence = "", {}
        if restarts >= CRASH_LOOP_RESTARTS:
            problem = _("Crash loop: the container exited with code 1 and was restarted %(n)d times (back-off "
                        "between restarts).") % {"n": restarts}
            evidence = {"restarts": restarts, "exit_code": 1, "log": simulated_serving.log_tail(serving, 20)}
        elif code == 503:
            problem = _("Not ready: its readiness check (GET /healthz) answers 503.")
            evidence = {"readiness": "GET /healthz -> 503"}
        return LiveState(simulated_serving.upstream(serving), ready=code == 200, restarts=restarts,
                         problem=problem, evidence=evidence)

    def _failed(self, job, category: str, now, reason: str = "", message: str = "") -> ExecutorUpdate:
        """The failure as the Kubernetes rules diagnose what a cluster would show for it."""
        diagnosis = diagnose_simulated(job, category, now)
        if message:
            diagnosis = replace(diagnosis, message=message)
        return ExecutorUpdate(JobStatus.FAILED, reason or diagnosis.message, diagnosis.category, diagnosis.message,
                              diagnosis.exit_code, diagnosis.as_dict())

    def stopped_log(self, job, tail: int) -> tuple[str, ...]:
        """Made up from the plan like ``read_log``, so kept when the attempt is preempted: nothing to ask."""
        return self.read_log(job, tail).lines if has_run(job) else ()

    def read_log(self, job, tail: int) -> LogTail:
        """The lines the current attempt printed so far (all of them once it ended), made up from its plan
        and its timeline. A notebook's or replica's log is what its server printed."""
        plan = (job.executor_state or {}).get("plan") or {}
        if plan.get("outcome") == "serve":
            serving = job.executor_state.get("serving")
            if not serving:
                return stored_tail(job, tail)
            return LogTail(job.retry_count + 1, tuple(simulated_serving.log_tail(serving, tail)))
        run = simulated_log.run_of(job, timezone.now())
        if run is None:
            return stored_tail(job, tail)
        return LogTail(run.attempt, merge_streams(simulated_log.pod_streams(run, tail), tail))

    def stop(self, job, reason: str = "") -> None:
        """A batch job's program does not run for real, the cancellation itself is the record. A notebook's or
        replica's server is stopped, the one recorded on its row too (``_stop_servers``), and so is the stand-in of
        a job's named ports."""
        _stop_servers(job, (job.executor_state or {}).get("serving") or {})
        _stop_ports(job, (job.executor_state or {}).get("ports_serving") or {})


@contextlib.contextmanager
def _recorded():
    """A transaction in which stand-ins are started and recorded on the job's row; ``started(serving)`` notes one.
    When the transaction does not commit (the database ended the session under it, the worker's task failed),
    the stand-ins it started are stopped: nothing records them, so no stop or restart would ever find them, and
    they would serve for as long as the worker lives (found by the chaos soak: a replica's server still running
    after its service was stopped, recorded nowhere). The status sync runs this outermost, so leaving the block
    is the commit."""
    servers: list[dict] = []

    def started(serving: dict) -> dict:
        servers.append(serving)
        return serving

    try:
        with transaction.atomic():
            yield started
    except BaseException:
        for serving in servers:
            simulated_serving.stop(serving)
        raise


def _server_of(serving: dict) -> tuple:
    """What tells one started server from another (each start has its own process and pid file)."""
    return serving.get("pid"), serving.get("pid_file")


def _stop_servers(job, serving: dict) -> None:
    """Stop ``serving`` and the server recorded on the job's row for the same attempt: ``job`` may be a copy read
    before a sync recorded the server it started (a cancel racing with the start), and that server must not
    outlive the attempt."""
    simulated_serving.stop(serving)
    if job.kind not in LONG_RUNNING_KINDS:
        return
    stored = (type(job).objects.filter(pk=job.pk, retry_count=job.retry_count)
              .values_list("executor_state", flat=True).first() or {}).get("serving") or {}
    if stored and _server_of(stored) != _server_of(serving):
        simulated_serving.stop(stored)


def _stop_ports(job, serving: dict) -> None:
    """Stop the stand-in of a job's named ports, and the one its row records (``job`` may be a copy read before a
    sync started it)."""
    simulated_serving.stop(serving)
    if not job.ports:
        return
    stored = (type(job).objects.filter(pk=job.pk).values_list("executor_state", flat=True).first() or {}).get(
        "ports_serving") or {}
    if stored and _server_of(stored) != _server_of(serving):
        simulated_serving.stop(stored)


def _pod(run, index: int, node: str, category: str, failing: int, fault: dict | None) -> PodState:
    """Pod ``index`` as Kubernetes would show it when the run fails with ``category``."""
    name = run.pod_name(index)
    if category in (FailureCategory.NODE_FAULT, FailureCategory.GPU_FAULT) and index != failing:
        return PodState(name, node, phase="Running", index=index, running=True)  # still waiting for its peers
    if category == FailureCategory.NODE_FAULT:
        why = fault["message"] if fault else Phrase(gettext_noop(
            "XID 79 (GPU has fallen off the bus) on GPU %(gpu)d; the node stopped responding."),
            {"gpu": run.failing_gpu})
        return PodState(name, node, phase="Failed", reason="NodeLost", message=why, index=index, exit_code=255,
                        terminated_reason="Unknown")
    code = run.exit_code if index == 0 or category == FailureCategory.COMMUNICATION else 143
    return PodState(name, node, phase="Failed", index=index, exit_code=code, terminated_reason="Error")


def diagnose_simulated(job, category: str, now) -> Diagnosis:
    """Diagnose a simulated failure with the Kubernetes rules, from its pods, its Job's condition, the agent's
    fault and its log (the tail the diagnosis keeps as evidence, as the Kubernetes sync reads it)."""
    fault = job.executor_state.get("fault")
    run = simulated_log.run_of(job, now, ending=category)
    conditions, logs, pods = [], {}, []
    if category == FailureCategory.TIMEOUT:  # the deadline deletes the pods; the Job says why
        conditions = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                       "message": "Job was active longer than specified deadline"}]
    elif run is None:  # the program never started: the image could not be pulled (or the fault came first)
        if category == FailureCategory.IMAGE:
            state = {"waiting_reason": "ErrImagePull",
                     "waiting_message": f'failed to pull image "{job.image}": manifest unknown'}
        else:
            lost = category == FailureCategory.NODE_FAULT
            state = {"phase": "Failed", "reason": "NodeLost" if lost else "",
                     "message": (fault or {}).get("message", "") if lost else ""}
        pods = [PodState(f"sim-{job.pk}-a{job.retry_count}-{i}", node, index=i, **state)
                for i, node in enumerate(simulated_log.attempt_nodes(job)[0] or ("?",))]
    else:
        tail = settings.KUBERNETES["LOG_TAIL_LINES"]
        logs = {run.pod_name(i): "\n".join(text for _at, text in lines)
                for i, lines in simulated_log.pod_streams(run, tail).items()}
        failing = run.nodes.index(fault["node"]) if fault and fault.get("node") in run.nodes else 0
        pods = [_pod(run, i, node, category, failing, fault) for i, node in enumerate(run.nodes)]
    found = diagnose(pods, node_count=job.node_count, conditions=conditions, agent_fault=fault, logs=logs,
                     vendor=run.vendor if run is not None else vendor_of(job.gpu_model))
    return found or Diagnosis(category, category_phrase(category), "")  # nothing a cluster would show tells it
