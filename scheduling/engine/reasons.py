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
    AWAITING_APPROVAL = "awaiting_approval"
    HELD = "held"
    QUOTA_EXHAUSTED = "quota_exhausted"
    BORROWING_LIMIT = "borrowing_limit"
    DEPARTMENT_QUOTA = "department_quota"
    NO_QUOTA = "no_quota"
    INSUFFICIENT_GPUS = "insufficient_gpus"
    TOPOLOGY = "topology"
    GANG_UNPLACEABLE = "gang_unplaceable"
    NO_HEALTHY_NODE = "no_healthy_node"
    NEVER_FITS = "never_fits"
    PRIORITY = "priority"
    RESERVED = "reserved"
    PREEMPTION_PENDING = "preemption_pending"
    HOST_RESOURCES = "host_resources"
    ARRAY_LIMIT = "array_limit"
    FRAGMENTED = "fragmented"
    AVOIDS_ALL_NODES = "avoids_all_nodes"
    AVOIDED_NODES = "avoided_nodes"
    DEPENDENCY = "dependency"
    DEPENDENCY_NEVER = "dependency_never"

    @property
    def label(self) -> str:
        return LABELS[self]

    @property
    def template(self) -> str:
        return TEMPLATES[self]


LABELS = {
    WaitReason.AWAITING_APPROVAL: gettext_noop("Awaiting approval"),
    WaitReason.HELD: gettext_noop("Held"),
    WaitReason.QUOTA_EXHAUSTED: gettext_noop("Quota exhausted"),
    WaitReason.BORROWING_LIMIT: gettext_noop("Borrowing limit reached"),
    WaitReason.DEPARTMENT_QUOTA: gettext_noop("Department quota exhausted"),
    WaitReason.NO_QUOTA: gettext_noop("No quota for this GPU model"),
    WaitReason.INSUFFICIENT_GPUS: gettext_noop("Not enough free GPUs"),
    WaitReason.TOPOLOGY: gettext_noop("Topology constraint cannot be met now"),
    WaitReason.GANG_UNPLACEABLE: gettext_noop("Multi-node job cannot be placed whole"),
    WaitReason.NO_HEALTHY_NODE: gettext_noop("No healthy node matches"),
    WaitReason.NEVER_FITS: gettext_noop("Larger than this cluster can ever hold"),
    WaitReason.PRIORITY: gettext_noop("Higher-priority or fairer job ahead"),
    WaitReason.RESERVED: gettext_noop("Capacity reserved for another tenant"),
    WaitReason.PREEMPTION_PENDING: gettext_noop("Waiting for preempted jobs to release GPUs"),
    WaitReason.HOST_RESOURCES: gettext_noop("Not enough CPU or memory beside free GPUs"),
    WaitReason.ARRAY_LIMIT: gettext_noop("Its array runs as many tasks as it may"),
    WaitReason.FRAGMENTED: gettext_noop("Enough free GPUs, but scattered over nodes"),
    WaitReason.AVOIDS_ALL_NODES: gettext_noop("Every node that could hold it failed it before"),
    WaitReason.AVOIDED_NODES: gettext_noop("Free GPUs only on nodes it avoids after faults"),
    WaitReason.DEPENDENCY: gettext_noop("Waits for another job"),
    WaitReason.DEPENDENCY_NEVER: gettext_noop("Dependency never satisfied"),
}

