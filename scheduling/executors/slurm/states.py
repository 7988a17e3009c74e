"""What Slurm's job states and pending reasons mean for a portal job, in the portal's words.

Pure tables and functions (no database): the follower (``follow.py``) applies them, unit tests read them."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from gpuportal.text.phrases import Phrase

#: States in which the job has not started yet, runs, or is still being wound down by Slurm.
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED"})

#: A pending reason of Slurm's, said in the portal's words (the raw reason stays in the event's data).
PENDING_REASONS = {
    "None": gettext_noop("Slurm has accepted the job and has not looked at it yet."),
    "Resources": gettext_noop("Slurm waits for the resources it was pinned to: the GPUs of its nodes are busy "
                              "in Slurm."),
    "Priority": gettext_noop("Slurm holds it behind jobs of higher priority in its own queue."),
    "BeginTime": gettext_noop("Slurm holds it until its start time."),
    "Dependency": gettext_noop("Slurm holds it until the jobs it depends on end."),
    "JobHeldUser": gettext_noop("It is held in Slurm by its user."),
    "JobHeldAdmin": gettext_noop("It is held in Slurm by an administrator."),
    "PartitionTimeLimit": gettext_noop("Its max runtime is longer than the Slurm partition allows: it cannot start "
                                       "there."),
    "ReqNodeNotAvail": gettext_noop("A node it was pinned to is not available in Slurm (drained, down or "
                                    "reserved)."),
    "NodeDown": gettext_noop("A node it was pinned to is down in Slurm."),
    "Reservation": gettext_noop("Slurm holds it for a reservation."),
    "QOSMaxGRESPerUser": gettext_noop("Slurm's limits for its account hold it (GPUs per user)."),
    "AssocGrpGRES": gettext_noop("Slurm's limits for its account hold it (GPUs of the account)."),
}


def pending_phrase(reason: str) -> Phrase:
    """Slurm's pending reason as the job page says it."""
    known = PENDING_REASONS.get(reason)
    if known:
        return Phrase(gettext_noop("Pending in Slurm: %(why)s (%(reason)s)"), {"why": Phrase(known), "reason": reason})
    return Phrase(gettext_noop("Pending in Slurm, which gives the reason %(reason)s."), {"reason": reason or "-"})


@dataclass(frozen=True)
class Ending:
    """What an ended Slurm job means for its portal job: ``outcome`` is "succeeded", "failed" (through the
    retry rule with ``category``), "cancelled" (cancelled in Slurm, not by the portal), "requeue" (preempted by
    Slurm: back in the portal's queue where the job allows) or "" (not ended)."""

    outcome: str
    category: str = ""
    message: Phrase | str = ""


def ending(state: str, exit_status: int | None, signal: int | None, nodes: tuple[str, ...] = ()) -> Ending:
    """The meaning of a final state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED,
    BOOT_FAIL, DEADLINE); ``Ending("")`` while the job has not ended."""
    node = ", ".join(nodes) or "-"
    if state == "COMPLETED":
        return Ending("succeeded")
    if state == "FAILED":
        return Ending("failed", "exit_code")
    if state == "CANCELLED":
        return Ending("cancelled", message=Phrase(gettext_noop(
            "Cancelled in Slurm (not by the portal): by its user or an administrator there.")))
    if state == "TIMEOUT":
        return Ending("failed", "timeout", Phrase(gettext_noop(
            "The job ran longer than its max runtime and Slurm stopped it (TIMEOUT).")))
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        return Ending("failed", "node_fault", Phrase(gettext_noop(
            "Node %(node)s failed under the job (Slurm: %(state)s)."), {"node": node, "state": state}))
    if state == "OUT_OF_MEMORY":
        return Ending("failed", "out_of_memory", Phrase(gettext_noop(
            "The job ran out of host memory on %(node)s and Slurm stopped it (OUT_OF_MEMORY)."), {"node": node}))
    if state == "PREEMPTED":
        return Ending("requeue", "preempted", Phrase(gettext_noop(
            "Slurm preempted the job for other work on %(node)s (PREEMPTED)."), {"node": node}))
    if state in ("DEADLINE", "REVOKED", "SPECIAL_EXIT"):
        return Ending("failed", "exit_code", Phrase(gettext_noop("Slurm ended the job with state %(state)s."),
                                                    {"state": state}))
    return Ending("")


def exit_words(exit_status: int | None, signal: int | None) -> str:
    """The decoded wait status in a few words, for evidence ("exit 3", "signal 9")."""
    if signal:
        return f"signal {signal}"
    return "" if exit_status is None else f"exit {exit_status}"
