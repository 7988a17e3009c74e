"""A simulated cluster: jobs start, run for a realistic time and end by themselves.

Each job gets a plan when dispatched, drawn from a random generator seeded with the job's id (so a test
or a demo replays the same way): image pull time, run time, and outcome. Most jobs succeed; the rest fail
in each of the ways real clusters fail, with the kind of evidence real clusters give. A command may force
the plan with ``sim:outcome=<category>`` and ``sim:minutes=<n>`` (documented in the README).

Simulated time runs ``1 / SIMULATION_TIME_SCALE`` times faster than real time so demo jobs that would
take an hour finish in about a minute.
"""

from __future__ import annotations

import random
import re

from django.conf import settings
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from ..models import FailureCategory, JobStatus
from .base import Executor, ExecutorUpdate

_DIRECTIVE = re.compile(r"sim:(outcome|minutes)=([\w.]+)")
_OUTCOMES = [  # (outcome, weight)
    ("succeeded", 80),
    (FailureCategory.EXIT_CODE, 6),
    (FailureCategory.OUT_OF_MEMORY, 5),
    (FailureCategory.IMAGE, 3),
    (FailureCategory.NODE_FAULT, 3),
    (FailureCategory.COMMUNICATION, 3),
]


def plan_for(job) -> dict:
    rng = random.Random(job.pk)
    outcome = rng.choices([o for o, _w in _OUTCOMES], weights=[w for _o, w in _OUTCOMES])[0]
    if outcome == FailureCategory.COMMUNICATION and job.node_count < 2:
        outcome = FailureCategory.NODE_FAULT
    minutes = round(rng.lognormvariate(3.2, 0.9), 1)  # median ~25 min, long tail
    pull_seconds = rng.randint(5, 90)
    for key, value in _DIRECTIVE.findall(job.command or ""):
        if key == "outcome":
            outcome = value
        else:
            minutes = float(value)
    if outcome == FailureCategory.IMAGE:
        minutes = 0.0
    elif outcome != "succeeded":
        minutes = round(minutes * rng.uniform(0.1, 0.9), 1)
    return {"outcome": outcome, "run_minutes": minutes, "pull_seconds": pull_seconds,
            "failing_gpu": rng.randrange(max(job.gpus_per_node, 1)), "exit_code": rng.choice([1, 2, 127, 139])}


def simulated_seconds(start_iso: str, now) -> float:
    start = parse_datetime(start_iso)
    return (now - start).total_seconds() / max(settings.SIMULATION_TIME_SCALE, 1e-9)


class SimulatedExecutor(Executor):
    def dispatch(self, job) -> dict:
        return {"plan": plan_for(job)}

    def observe(self, job, now) -> ExecutorUpdate | None:
        plan = job.executor_state.get("plan")
        if not plan:
            return None
        fault = job.executor_state.get("fault")
        if fault:  # the hardware under the job failed (seen by the agent poller): so does the job
            return ExecutorUpdate(
                JobStatus.FAILED, _("Lost its hardware."), fault["category"],
                _("%(what)s on %(node)s: %(message)s Not your program's fault: resubmit.") % {
                    "what": FailureCategory(fault["category"]).label, "node": fault["node"],
                    "message": fault["message"]})
        nodes = sorted({a.gpu.node.name for a in job.allocations.all()})
        if job.status == JobStatus.DISPATCHING:
            dispatched = job.executor_state.get("dispatched_at")
            if dispatched and simulated_seconds(dispatched, now) >= plan["pull_seconds"]:
                if plan["outcome"] == FailureCategory.IMAGE:
                    return ExecutorUpdate(
                        JobStatus.FAILED, _("Image could not be pulled."), FailureCategory.IMAGE,
                        _("Pulling image %(image)s failed on %(node)s: manifest unknown (ErrImagePull); "
                          "check the name and tag, and that the registry is reachable from the cluster.")
                        % {"image": job.image, "node": nodes[0] if nodes else "?"})
                return ExecutorUpdate(JobStatus.RUNNING, _("Containers started on %(nodes)s.") % {
                    "nodes": ", ".join(nodes)})
            return None
        if job.status != JobStatus.RUNNING or not job.started_at:
            return None
        elapsed_min = (now - job.started_at).total_seconds() / max(settings.SIMULATION_TIME_SCALE, 1e-9) / 60
        if elapsed_min >= job.max_runtime_minutes and plan["run_minutes"] >= job.max_runtime_minutes:
            return ExecutorUpdate(
                JobStatus.FAILED, _("Reached its max runtime."), FailureCategory.TIMEOUT,
                _("Stopped after its max runtime of %(m)d minutes; ask for a longer runtime or checkpoint "
                  "more often.") % {"m": job.max_runtime_minutes})
        if elapsed_min < plan["run_minutes"]:
            return None
        return self._outcome(job, plan, nodes)

    def _outcome(self, job, plan, nodes) -> ExecutorUpdate:
        outcome = plan["outcome"]
        node = nodes[0] if nodes else "?"
        minutes = plan["run_minutes"]
        if outcome == "succeeded":
            return ExecutorUpdate(JobStatus.SUCCEEDED, _("Finished with exit code 0 after %(m).1f minutes.") % {
                "m": minutes}, exit_code=0)
        messages = {
            FailureCategory.OUT_OF_MEMORY: (_(
                "CUDA out of memory on GPU %(gpu)d of %(node)s: tried to allocate 2.50 GiB with 79.1 of 80 GiB in "
                "use; the container was killed (exit code 137). Reduce the batch size or ask for more GPUs."), 137),
            FailureCategory.NODE_FAULT: (_(
                "Node %(node)s reported XID 79 (GPU has fallen off the bus) on GPU %(gpu)d; the job lost the GPU. "
                "Not your program's fault: resubmit, the node is being checked."), None),
            FailureCategory.COMMUNICATION: (_(
                "NCCL watchdog timeout between ranks on %(nodes)s after 1800 s (collective ALLREDUCE did not "
                "complete); the cross-node network is suspect."), None),
            FailureCategory.EXIT_CODE: (_(
                "The program exited with code %(code)d after %(m).1f minutes; see its log for the cause."),
                plan["exit_code"]),
        }
        template, exit_code = messages.get(outcome, messages[FailureCategory.EXIT_CODE])
        text = template % {"gpu": plan["failing_gpu"], "node": node, "nodes": ", ".join(nodes),
                           "code": plan["exit_code"], "m": minutes}
        category = outcome if outcome in messages else FailureCategory.EXIT_CODE
        return ExecutorUpdate(JobStatus.FAILED, str(FailureCategory(category).label), category, text, exit_code)

    def stop(self, job, reason: str = "") -> None:
        """Nothing runs for real; the cancellation itself is the record."""