TEMPLATES = {
    WaitReason.AWAITING_APPROVAL: gettext_noop(
        "Task type %(task_type)s needs approval; the job queues once an approver accepts it."),
    WaitReason.HELD: gettext_noop("Held by the %(held_by)s; it will not start until released."),
    WaitReason.QUOTA_EXHAUSTED: gettext_noop(
        "Tenant %(tenant)s uses %(used)g of its %(limit)g %(gpu_model)s GPUs; this job needs %(requested)g more, "
        "%(over)g beyond the limit (guaranteed %(guaranteed)g)."),
    WaitReason.BORROWING_LIMIT: gettext_noop(
        "Tenant %(tenant)s uses %(used)g %(gpu_model)s GPUs, %(borrowed)g of them borrowed beyond its guaranteed "
        "%(guaranteed)g; this job needs %(requested)g more, which would pass the borrowing limit of %(limit)g."),
    WaitReason.DEPARTMENT_QUOTA: gettext_noop(
        "Department %(department)s uses %(used)g of its %(limit)g %(gpu_model)s GPUs; this job needs "
        "%(requested)g more."),
    WaitReason.NO_QUOTA: gettext_noop(
        "Tenant %(tenant)s has no quota for %(gpu_model)s GPUs; this job needs %(requested)g. "
        "Ask a platform admin for a quota."),
    WaitReason.INSUFFICIENT_GPUS: gettext_noop(
        "Needs %(requested)g %(gpu_model)s GPUs on one node; the most free on any healthy %(gpu_model)s node is "
        "%(best_free)d (%(total_free)d free in total)."),
    WaitReason.TOPOLOGY: gettext_noop(
        "Needs %(requested)g %(gpu_model)s GPUs (%(nodes)d x %(gpus_per_node)d) in one %(domain)s; the largest "
        "free block in any %(domain)s is %(best_block)d (%(best_where)s)."),
    WaitReason.GANG_UNPLACEABLE: gettext_noop(
        "Needs %(nodes)d %(gpu_model)s nodes with %(gpus_per_node)d free GPUs each, all at once; nodes with that "
        "many free GPUs now: %(fitting_nodes)d (%(total_free)d %(gpu_model)s GPUs free in total)."),
    WaitReason.NO_HEALTHY_NODE: gettext_noop(
        "No healthy, schedulable %(gpu_model)s node has %(gpus_per_node)d GPUs now (%(unavailable)d such nodes are "
        "unhealthy, cordoned or draining)."),
    WaitReason.NEVER_FITS: gettext_noop(
        "Needs %(nodes)d %(gpu_model)s nodes with %(gpus_per_node)d GPUs each, but the largest request this "
        "cluster can ever hold is %(max_nodes)d nodes x %(max_per_node)d GPUs."),
    WaitReason.PRIORITY: gettext_noop(
        "Job #%(blocker_id)d (priority %(blocker_priority)d, tenant %(blocker_tenant)s) is ahead in the "
        "%(gpu_model)s queue and waits for %(blocker_gpus)g GPUs (%(total_free)d free); this job would fit but "
        "would delay it."),
    WaitReason.RESERVED: gettext_noop(
        "%(reserved)d of the %(total_free)d free %(gpu_model)s GPUs are reserved for tenant %(holder)s until "
        "%(until)s; this job needs %(requested)g."),
    WaitReason.PREEMPTION_PENDING: gettext_noop(
        "Waiting for %(victims)d preempted job(s) (%(victim_list)s) to release %(gpu_model)s GPUs; it starts at "
        "the next pass."),
    WaitReason.HOST_RESOURCES: gettext_noop(
        "Nodes with %(best_free)d free %(gpu_model)s GPUs lack the CPU or memory this job asks for; %(total_free)d "
        "GPUs are free in total."),
    WaitReason.ARRAY_LIMIT: gettext_noop(
        "Array %(array)s may run %(limit)d tasks at once and runs %(running)d; this task starts when one of them "
        "ends."),
    WaitReason.FRAGMENTED: gettext_noop(
        "%(total_free)d %(gpu_model)s GPUs are free in total, enough for the %(requested)g this job needs on one "
        "node, but they are scattered over %(nodes_with_free)d nodes: the most free on any one node is "
        "%(best_free)d."),
    WaitReason.AVOIDS_ALL_NODES: gettext_noop(
        "Avoids %(avoided)s after node faults; no other %(gpu_model)s node could hold it (%(nodes)d x "
        "%(gpus_per_node)d GPUs)."),
    WaitReason.AVOIDED_NODES: gettext_noop(
        "The free %(gpu_model)s GPUs that would fit it are on %(avoided)s, which it avoids after node faults; the "
        "most free on any other %(gpu_model)s node is %(best_other)d (%(other_free)d free in total)."),
    WaitReason.DEPENDENCY: gettext_noop(
        "Waits for #%(on_job)d %(condition)s; #%(on_job)d is %(on_status)s, likely done by %(done_by)s."),
    WaitReason.DEPENDENCY_NEVER: gettext_noop(
        "Waited for #%(on_job)d %(condition)s, but #%(on_job)d %(on_status)s: this dependency can never be "
        "satisfied."),
}

