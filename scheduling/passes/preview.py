"""What the next scheduling pass would do, with a change not made yet: the engine on the world that pass loads.

The pass (``scheduler.run_pass``) reads the world through ``load_snapshots`` and runs the pure engine on it, so
running the engine here on the same snapshots, changed as a decision would change the database, says what the
pass after that decision does: whom it admits, whom it preempts, where everyone else waits and until when.

Two things read it: the impact preview of a request (``governance.impact``: a higher priority, a burst, a
reservation, a longer runtime, a quota) and the submit form, which warns before a new job would stop one of its
submitter's own running jobs (``own_preemptions``). Nothing is written.

A preemptor is not admitted in the pass that stops its victims: the engine holds the freed GPUs for it and it
waits ("preemption pending"); the task that ran the pass asks for another at once, and that one admits it.
So "starts now" for a job means admitted by the next pass, or right after the preemptions that pass makes
for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.utils import timezone

from fleet.models import Cluster
from scheduling import engine
from scheduling.models import Job, JobStatus, WorkloadKind
from scheduling.passes.snapshots import (
    _expected_runtime,
    _preemptible,
    clusters_for,
    healthy_gpus_of,
    home_cluster,
    load_snapshots,
    runtime_estimates,
    waiting_job,
)

World = dict[str, engine.Snapshot]
#: A change of the world the pass would see (every cluster's snapshot); it returns a new world.
WorldChange = Callable[[World], World]
#: A change of one cluster's snapshot, applied to every cluster (``each_cluster``).
Change = Callable[[engine.Snapshot], engine.Snapshot]


def each_cluster(change: Change) -> WorldChange:
    return lambda world: {name: change(snapshot) for name, snapshot in world.items()}


@dataclass(frozen=True)
class Outcome:
    """What the next pass does with one waiting job: ``starts`` "now" (admitted), "after_preemption" (it
    stops ``victims`` running jobs, then starts in the pass right after) or "waits" (with its reason, its
    queue positions and likely start; None when none can be estimated)."""

    job_id: int
    starts: str
    victims: tuple[int, ...] = ()
    reason: str = ""
    message: str = ""
    position: int | None = None
    tenant_position: int | None = None
    estimated_start: float | None = None
    earliest_start: float | None = None
    latest_start: float | None = None


@dataclass(frozen=True)
class NextPass:
    """The next pass on the world as it is (``before``) and as the change would make it (``after``), per
    cluster, with the snapshots each ran on."""

    world: World
    changed: World
    before: dict[str, engine.PassResult]
    after: dict[str, engine.PassResult]

    @staticmethod
    def _admitted(results: dict[str, engine.PassResult]) -> set[int]:
        return {a.job_id for r in results.values() for a in r.admissions}

    def admitted(self, changed: bool = True) -> set[int]:
        """Jobs the pass admits."""
        return self._admitted(self.after if changed else self.before)

    def preemptions(self, changed: bool = True) -> list:
        """``engine.Preemption`` rows the pass makes (victim, preemptor, rule)."""
        return [p for r in (self.after if changed else self.before).values() for p in r.preemptions]

    def outcome(self, job_id: int, changed: bool = True) -> Outcome | None:
        """What the pass does with waiting job ``job_id`` (None for a job that is not waiting)."""
        results = self.after if changed else self.before
        for result in results.values():
            if any(a.job_id == job_id for a in result.admissions):
                return Outcome(job_id, "now")
            wait = result.wait_for(job_id)
            if wait is None:
                continue
            victims = tuple(p.victim_id for p in result.preemptions if p.preemptor_id == job_id)
            return Outcome(job_id, "after_preemption" if victims else "waits", victims, wait.reason.value,
                           wait.message, wait.position, wait.tenant_position, wait.estimated_start,
                           wait.earliest_start, wait.latest_start)
        return None

    def jobs(self) -> dict[int, engine.RunningJob | engine.WaitingJob]:
        """Every running and waiting job of both worlds, by id."""
        found: dict = {}
        for world in (self.world, self.changed):
            for snapshot in world.values():
                for job in (*snapshot.running, *snapshot.waiting):
                    found.setdefault(job.id, job)
        return found


def next_pass(change: WorldChange | None = None, now=None, world: World | None = None,
              compare: bool = True) -> NextPass:
    """The engine on the snapshots the next pass would load (or ``world``), changed and (``compare``) as they
    are; without ``compare`` the world as it is is not scheduled (``before`` is empty)."""
    if world is None:
        world, _nodes, _gpus = load_snapshots(now or timezone.now())
    changed = change(world) if change is not None else world
    after = {name: engine.schedule(snapshot) for name, snapshot in changed.items()}
    before = (after if changed is world else {name: engine.schedule(snapshot) for name, snapshot in world.items()}
              ) if compare else {}
    return NextPass(world, changed, before, after)


def task_type_fields(job: Job, task_type, now=None) -> dict:
    """``job``'s engine fields in another task type (``priority``, ``preemptible``, ``task_type``,
    ``expected_runtime``), as the next pass would load them once the type is changed."""
    row = {"kind": job.kind, "task_type__code": task_type.code, "task_type__preemptible": task_type.preemptible,
           "gpus_per_node": job.gpus_per_node, "node_count": job.node_count}
    return {"priority": task_type.priority, "preemptible": _preemptible(row), "task_type": task_type.code,
            "expected_runtime": _expected_runtime(row, runtime_estimates(now or timezone.now()))}


# --- a new job ---------------------------------------------------------------------------------------------


def new_waiting_jobs(owner_id: int, request, now, estimates: dict | None = None) -> list[engine.WaitingJob]:
    """The waiting jobs a validated submission (``submission.JobRequest``) would add, as the next pass would
    load them: one per member (a service's replicas, an array's tasks), with ids below zero."""
    estimates = runtime_estimates(now) if estimates is None else estimates
    task_type = request.task_type
    members = (request.replicas if request.kind == WorkloadKind.SERVICE
               else len(request.indices) if request.kind == WorkloadKind.ARRAY else 1)
    row = {  # the row the pass reads once the job is stored (``snapshots.waiting_job``), as submission fills it
        "tenant__name": request.project.tenant.name, "gpu_model": request.gpu_model,
        "gpus_per_node": request.gpus_per_node, "node_count": request.node_count, "priority": task_type.priority,
        "task_type__code": task_type.code, "task_type__preemptible": task_type.preemptible, "submitted_at": now,
        "gpu_milli": request.gpu_milli,
        "cpu_milli": request.cpu_millicores or task_type.cpu_milli_per_gpu * request.gpus_per_node,
        "memory_mib": request.memory_mib or task_type.memory_mib_per_gpu * request.gpus_per_node,
        "topology": request.topology, "max_runtime_minutes": request.max_runtime_minutes, "held_by": "",
        "status": JobStatus.PENDING if task_type.requires_approval else JobStatus.QUEUED, "executor_state": {},
        "spare_own_jobs": request.spare_own_jobs, "kind": request.kind, "group_id": "new", "group__name": "",
        "group__parallelism": request.array_parallelism, "accept_models": request.accept_models, "owner_id": owner_id}
    return [waiting_job({**row, "id": -(i + 1)}, estimates, now, {}) for i in range(members)]


def with_new_jobs(jobs: Iterable[engine.WaitingJob], kind: str = WorkloadKind.BATCH, asked: str = "") -> WorldChange:
    """Add waiting jobs to the cluster the pass would route them to: the one the submission ``asked`` for, else
    ``snapshots.home_cluster`` among the clusters that can run its ``kind`` (``snapshots.clusters_for``)."""
    jobs = list(jobs)
    executors = dict(Cluster.objects.values_list("name", "executor"))

    def change(world: World) -> World:
        healthy = healthy_gpus_of(world)
        added: dict[str, list] = {}
        for job in jobs:
            names = [name for name in clusters_for(executors, kind, job.gpu_milli) if name in world]
            added.setdefault(asked or home_cluster(healthy, names, job.gpu_model), []).append(job)
        return {name: dataclasses.replace(snapshot, waiting=(*snapshot.waiting, *added.get(name, ())))
                if name in added else snapshot for name, snapshot in world.items()}
    return change


def own_preemptions(user, request, now=None) -> list:
    """The running jobs of ``user`` that the next pass would stop to start this submission (a validated
    ``submission.JobRequest``), oldest first; empty when it spares them or stops none."""
    now = now or timezone.now()
    preview = next_pass(with_new_jobs(new_waiting_jobs(user.pk, request, now), request.kind,
                                      request.cluster.name if request.cluster else ""), now, compare=False)
    victims = {p.victim_id for p in preview.preemptions() if p.preemptor_id < 0}
    if not victims:
        return []
    return list(Job.objects.filter(pk__in=victims, owner=user).select_related("tenant").order_by("pk"))
