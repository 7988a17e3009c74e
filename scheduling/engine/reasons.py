"""Wait-reason codes and the sentences that explain them.

Each sentence is a template filled with the numbers the engine found, so a user reads
"Tenant vision uses 16 of its 16 A100 GPUs; this job needs 8 more …" rather than a bare code. The
templates are marked with ``gettext_noop`` (a local identity function: the engine may not import Django)
so ``makemessages`` collects them; the portal renders them in the reader's language.
"""

from __future__ import annotations

from enum import StrEnum


def gettext_noop(message: str) -> str:
    return message


class WaitReason(StrEnum):
    QUOTA_EXCEEDED = "quota_exceeded"
    NO_QUOTA = "no_quota"
    INSUFFICIENT_GPUS = "insufficient_gpus"
    GANG_UNPLACEABLE = "gang_unplaceable"
    PRIORITY = "priority"
    EXCEEDS_CAPACITY = "exceeds_capacity"

    @property
    def label(self) -> str:
        return LABELS[self]

    @property
    def template(self) -> str:
        return TEMPLATES[self]


LABELS = {
    WaitReason.QUOTA_EXCEEDED: gettext_noop("Quota exceeded"),
    WaitReason.NO_QUOTA: gettext_noop("No quota for this GPU model"),
    WaitReason.INSUFFICIENT_GPUS: gettext_noop("Not enough free GPUs"),
    WaitReason.GANG_UNPLACEABLE: gettext_noop("Multi-node job cannot be placed whole"),
    WaitReason.PRIORITY: gettext_noop("Higher-priority job ahead"),
    WaitReason.EXCEEDS_CAPACITY: gettext_noop("Larger than the healthy cluster"),
}

TEMPLATES = {
    WaitReason.QUOTA_EXCEEDED: gettext_noop(
        "Tenant %(tenant)s uses %(used)d of its %(limit)d %(gpu_model)s GPUs; this job needs %(requested)d more, "
        "%(over)d beyond the limit (guaranteed %(guaranteed)d)."
    ),
    WaitReason.NO_QUOTA: gettext_noop(
        "Tenant %(tenant)s has no quota for %(gpu_model)s GPUs; this job needs %(requested)d. "
        "Ask a platform admin for a quota."
    ),
    WaitReason.INSUFFICIENT_GPUS: gettext_noop(
        "Needs %(requested)d %(gpu_model)s GPUs on one node; the most free on any healthy %(gpu_model)s node is "
        "%(best_free)d (%(total_free)d free in total)."
    ),
    WaitReason.GANG_UNPLACEABLE: gettext_noop(
        "Needs %(nodes)d %(gpu_model)s nodes with %(gpus_per_node)d free GPUs each, all at once; nodes with that "
        "many free GPUs now: %(fitting_nodes)d (%(total_free)d %(gpu_model)s GPUs free in total)."
    ),
    WaitReason.PRIORITY: gettext_noop(
        "Job #%(blocker_id)d (priority %(blocker_priority)d) is ahead in the %(gpu_model)s queue and waits for "
        "%(blocker_gpus)d GPUs (%(total_free)d free); this job would fit but may not overtake it."
    ),
    WaitReason.EXCEEDS_CAPACITY: gettext_noop(
        "Needs %(nodes)d %(gpu_model)s nodes with %(gpus_per_node)d GPUs each, but only %(capable_nodes)d healthy "
        "%(gpu_model)s nodes have that many GPUs; it cannot start until nodes are added or repaired."
    ),
}


def render_reason(reason: WaitReason | str, params: dict, translate=None) -> str:
    """Fill the reason's template; ``translate`` (e.g. Django's gettext) picks the reader's language."""
    template = TEMPLATES[WaitReason(reason)]
    if translate is not None:
        template = translate(template)
    return template % params