#: The DEPENDENCY sentence when nothing tells when the job it waits for ends (it waits itself for a reason with no
#: estimate, or runs without a max runtime).
DEPENDENCY_UNESTIMATED = gettext_noop(
    "Waits for #%(on_job)d %(condition)s; #%(on_job)d is %(on_status)s, with no estimate of when it is done.")
#: Added to a dependency's sentence when the job waits for more jobs than the one it names.
MORE_DEPENDENCIES_CLAUSE = gettext_noop("%(sentence)s It waits for %(more)d more job(s) too.")


#: Parameters that hold a word, not a number or a name (who held the job, which level of the topology), and the
#: words they hold: read in the reader's language with the sentence.
WORD_PARAMS = ("held_by", "domain", "condition", "on_status")
WORDS = frozenset({gettext_noop("user"), gettext_noop("admin"), gettext_noop("rack"), gettext_noop("network domain"),
                   # a dependency's condition, and the state of the job it names (``engine.dependencies``)
                   gettext_noop("to succeed"), gettext_noop("to end"), gettext_noop("to fail"),
                   gettext_noop("pending approval"), gettext_noop("queued"), gettext_noop("admitted to start"),
                   gettext_noop("dispatching"), gettext_noop("running"), gettext_noop("preempted"),
                   gettext_noop("succeeded"), gettext_noop("failed"), gettext_noop("was cancelled")})


def _in_words(params: dict, translate) -> dict:
    if translate is None:
        return params
    return {name: translate(value) if name in WORD_PARAMS and value in WORDS else value
            for name, value in params.items()}


#: The numbers that name another job in a reason's sentence: the engine leaves them out when that job is another
#: tenant's, and the sentence then reads as another tenant's row does (``OTHERS_TEMPLATES``).
NAMING = {WaitReason.PRIORITY: "blocker_id", WaitReason.PREEMPTION_PENDING: "victim_list"}


#: A reason that blames a lack of free GPUs, with the sentence added when work the portal did not submit holds GPUs
#: of nodes that could hold the job (the engine's ``OUTSIDE_TOLD``): by whether the cluster named its scheduler
#: (``outside_scheduler``, e.g. "Slurm") and whether such work holds GPUs of more than one node. ``%(sentence)s``
#: is the reason's own sentence, so that a language joins the two as it joins sentences. An added sentence rather
#: than a code of its own: the reason (too few GPUs, scattered, no block big enough) stays true, the addition says
#: who holds them.
OUTSIDE_CLAUSES = {
    (True, False): gettext_noop(
        "%(sentence)s %(outside_held)d of the %(outside_node_gpus)d %(outside_model)s GPUs of %(outside_node)s are "
        "held by work submitted to %(outside_scheduler)s directly, outside the portal."),
    (True, True): gettext_noop(
        "%(sentence)s %(outside_held)d of the %(outside_node_gpus)d %(outside_model)s GPUs of %(outside_node)s are "
        "held by work submitted to %(outside_scheduler)s directly, outside the portal (%(outside_total)d GPUs on "
        "%(outside_nodes)d nodes in all)."),
    (False, False): gettext_noop(
        "%(sentence)s %(outside_held)d of the %(outside_node_gpus)d %(outside_model)s GPUs of %(outside_node)s are "
        "held by work outside the portal."),
    (False, True): gettext_noop(
        "%(sentence)s %(outside_held)d of the %(outside_node_gpus)d %(outside_model)s GPUs of %(outside_node)s are "
        "held by work outside the portal (%(outside_total)d GPUs on %(outside_nodes)d nodes in all)."),
}


