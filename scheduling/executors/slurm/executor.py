"""The Slurm executor: a job goes to slurmctld as a batch job pinned to the GPUs the portal's engine chose.

The engine decides where a job runs, as on every cluster; Slurm is told exactly that: the nodes
(``nodelist``, ``nodes``), the GPUs on each (``gres=gpu:<type>:<n>``), the max runtime, CPUs and memory. The job
runs as its owner's account on the cluster (``identity.py``) with a token the portal signs for that account.
A ``comment`` ties the Slurm job to the portal job and attempt, so that the follower, the reconciler and the
inventory tell the portal's work from work submitted to Slurm directly. Following is one ``GET /jobs`` per
cluster per sync (``follow.py``), not one request per job: ``observe`` therefore says nothing."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from fleet.models import Node
from gpuportal.text.phrases import Phrase
from scheduling import lifecycle
from scheduling.executors.base import Executor, ExecutorUpdate, port_environment
from scheduling.executors.logs import NOT_STARTED, LogTail, stored_tail
from scheduling.executors.slurm import script as scripts
from scheduling.executors.slurm.client import SlurmClient, SlurmError
from scheduling.executors.slurm.identity import IdentityRefused, cluster_user
from scheduling.jobs import tokens as job_tokens
from scheduling.models import LONG_RUNNING_KINDS, JobAllocation, JobEvent

#: A job's ``gpu_milli`` when it asks for whole GPUs.
WHOLE_GPU = 1000

logger = logging.getLogger(__name__)
#: What a job's environment holds besides the portal's variables: Slurm requires an environment, and a batch
#: script finds its programs through PATH.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PERMISSION_DENIED = 2002
#: Slurm's numbers when slurmctld refused the request's token (slurmrestd answers 500): -1 "Unspecified error" to
#: a read, 5005 "Zero Bytes were transmitted or received" to a submit (both measured on 22.05).
TOKEN_REFUSED = frozenset({-1, 5005})
#: Bytes read from the end of an output file for its tail: enough for the longest tail a page asks for.
TAIL_BYTES = 256 * 1024


class SlurmDispatchError(Exception):
    """Slurm refused the job, or the portal would not send it; the message says why (the job's failure says it)."""


@dataclass(frozen=True)
class Plan:
    """What dispatch needs from the database, read before the dispatch threads start (they read nothing)."""

    user: str
    nodes: tuple[str, ...]
    gres_type: str  # "" when the nodes' GPUs are of different types (then untyped "gpu:<n>")
    token: str  # the job's report token for the portal's progress API
    refused: str = ""  # why the job may not run as anyone on this cluster (then ``user`` is ""): its failure


def gres_type_of(cluster, model: str) -> str:
    """The GRES type Slurm names a catalogue model by on this cluster: the reverse of its ``slurm_models``
    (type → model, case-insensitive), else the model's name in lower case (as Slurm sites name them)."""
    for gres, mapped in (cluster.slurm_models or {}).items():
        if str(mapped).lower() == (model or "").lower():
            return gres
    return (model or "").lower()


def attempt_of(job) -> int:
    """The attempt a dispatch starts: 1 for the first run, one more for each retry or requeue."""
    return job.retry_count + 1


class SlurmExecutor(Executor):
    def client(self, user: str | None = None) -> SlurmClient:
        return SlurmClient(self.cluster, user=user)

    # --- dispatch ----------------------------------------------------------------------------------------

    def prepare(self, jobs) -> None:
        """Read what each job's submission needs (its user on the cluster, its nodes and their GPU types)
        before ``dispatch_many`` sends them from its threads."""
        for job in jobs:
            job.slurm_plan = self.plan(job)

    def plan(self, job) -> Plan:
        """What the job's submission needs; a refused identity is kept in the plan, so that it fails this job's
        dispatch alone and not the others of the batch."""
        nodes = tuple(getattr(job, "placement_nodes", ()) or ())
        models = dict(JobAllocation.objects.filter(job=job, released_at__isnull=True).values_list(
            "gpu__node__name", "gpu__node__gpu_model"))
        if not nodes:
            nodes = tuple(sorted(models))
        types = {gres_type_of(self.cluster, models.get(node) or job.gpu_model) for node in nodes} or {
            gres_type_of(self.cluster, job.gpu_model)}
        try:
            user, refused = cluster_user(self.cluster, job.owner), ""
        except IdentityRefused as exc:
            user, refused = "", str(exc)
        return Plan(user=user, nodes=nodes, gres_type=types.pop() if len(types) == 1 else "",
                    token=job_tokens.token_for(job), refused=refused)

    def submission(self, job, plan: Plan) -> tuple[str, dict, str]:
        """The batch script, the job's Slurm options and the output path ("" without an output directory)."""
        attempt = attempt_of(job)
        node_count = max(1, len(plan.nodes) or job.node_count)
        gpus = max(1, job.gpus_per_node)
        runtime = job.max_runtime_minutes or job.task_type.default_max_runtime_minutes
        environment = {
            "PATH": BASE_PATH, "GPUPORTAL_JOB_ID": str(job.pk), "GPUPORTAL_ATTEMPT": str(attempt),
            "GPUPORTAL_URL": settings.PORTAL_URL, "GPUPORTAL_JOB_TOKEN": plan.token, "NNODES": str(node_count),
            "NPROC_PER_NODE": str(gpus), "WORLD_SIZE": str(node_count * gpus)}
        resume = (job.executor_state or {}).get("resume_from")
        if resume:
            environment["GPUPORTAL_RESUME_FROM"] = resume
        if job.group_index is not None:
            environment["GPUPORTAL_ARRAY_INDEX"] = str(job.group_index)
        environment.update(port_environment(job.ports or []))
        # ``no_requeue``: Slurm would otherwise put the job back in its queue under the same id after a node
        # failure or a preemption, while the portal still counts it running; the portal places it again itself.
        # (22.05 accepts ``"requeue": false`` and ignores it: the job keeps Requeue=1.)
        options = {
            "name": job.name[:200], "comment": scripts.comment_for(job.pk, attempt), "nodes": node_count,
            "no_requeue": True,
            "tasks": node_count, "tasks_per_node": 1,
            "gres": f"gpu:{plan.gres_type}:{gpus}" if plan.gres_type else f"gpu:{gpus}",
            "environment": environment, "current_working_directory": self.cluster.slurm_output_dir or "/tmp",  # noqa: S108 - the node's, not ours
        }
        if plan.nodes:
            options["nodelist"] = ",".join(plan.nodes)
        if runtime:
            options["time_limit"] = int(runtime)
        if job.cpu_milli:
            options["cpus_per_task"] = max(1, math.ceil(job.cpu_milli / 1000))
        if job.memory_mib:
            options["memory_per_node"] = int(job.memory_mib)
        output = ""
        if self.cluster.slurm_output_dir:
            output = os.path.join(self.cluster.slurm_output_dir, f"gpuportal-{job.pk}-{attempt}-%j.out")
            options["standard_output"] = output
        body = scripts.batch_script(job_id=job.pk, attempt=attempt, command=job.command, image=job.image,
                                    container=self.cluster.slurm_container or "none", node_count=node_count,
                                    gpus_per_node=gpus)
        return body, options, output

    def dispatch(self, job) -> dict:
        plan = getattr(job, "slurm_plan", None) or self.plan(job)
        if job.kind in LONG_RUNNING_KINDS or job.gpu_milli < WHOLE_GPU:  # the pass routes none here (clusters_for)
            raise SlurmDispatchError(_("Slurm clusters run batch jobs and array tasks on whole GPUs only; a notebook, "
                                       "a service or a share of a GPU runs on another cluster."))
        if plan.refused:
            raise SlurmDispatchError(plan.refused)
        try:
            body, options, output = self.submission(job, plan)
        except scripts.ScriptError as exc:
            raise SlurmDispatchError(str(exc)) from None
        try:
            result = self.client(plan.user).submit(body, options, plan.user)
        except SlurmError as exc:
            if any(exc.has(number) for number in TOKEN_REFUSED):
                raise SlurmDispatchError(self.token_refused(plan.user)) from None
            raise
        if result.job_id is None:
            if any(problem.number in TOKEN_REFUSED for problem in result.errors):
                raise SlurmDispatchError(self.token_refused(plan.user))
            raise SlurmDispatchError(_("Slurm refused the job: %(words)s") % {
                "words": result.message or _("no reason given")})
        state = {"slurm_job_id": str(result.job_id), "user": plan.user, "attempt": attempt_of(job),
                 "nodes": list(plan.nodes), "output": output.replace("%j", str(result.job_id)) if output else ""}
        if result.errors:  # accepted with a warning (e.g. a time limit above the partition's): kept as evidence
            state["slurm_submit_errors"] = [problem.message for problem in result.errors]
        return state

    def port_upstream(self, job, port) -> str:
        """The job's program listens on its first node itself: that node's address (the host its node agent is
        polled at, else its name, which the cluster's hosts resolve)."""
        nodes = (job.executor_state or {}).get("nodes") or []
        if not nodes:
            return ""
        agent = Node.objects.filter(name=nodes[0]).values_list("agent_url", flat=True).first() or ""
        host = urlsplit(agent).hostname or nodes[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{port['port']}"

    def port_refusal(self, job, port) -> str:
        """A node's address is not the job's own: any program on the node answers there. So a port opens only
        while no other job holds GPUs on that node (another tenant's notebook or TensorBoard could listen on the
        port declared), and never on the port the node's agent is polled at."""
        nodes = (job.executor_state or {}).get("nodes") or []
        if not nodes:
            return ""
        agent = urlsplit(Node.objects.filter(name=nodes[0]).values_list("agent_url", flat=True).first() or "")
        if agent.port == port["port"]:
            return _("Port %(port)d of node %(node)s is its node agent's, not the job's.") % {
                "port": port["port"], "node": nodes[0]}
        if JobAllocation.objects.filter(gpu__node__name=nodes[0], released_at__isnull=True).exclude(
                job_id=job.pk).exists():
            return _("Node %(node)s runs other jobs too: on Slurm a job's ports open only while it is alone on its "
                     "node, where no other program can be the one that answers.") % {"node": nodes[0]}
        return ""

    def token_refused(self, user: str) -> str:
        """Slurm's words for a refused token ("Unspecified error", "Zero Bytes were transmitted or received") said
        truly: slurmctld refused the token the portal signed for this account."""
        return _("Cluster %(c)s refused the portal's token for account %(user)s: the cluster's key may not be the "
                 "one the portal holds, or the account may not exist on the cluster. Ask the platform admins.") % {
            "c": self.cluster.name, "user": user}

    # --- following ---------------------------------------------------------------------------------------

    def observe(self, job, now) -> ExecutorUpdate | None:
        """Nothing per job: ``follow.sync_cluster`` reads every job of the cluster in one request."""
        return None

    # --- stopping ----------------------------------------------------------------------------------------

    def stop(self, job, reason: str = "") -> None:
        """Cancel the attempt's Slurm job (as its user; where Slurm refuses, as the portal's reading account,
        which may cancel any job when it is the cluster's operator) and record it."""
        state = job.executor_state or {}
        slurm_id = state.get("slurm_job_id")
        if not slurm_id:
            return
        cancelled = self.cancel(int(slurm_id), state.get("user") or None)
        text = (gettext_noop("Cancelled Slurm job %(id)s on cluster %(c)s.") if cancelled
                else gettext_noop("Slurm job %(id)s on cluster %(c)s had already ended."))
        done = Phrase(text, {"id": slurm_id, "c": self.cluster.name})
        said = Phrase(gettext_noop("%(done)s %(reason)s"), {"done": done, "reason": reason}) if reason else done
        lifecycle.note(job, JobEvent.Kind.EXECUTOR, said, data={"slurm_job_id": slurm_id, "cancelled": cancelled})

    def cancel(self, slurm_id: int, user: str | None) -> bool:
        try:
            return self.client(user).cancel(slurm_id, user)
        except SlurmError as exc:
            if user is None or not (exc.has(PERMISSION_DENIED) or exc.has(-1) or not exc.http_status):
                raise
        return self.client().cancel(slurm_id)

    # --- logs --------------------------------------------------------------------------------------------

    def read_log(self, job, tail: int) -> LogTail:
        """The tail of the attempt's output file where the portal shares the cluster's output directory;
        otherwise said as "no log access" (the log is on the cluster, where the portal cannot read)."""
        state = job.executor_state or {}
        attempt = int(state.get("attempt") or attempt_of(job))
        if job.status in NOT_STARTED or not state.get("slurm_job_id"):
            return stored_tail(job, tail)
        path = state.get("output") or ""
        if not path:
            return LogTail(attempt, error=_("No log access: cluster %(c)s keeps its jobs' output where the portal "
                                            "cannot read it (no output directory is set).") % {"c": self.cluster.name})
        lines = read_tail(path, tail)
        if lines is None:
            kept = stored_tail(job, tail)
            if kept.lines:
                return kept
            return LogTail(attempt, error=_("No log access: the portal cannot read this attempt's output on cluster "
                                            "%(c)s.") % {"c": self.cluster.name})
        return LogTail(attempt, lines)


def read_tail(path: str, tail: int) -> tuple[str, ...] | None:
    """The last ``tail`` lines of a file, or None when it cannot be read."""
    try:
        with Path(path).open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first line read is cut
    return tuple(lines[-tail:]) if tail else ()
