"""A simulated cluster: jobs start, run for a realistic time and end by themselves.

Each job gets a plan when dispatched, drawn from a random generator seeded with the job's id (so a test
or a demo replays the same way): image pull time, run time, and outcome. Most jobs succeed; the rest fail
in each of the ways real clusters fail, with the kind of evidence real clusters give. A command may force
the plan with ``sim:outcome=<category>`` and ``sim:minutes=<n>`` (documented in the README).

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

import random
import re
from dataclasses import replace

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from gpuportal.formatting import duration_text
from gpuportal.phrases import Phrase

from ..models import FailureCategory, JobStatus
from . import simulated_log
from .base import Executor, ExecutorUpdate
from .kubernetes.diagnosis import Diagnosis, PodState, diagnose
from .logs import LogTail, merge_streams, stored_tail

_DIRECTIVE = re.compile(r"sim:(outcome|minutes)=([\w.]+)")
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


class SimulatedExecutor(Executor):
    def dispatch(self, job) -> dict:
        return {"plan": plan_for(job)}

    def observe(self, job, now) -> ExecutorUpdate | None:
        plan = job.executor_state.get("plan")
        if not plan:
            return None
        fault = job.executor_state.get("fault")
        if fault:  # the hardware under the job failed (seen by the agent poller): so does the job
            return self._failed(job, fault["category"], now, _("Lost its hardware."))
        scale = simulated_log.time_scale(job)
        if job.status == JobStatus.DISPATCHING:
            dispatched = job.executor_state.get("dispatched_at")
            if dispatched and (now - parse_datetime(dispatched)).total_seconds() >= plan["pull_seconds"] * scale:
                if plan["outcome"] == FailureCategory.IMAGE:
                    return self._failed(job, FailureCategory.IMAGE, now, _("Image could not be pulled."))
                nodes = sorted({a.gpu.node.name for a in job.allocations.all() if a.released_at is None})
                return ExecutorUpdate(JobStatus.RUNNING, Phrase(gettext_noop("Containers started on %(nodes)s."), {
                    "nodes": ", ".join(nodes)}))
            return None
        if job.status != JobStatus.RUNNING or not job.started_at:
            return None
        ran, planned = (now - job.started_at).total_seconds(), plan["run_minutes"] * 60 * scale
        limit = job.max_runtime_minutes * 60
        if ran >= limit and planned >= limit:
            return self._failed(job, FailureCategory.TIMEOUT, now, _("Reached its max runtime."), _(
                "Stopped after its max runtime of %(m)d minutes; ask for a longer runtime or checkpoint "
                "more often.") % {"m": job.max_runtime_minutes})
        if ran < planned:
            return None
        if plan["outcome"] == "succeeded":  # how long it ran is what its stored start and finish will say
            return ExecutorUpdate(JobStatus.SUCCEEDED, _("Finished with exit code 0 after %(d)s.") % {
                "d": duration_text(ran)}, exit_code=0)
        category = plan["outcome"] if plan["outcome"] in RUN_FAILURES else FailureCategory.EXIT_CODE
        return self._failed(job, category, now)

    def _failed(self, job, category: str, now, reason: str = "", message: str = "") -> ExecutorUpdate:
        """The failure as the Kubernetes rules diagnose what a cluster would show for it."""
        diagnosis = diagnose_simulated(job, category, now)
        if message:
            diagnosis = replace(diagnosis, message=message)
        return ExecutorUpdate(JobStatus.FAILED, reason or str(FailureCategory(diagnosis.category).label),
                              diagnosis.category, diagnosis.message, diagnosis.exit_code, diagnosis.as_dict())

    def read_log(self, job, tail: int) -> LogTail:
        """The lines the current attempt printed so far (all of them once it ended), made up from its plan
        and its timeline."""
        run = simulated_log.run_of(job, timezone.now())
        if run is None:
            return stored_tail(job, tail)
        return LogTail(run.attempt, merge_streams(simulated_log.pod_streams(run, tail), tail))

    def stop(self, job, reason: str = "") -> None:
        """Nothing runs for real; the cancellation itself is the record."""


def _pod(run, index: int, node: str, category: str, failing: int, fault: dict | None) -> PodState:
    """Pod ``index`` as Kubernetes would show it when the run fails with ``category``."""
    name = run.pod_name(index)
    if category in (FailureCategory.NODE_FAULT, FailureCategory.GPU_FAULT) and index != failing:
        return PodState(name, node, phase="Running", index=index, running=True)  # still waiting for its peers
    if category == FailureCategory.NODE_FAULT:
        why = fault["message"] if fault else _("XID 79 (GPU has fallen off the bus) on GPU %(gpu)d; the node "
                                               "stopped responding.") % {"gpu": run.failing_gpu}
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
    found = diagnose(pods, node_count=job.node_count, conditions=conditions, agent_fault=fault, logs=logs)
    return found or Diagnosis(category, str(FailureCategory(category).label), "")