#: Added to the PRIORITY sentence when the job ahead is of a lower priority than the waiting job: it went ahead by
#: aging (``Policy.aging_points_per_hour``), and the sentence says so rather than let "priority 50 is ahead" puzzle
#: the owner of a priority-100 job.
AGED_CLAUSE = gettext_noop(
    "%(sentence)s It has waited %(blocker_waited_hours)g hours, and a job that has waited that long goes ahead of "
    "newer jobs of higher priority.")


def _with_aging(sentence: str, params: dict, translate) -> str:
    if "blocker_waited_hours" not in params:
        return sentence
    template = translate(AGED_CLAUSE) if translate is not None else AGED_CLAUSE
    return template % (params | {"sentence": sentence})


def _with_outside(sentence: str, params: dict, translate) -> str:
    """``sentence`` followed by what work outside the portal holds, when the numbers say it holds some."""
    if "outside_node" not in params:
        return sentence
    template = OUTSIDE_CLAUSES[("outside_scheduler" in params, "outside_total" in params)]
    return (translate(template) if translate is not None else template) % (params | {"sentence": sentence})


def _with_more(sentence: str, params: dict, translate) -> str:
    if not params.get("more"):
        return sentence
    template = translate(MORE_DEPENDENCIES_CLAUSE) if translate is not None else MORE_DEPENDENCIES_CLAUSE
    return template % (params | {"sentence": sentence})


def render_reason(reason: WaitReason | str, params: dict, translate=None) -> str:
    """Fill the reason's template; ``translate`` (e.g. Django's gettext) picks the reader's language."""
    reason = WaitReason(reason)
    naming = NAMING.get(reason)
    template = OTHERS_TEMPLATES[reason] if naming and naming not in params else TEMPLATES[reason]
    if reason == WaitReason.DEPENDENCY and "done_by" not in params:
        template = DEPENDENCY_UNESTIMATED
    if translate is not None:
        template = translate(template)
    sentence = _with_more(template % _in_words(params, translate), params, translate)
    return _with_outside(_with_aging(sentence, params, translate), params, translate)


#: The reasons whose sentence names a job, an array or a person: on another tenant's row (the queue page) they
#: read in these words instead, with the same numbers, so nothing of that tenant but its size and reason shows.
OTHERS_TEMPLATES = {
    WaitReason.PRIORITY: gettext_noop(
        "A job with priority %(blocker_priority)d is ahead in the %(gpu_model)s queue and waits for "
        "%(blocker_gpus)g GPUs (%(total_free)d free); this job would fit but would delay it."),
    WaitReason.PREEMPTION_PENDING: gettext_noop(
        "Waiting for %(victims)d preempted job(s) to release %(gpu_model)s GPUs; it starts at the next pass."),
    WaitReason.ARRAY_LIMIT: gettext_noop(
        "Its array may run %(limit)d tasks at once and runs %(running)d; this task starts when one of them ends."),
    WaitReason.HELD: gettext_noop("Held; it will not start until released."),
    WaitReason.DEPENDENCY: gettext_noop("Waits for another job to end first."),
    WaitReason.DEPENDENCY_NEVER: gettext_noop("Waited for another job that ended otherwise than it needed."),
}


def render_reason_for_others(reason: WaitReason | str, params: dict, translate=None) -> str:
    """The reason as a reader of another tenant sees it: the same sentence, less who and which job."""
    template = OTHERS_TEMPLATES.get(WaitReason(reason)) or TEMPLATES[WaitReason(reason)]
    if translate is not None:
        template = translate(template)
    return _with_outside(_with_aging(template % _in_words(params, translate), params, translate), params, translate)
