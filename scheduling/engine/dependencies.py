"""When a job's dependency on another job is met, as Slurm's ``--dependency`` decides it: pure, so that the pass's
load step, the API and the job page read one rule.

A dependency names a job (``afterok:812``), a whole array (its first task's id, as Slurm's array job id) or, for
``aftercorr``, the task of another array with the same index. Its state is one of ``met`` (the job may start as far
as this dependency goes), ``waiting`` (not yet: the jobs it names have not ended as asked) and ``never`` (they ended
otherwise, so it can never be met: Slurm's ``DependencyNeverSatisfied``; the pass then ends the job).
"""

from __future__ import annotations

from collections.abc import Iterable

AFTER_OK, AFTER_ANY, AFTER_NOT_OK, AFTER_CORR = "afterok", "afterany", "afternotok", "aftercorr"
#: The conditions, in the order the docs list them.
CONDITIONS = (AFTER_OK, AFTER_ANY, AFTER_NOT_OK, AFTER_CORR)

MET, WAITING, NEVER = "met", "waiting", "never"

#: The statuses of a job that ended (the engine names them as ``scheduling.models.JobStatus`` stores them).
SUCCEEDED, FAILED, CANCELLED = "succeeded", "failed", "cancelled"
ENDED = frozenset({SUCCEEDED, FAILED, CANCELLED})


def verdict(condition: str, statuses: Iterable[str]) -> str:
    """The state of a dependency with ``condition`` on jobs now in ``statuses`` (one job, or every task of an
    array). ``afterok`` and ``aftercorr`` need every one to succeed and can never be met once one failed or was
    cancelled; ``afterany`` needs every one ended; ``afternotok`` needs every one ended and one of them not
    succeeded, and can never be met once all succeeded."""
    statuses = list(statuses)
    ended = all(status in ENDED for status in statuses)
    if condition in (AFTER_OK, AFTER_CORR):
        if any(status in (FAILED, CANCELLED) for status in statuses):
            return NEVER
        return MET if ended else WAITING
    if not ended:
        return WAITING
    if condition == AFTER_NOT_OK:
        return MET if any(status != SUCCEEDED for status in statuses) else NEVER
    return MET


def parse(spec: str) -> list[tuple[str, str]]:
    """``"afterok:812:813,afterany:820"`` as (condition, reference) pairs in the order given; a reference is a job
    id (``812``) or an array's task (``812_3``, Slurm's form), or, in a batch of specs, ``@<index>`` (another spec
    of the same batch). ``?`` (Slurm's "any of") is not supported. ValueError naming the part that is not one."""
    found: list[tuple[str, str]] = []
    for part in (p.strip() for p in spec.replace(" ", "").split(",")):
        if not part:
            continue
        condition, _sep, refs = part.partition(":")
        if condition not in CONDITIONS or not refs:
            raise ValueError(part)
        for ref in refs.split(":"):
            if not _is_reference(ref):
                raise ValueError(f"{condition}:{ref}")
            if (condition, ref) not in found:
                found.append((condition, ref))
    return found


def _is_reference(ref: str) -> bool:
    number, _sep, index = ref.removeprefix("@").partition("_")
    if ref.startswith("@"):
        return number.isascii() and number.isdigit() and not _sep and len(number) <= 6
    return (number.isascii() and number.isdigit() and len(number) <= 12
            and (not _sep or (index.isascii() and index.isdigit() and len(index) <= 7)))


def find_cycle(edges: dict[int, Iterable[int]]) -> list[int] | None:
    """A cycle in ``edges`` (node -> the nodes it depends on), as the nodes along it (the first repeated at the
    end), or None: submissions that wait for each other would wait for ever."""
    state: dict[int, int] = {}  # 1: on the path being walked, 2: done
    for start in edges:
        if state.get(start):
            continue
        path, stack = [start], [iter(edges.get(start, ()))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges.get(nxt, ())))
    return None


#: The words of a dependency's wait reason (``reasons.WORDS``): what the condition asks of the job it names, and
#: that job's status (``scheduling.models.JobStatus`` values).
CONDITION_WORDS = {AFTER_OK: "to succeed", AFTER_CORR: "to succeed", AFTER_ANY: "to end", AFTER_NOT_OK: "to fail"}
STATUS_WORDS = {"pending": "pending approval", "queued": "queued", "admitted": "admitted to start",
                "dispatching": "dispatching", "running": "running", "preempted": "preempted",
                SUCCEEDED: "succeeded", FAILED: "failed", CANCELLED: "was cancelled"}
