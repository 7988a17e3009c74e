"""Jobs that wait for other jobs (Slurm's ``--dependency``): the check of a submission's ``depends_on``, the
write of its edges, what the pass is told of them every time, the end of a job whose dependency can never be met,
and the chain the job page and the API show.

When a dependency is met is decided in one place, the pure ``engine.dependencies.verdict``, from the statuses of
the jobs it names as they are now: nothing about it is stored but the edge (``JobDependency``), so a parent's
change of status needs no write here and the pass, reading the statuses every time (``waiting_dependencies``),
cannot act on a stale answer. A submission may name only jobs its submitter may see (others read as unknown),
and a batch's specs may name each other (``@<index>``) as long as none waits for itself through the others.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from django.db.models import Q
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from gpuportal.storage.db import bulk_insert
from gpuportal.text.phrases import Phrase
from gpuportal.web.validation import refuse
from scheduling import engine, lifecycle
from scheduling.engine.dependencies import (
    AFTER_CORR,
    CONDITION_WORDS,
    CONDITIONS,
    ENDED,
    MET,
    NEVER,
    STATUS_WORDS,
    find_cycle,
    parse,
    verdict,
)
from scheduling.engine.model import WaitDecision
from scheduling.engine.reasons import WaitReason
from scheduling.jobs.limits import MAX_CHAIN, MAX_DEPENDENCIES, MAX_DEPENDS_ON_TEXT, MAX_ID
from scheduling.models import (
    WAITING_STATUSES,
    DependencyCondition,
    Job,
    JobDependency,
    JobEvent,
    JobStatus,
    WorkloadKind,
    label_of,
)

FIELD = "depends_on"
#: How far along its way a status is: an array's dependency names the status of its least advanced unfinished task.
_PROGRESS = {s: n for n, s in enumerate((JobStatus.PENDING, JobStatus.QUEUED, JobStatus.PREEMPTED, JobStatus.ADMITTED,
                                         JobStatus.DISPATCHING, JobStatus.RUNNING, JobStatus.SUCCEEDED,
                                         JobStatus.FAILED, JobStatus.CANCELLED))}


@dataclass(frozen=True)
class Edge:
    """One checked dependency of a submission: on a stored job (``on_job``; with ``whole_array`` on every task of
    its array; for ``aftercorr``, ``tasks`` maps each index of the new array to the other array's task), or on
    another spec of the same batch (``spec``, its index)."""

    condition: str
    reference: str
    on_job: Job | None = None
    whole_array: bool = False
    spec: int | None = None
    tasks: Mapping[int, int] = field(default_factory=dict)


class DependsOn(TypedDict):
    """A job's dependency as its JSON gives it."""

    job: int
    condition: str
    satisfied: bool


@dataclass(frozen=True)
class Link:
    """A job of a dependency chain as the job page shows it: how far from the job (``depth``), the job on the
    other side of the edge, the condition and whether it is met."""

    depth: int
    job: Job
    condition: str
    whole_array: bool
    state: str

    @property
    def condition_label(self) -> str:
        return label_of(DependencyCondition, self.condition)

    @property
    def satisfied(self) -> bool:
        return self.state == MET

    @property
    def never(self) -> bool:
        return self.state == NEVER


@dataclass(frozen=True)
class Chain:
    """What a job waits for (``upstream``, nearest first) and what waits for it (``downstream``), as far as the
    reader may see and ``MAX_CHAIN`` jobs each way."""

    upstream: list[Link]
    downstream: list[Link]

    def __bool__(self) -> bool:
        return bool(self.upstream or self.downstream)


# -- the check of a submission ---------------------------------------------------------------------------------------

def check(user, data: Mapping, kind: str, indices: Sequence[int], batch_size: int | None = None) -> list[Edge]:
    """The ``depends_on`` of a submission, checked: each job it names exists and ``user`` may see it, an array's
    task (``812_3``) exists, ``aftercorr`` joins two arrays with the same indices, no dependency is already
    impossible, and ``@<index>`` (another spec) is used in a batch only. Refuses the field, naming what is wrong."""
    text = data.get(FIELD)
    if text in (None, ""):
        return []
    if not isinstance(text, str) or len(text) > MAX_DEPENDS_ON_TEXT:
        refuse(FIELD, _("Dependencies must be text of at most %(max)d characters.") % {"max": MAX_DEPENDS_ON_TEXT})
    try:
        pairs = parse(text)
    except ValueError as bad:
        refuse(FIELD, _("%(part)r is not a dependency: write condition:job[:job...], for example "
                        "afterok:812:813,afterany:820 (conditions: %(conditions)s).") % {
            "part": str(bad), "conditions": ", ".join(CONDITIONS)})
    if len(pairs) > MAX_DEPENDENCIES:
        refuse(FIELD, _("A job may wait for at most %(max)d jobs; this names %(n)d.") % {
            "max": MAX_DEPENDENCIES, "n": len(pairs)})
    named = {int(ref.partition("_")[0]) for _condition, ref in pairs if not ref.startswith("@")}
    possible = [pk for pk in named if pk <= MAX_ID]  # a larger number is no job's id (nor the database's type)
    visible = Job.objects.visible_to(user).filter(pk__in=possible).in_bulk() if possible else {}
    unknown = sorted(named - visible.keys())
    if unknown:  # a job the submitter may not see reads exactly like one that does not exist
        refuse(FIELD, _("Unknown job %(jobs)s.") % {"jobs": ", ".join(f"#{pk}" for pk in unknown)})
    return [_edge(condition, ref, visible, kind, indices, batch_size) for condition, ref in pairs]


def _edge(condition: str, ref: str, visible: dict[int, Job], kind: str, indices: Sequence[int],
          batch_size: int | None) -> Edge:
    if condition == AFTER_CORR and kind != WorkloadKind.ARRAY:
        refuse(FIELD, _("aftercorr joins the tasks of two arrays by index; this submission is not an array."))
    if ref.startswith("@"):
        spec = int(ref[1:])
        if batch_size is None:
            refuse(FIELD, _("%(ref)s names another spec of a batch: it is understood only in a batch submission "
                            "(POST /api/jobs/batch/, gpuportal submit --batch).") % {"ref": ref})
        if spec >= batch_size:
            refuse(FIELD, _("%(ref)s names no spec: the batch has %(n)d.") % {"ref": ref, "n": batch_size})
        return Edge(condition, ref, spec=spec)
    number, _sep, index = ref.partition("_")
    job = visible[int(number)]
    first, tasks = _array_of(job)
    if _sep:
        if not tasks:
            refuse(FIELD, _("#%(job)d is not an array task, so %(ref)s names nothing.") % {"job": job.pk, "ref": ref})
        if int(index) not in tasks:
            refuse(FIELD, _("The array of #%(job)d has no task %(index)s.") % {"job": job.pk, "index": index})
        job = Job.objects.get(pk=tasks[int(index)][0])
        first, tasks = None, {}
    if condition == AFTER_CORR:
        if not tasks:
            refuse(FIELD, _("aftercorr names an array (the id of any of its tasks); #%(job)d is not an array "
                            "task.") % {"job": job.pk})
        missing = [i for i in indices if i not in tasks]
        if missing:
            refuse(FIELD, _("aftercorr:%(ref)s needs the other array to have every index of this one; it lacks "
                            "%(missing)s.") % {"ref": ref, "missing": ", ".join(map(str, missing[:10]))})
        edge = Edge(condition, ref, job, tasks={i: tasks[i][0] for i in indices})
        statuses = [tasks[i][1] for i in indices]
    else:
        whole = first == job.pk  # the id an array's submission returned: Slurm's array job id, every task
        edge = Edge(condition, ref, job, whole_array=whole)
        statuses = [status for _pk, status in tasks.values()] if whole else [job.status]
    if verdict(condition, statuses) == NEVER:
        refuse(FIELD, _("%(condition)s:%(ref)s can never be met: #%(job)d %(status)s.") % {
            "condition": condition, "ref": ref, "job": job.pk, "status": _(STATUS_WORDS[_least_advanced(statuses)])})
    return edge


def _array_of(job: Job) -> tuple[int | None, dict[int, tuple[int, str]]]:
    """The first task's id of ``job``'s array and its tasks by index, as (id, status); (None, {}) for a job that
    is not an array task."""
    if job.kind != WorkloadKind.ARRAY or job.group_id is None:
        return None, {}
    rows = list(Job.objects.filter(group_id=job.group_id).order_by("id").values_list("group_index", "id", "status"))
    return rows[0][1], {index: (pk, status) for index, pk, status in rows}


def check_batch(requests: Sequence) -> dict[str, list[str]]:
    """The refusals of a batch's specs that name each other (``@<index>``): a spec that waits for itself through
    others, or ``aftercorr`` on a spec that is not an array with this one's indices (``requests``: the batch's
    validated ``submission.JobRequest``s, in order). Keyed as the batch names fields (``jobs.<index>.depends_on``)."""
    refused: dict[str, list[str]] = {}
    graph = {i: [e.spec for e in request.depends_on if e.spec is not None] for i, request in enumerate(requests)}
    cycle = find_cycle(graph)
    if cycle:
        path = " -> ".join(f"jobs.{i}" for i in cycle)
        for i in dict.fromkeys(cycle):
            refused[f"jobs.{i}.{FIELD}"] = [_("These specs wait for each other (%(path)s): none of them could ever "
                                              "start.") % {"path": path}]
    for i, request in enumerate(requests):
        for edge in request.depends_on:
            other = requests[edge.spec] if edge.spec is not None else None
            if edge.condition == AFTER_CORR and other is not None and (
                    other.kind != WorkloadKind.ARRAY or set(request.indices) - set(other.indices)):
                refused.setdefault(f"jobs.{i}.{FIELD}", []).append(_(
                    "aftercorr:%(ref)s needs that spec to be an array with every index of this one.") % {
                    "ref": edge.reference})
    return refused


# -- the write -------------------------------------------------------------------------------------------------------

def store(requests: Sequence, jobs: Sequence[Sequence[Job]]) -> None:
    """Write the edges of stored submissions (``jobs``: each request's jobs, in order), in the transaction that
    stored them: the pass that runs on its commit already sees them. One row per job and job it waits for (an
    array that waits for a whole array: one row per task, naming the other array's first task)."""
    rows = []
    for request, members in zip(requests, jobs, strict=True):
        for edge in request.depends_on:
            other = jobs[edge.spec] if edge.spec is not None else None
            tasks = edge.tasks or ({j.group_index: j.pk for j in other} if other is not None else {})
            for job in members:
                if edge.condition == AFTER_CORR:
                    on, whole = tasks[job.group_index], False
                elif other is not None:
                    on, whole = other[0].pk, requests[edge.spec].kind == WorkloadKind.ARRAY
                else:
                    on, whole = edge.on_job.pk, edge.whole_array
                rows.append(JobDependency(job_id=job.pk, on_job_id=on, condition=edge.condition, whole_array=whole))
    bulk_insert(JobDependency, rows)


# -- reads: what the pass is told, and what a job's JSON and page show -----------------------------------------------

@dataclass(frozen=True)
class _State:
    row: tuple  # (job id, on job id, condition, whole array, on job's status, on job's group)
    state: str
    on_status: str
    waits_on: tuple[int, ...]


def _states(edges: Q) -> list[_State]:
    """The edges ``edges`` selects with their state now, read in two small queries (the edges with their jobs'
    statuses; the tasks of the arrays waited for as a whole)."""
    rows = list(JobDependency.objects.filter(edges).order_by("job_id", "id").values_list(
        "job_id", "on_job_id", "condition", "whole_array", "on_job__status", "on_job__group_id"))
    groups = {row[5] for row in rows if row[3]}
    tasks: dict[int, list[tuple[int, str]]] = defaultdict(list)
    if groups:
        for group_id, pk, status in Job.objects.filter(group_id__in=groups).order_by().values_list(
                "group_id", "id", "status"):
            tasks[group_id].append((pk, status))
    judged: dict[tuple, tuple[str, str, tuple[int, ...]]] = {}  # the tasks of an array waiting for another share
    found = []
    for row in rows:
        key = (row[1], row[2], row[3])
        if key not in judged:
            members = tasks[row[5]] if row[3] else [(row[1], row[4])]
            statuses = [status for _pk, status in members]
            state = verdict(row[2], statuses)
            judged[key] = (state, _least_advanced([s for s in statuses if s not in ENDED] if state != NEVER
                                                  else statuses), tuple(pk for pk, s in members if s not in ENDED))
        found.append(_State(row, *judged[key]))
    return found


def _least_advanced(statuses: Iterable[str]) -> str:
    """The status of the least advanced job (of an ended array: the first that ended otherwise than asked)."""
    statuses = list(statuses)
    failed = [s for s in statuses if s in (JobStatus.FAILED, JobStatus.CANCELLED)]
    if failed:
        return failed[0]
    return min(statuses, key=lambda s: _PROGRESS.get(s, 0)) if statuses else JobStatus.SUCCEEDED


def waiting_dependencies(job_ids: Iterable[int] | None = None) -> dict[int, tuple[engine.Dependency, ...]]:
    """What the pass tells the engine of each waiting job's dependencies (of ``job_ids`` only, when given), read
    afresh every pass from the statuses of the jobs they name: a parent that ended changes what the engine is
    told although no row of the waiting job changed."""
    edges = Q(job__status__in=WAITING_STATUSES) if job_ids is None else Q(job_id__in=list(job_ids))
    by_job: dict[int, list[engine.Dependency]] = defaultdict(list)
    for found in _states(edges):
        by_job[found.row[0]].append(engine.Dependency(
            on_job=found.row[1], condition=found.row[2], state=found.state, on_status=found.on_status,
            waits_on=found.waits_on))
    return {job_id: tuple(found) for job_id, found in by_job.items()}


def depends_on_of(job_ids: Iterable[int]) -> dict[int, list[DependsOn]]:
    """Each job's dependencies as its JSON gives them, for many jobs in two queries."""
    ids = list(job_ids)
    found: dict[int, list[DependsOn]] = {pk: [] for pk in ids}
    if ids:
        for state in _states(Q(job_id__in=ids)):
            found[state.row[0]].append(DependsOn(job=state.row[1], condition=state.row[2],
                                                 satisfied=state.state == MET))
    return found


def chain(job: Job, reader) -> Chain:
    """The jobs ``job`` waits for and the jobs that wait for it, each way as far as ``MAX_CHAIN`` jobs, those the
    reader may see only."""
    if not _has_edges(job):
        return Chain(upstream=[], downstream=[])
    return Chain(upstream=_walk(job, reader, upstream=True), downstream=_walk(job, reader, upstream=False))


def _has_edges(job: Job) -> bool:
    """Whether any edge touches ``job`` either way (the first level of both walks): most jobs have none, and one
    small query spares their page the two walks' joins, a fifth of what the page cost to build."""
    edges = Q(job_id=job.pk) | Q(on_job_id=job.pk)
    if job.group_id:  # waited for as a whole array: an edge names any task of its group
        edges |= Q(whole_array=True, on_job__group_id=job.group_id)
    return JobDependency.objects.filter(edges).exists()


def _walk(job: Job, reader, upstream: bool) -> list[Link]:
    """The chain one way, level by level, through the jobs the reader may see only: the walk stops at a job they
    may not see, so neither it nor a gap in the levels tells of it."""
    links: list[tuple[int, int, str, bool, str]] = []
    seen, frontier, depth = {job.pk}, [job.pk], 0
    visible = Job.objects.visible_to(reader)
    while frontier and len(links) < MAX_CHAIN:
        depth += 1
        edges = Q(job_id__in=frontier) if upstream else Q(on_job_id__in=frontier) | Q(
            whole_array=True, on_job__group__members__in=frontier)
        found = []
        for state in _states(edges):
            other = state.row[1] if upstream else state.row[0]
            if other not in seen:
                seen.add(other)
                found.append((depth, other, state.row[2], state.row[3], state.state))
        shown = set(visible.filter(pk__in=[link[1] for link in found]).values_list("pk", flat=True))
        found = [link for link in found if link[1] in shown][:MAX_CHAIN - len(links)]
        links += found
        frontier = [link[1] for link in found]
    jobs = Job.objects.filter(pk__in=[link[1] for link in links]).in_bulk()
    return [Link(depth, jobs[pk], condition, whole, state) for depth, pk, condition, whole, state in links
            if pk in jobs]


# -- a dependency that can never be met ends its job -----------------------------------------------------------------

def end_unmeetable(waiting: list[WaitDecision], now) -> list[WaitDecision]:
    """End the jobs the pass found waiting for what can never happen (``WaitReason.DEPENDENCY_NEVER``: a job they
    need to succeed failed, or one they need to fail succeeded), as Slurm's ``DependencyNeverSatisfied``: cancelled
    with that reason on their timeline and a line on the timeline of the job that ended otherwise. The jobs that
    waited for an ended one in turn are ended in the same pass. Returns the decisions of the jobs that wait on."""
    never = [w.job_id for w in waiting if w.reason == WaitReason.DEPENDENCY_NEVER]
    if not never:
        return waiting
    ended: set[int] = set()
    while never:
        moved = _end(never, now)
        ended |= moved
        groups = set(Job.objects.filter(pk__in=moved, group_id__isnull=False).values_list("group_id", flat=True))
        next_ids = set(JobDependency.objects.filter(
            Q(on_job_id__in=moved) | Q(whole_array=True, on_job__group_id__in=groups),
            job__status__in=WAITING_STATUSES).values_list("job_id", flat=True)) - ended
        never = sorted({s.row[0] for s in _states(Q(job_id__in=next_ids)) if s.state == NEVER})
    return [w for w in waiting if w.job_id not in ended]


#: The reason of a job ended because its dependency can never be met (its owner is told: they did not cancel it).
NEVER_SATISFIED = gettext_noop(
    "Ended: it waited for #%(on_job)d %(condition)s, but #%(on_job)d %(on_status)s, so this dependency can never "
    "be satisfied (DependencyNeverSatisfied).")


def _end(job_ids: list[int], now) -> set[int]:
    """Cancel the waiting jobs of ``job_ids`` whose dependency can never be met; the ids of those ended."""
    first_never: dict[int, _State] = {}
    for state in _states(Q(job_id__in=job_ids)):
        if state.state == NEVER:
            first_never.setdefault(state.row[0], state)
    jobs = list(Job.objects.filter(pk__in=first_never, status__in=WAITING_STATUSES).select_related("tenant"))
    reasons, data = {}, {}
    for job in jobs:
        state = first_never[job.pk]
        reasons[job.pk] = Phrase(NEVER_SATISFIED, _words(state))
        data[job.pk] = {"code": WaitReason.DEPENDENCY_NEVER.value, "on_job": state.row[1],
                        "condition": state.row[2]}
    moved: set[int] = set()
    by_status = defaultdict(list)
    for job in jobs:
        by_status[job.status].append(job)
    for group in by_status.values():
        moved |= {event.job_id for event in lifecycle.transition_many(
            group, JobStatus.CANCELLED, reasons, at=now, data=data, skip_moved=True)}
    parents = Job.objects.select_related("tenant").in_bulk({first_never[pk].row[1] for pk in moved})
    notes = []
    for job in (j for j in jobs if j.pk in moved):
        state = first_never[job.pk]
        parent = parents[state.row[1]]
        words = _words(state) | {"job": job.pk, "tenant": job.tenant.name}
        # another tenant's job is not named on this one's timeline (its id is not this tenant's to see)
        text = Phrase(gettext_noop(
            "Job #%(job)d waited for this job %(condition)s and was ended: this job %(on_status)s.")
            if job.tenant_id == parent.tenant_id else gettext_noop(
            "A job of tenant %(tenant)s waited for this job %(condition)s and was ended: this job %(on_status)s."),
            words)
        notes.append((parent, JobEvent.Kind.DEPENDENCY, text, {"dependent": job.pk, "condition": state.row[2]}))
    lifecycle.note_many(notes, at=now)
    return moved


def _words(state: _State) -> dict:
    return {"on_job": state.row[1], "condition": Phrase(CONDITION_WORDS[state.row[2]]),
            "on_status": Phrase(STATUS_WORDS.get(state.on_status, state.on_status))}
