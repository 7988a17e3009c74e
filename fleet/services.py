"""Changes to the fleet that people make: cordon, drain or reactivate a node (platform admins).

An action on a node is previewed before it is made (``preview_admin_state``): the running work it touches and
what becomes of it. Cordoning and draining both stop new work from being placed on the node; neither stops a job
that runs there — the pass skips nodes that are not active, and nothing preempts or requeues their jobs — so
every running job runs on to its end. Draining says more: the node is to be emptied (for maintenance), and is
empty once those jobs end. The sentences below say exactly that, on the confirmation step and on each job's
timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet import occupancy, signals
from fleet.models import AdminState, Node, NodeEvent
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from tenants import access

#: The longest reason recorded with a cordon, drain or reactivation (refused above it, never cut).
MAX_ADMIN_REASON = 500

#: What the action means for the node (the confirmation step's first sentence).
EFFECTS = {
    AdminState.CORDONED: gettext_noop("No new job will be placed on %(node)s. Jobs running there run on to their "
                                      "end."),
    AdminState.DRAINING: gettext_noop("No new job will be placed on %(node)s, and it is to be emptied: jobs running "
                                      "there run on to their end (none is stopped or requeued), then the node stays "
                                      "empty until it is reactivated."),
    AdminState.ACTIVE: gettext_noop("%(node)s takes new jobs again. Jobs running there are not affected."),
}

#: What becomes of each running job, beside it on the confirmation step.
FATES = {
    AdminState.CORDONED: gettext_noop("runs on to its end"),
    AdminState.DRAINING: gettext_noop("runs on to its end; not requeued"),
    AdminState.ACTIVE: gettext_noop("not affected"),
}

#: The line each running job's timeline gets (a stored phrase: it reads in its reader's language).
JOB_NOTES = {
    AdminState.CORDONED: gettext_noop("Node %(node)s was cordoned by %(user)s: %(reason)s. This job runs on to its "
                                      "end; no new job is placed on the node."),
    AdminState.DRAINING: gettext_noop("Node %(node)s is being drained by %(user)s: %(reason)s. This job runs on to "
                                      "its end (it is not requeued); then the node stays empty."),
}


@dataclass(frozen=True)
class AffectedJob:
    work: occupancy.NodeWork
    fate: str


@dataclass(frozen=True)
class NodeActionPreview:
    """What cordoning, draining or reactivating ``node`` would touch, shown before it is confirmed."""

    node: Node
    state: str
    state_label: str
    effect: str
    jobs: list[AffectedJob]
    gpus: int
    tenants: list[str]


def check_reason(reason: str) -> None:
    """A node action's reason is required and limited (refused above the limit, never cut)."""
    if not reason.strip():
        raise ValidationError({"reason": _("Say why: the reason is recorded on the node, in the audit log and on the "
                                           "timeline of every job running there.")})
    if len(reason) > MAX_ADMIN_REASON:
        raise ValidationError({"reason": _("At most %(n)d characters (got %(got)d).") % {
            "n": MAX_ADMIN_REASON, "got": len(reason)}})


def _check_state(user, state: str) -> None:
    if not access.is_platform_admin(user):
        raise PermissionDenied(_("Only platform admins may change a node's state."))
    if state not in AdminState.values:
        raise ValidationError({"state": _("Unknown node state %(s)r.") % {"s": state}})


def preview_admin_state(user, node: Node, state: str) -> NodeActionPreview:
    """The running work the action touches — jobs, GPUs, tenants — and what becomes of each job."""
    _check_state(user, state)
    work = occupancy.work_on(node.pk)
    fate = _(FATES[AdminState(state)])
    return NodeActionPreview(
        node=node, state=state, state_label=AdminState(state).label, effect=_(EFFECTS[AdminState(state)]) % {
            "node": node.name}, jobs=[AffectedJob(w, fate) for w in work], gpus=sum(w.gpus for w in work),
        tenants=sorted({w.tenant for w in work}))


#: The node's own history line for each action (a stored phrase: it reads in its reader's language).
ADMIN_EVENTS = {
    AdminState.CORDONED: gettext_noop("%(user)s set the node cordoned. %(reason)s"),
    AdminState.DRAINING: gettext_noop("%(user)s set the node draining. %(reason)s"),
    AdminState.ACTIVE: gettext_noop("%(user)s set the node active. %(reason)s"),
}


def set_node_admin_state(user, node: Node, state: str, reason: str = "") -> Node:
    """Cordon, drain or reactivate a node, for a reason (required); recorded as a node event with the actor and
    as an audit record. The layers above hear of it (``capacity_changed``, with the line for the timelines of the
    jobs running there): scheduling notes it on those jobs and runs a pass."""
    _check_state(user, state)
    reason = reason.strip()
    check_reason(reason)
    if node.admin_state == state:
        return node
    before = node.admin_state
    with transaction.atomic():
        node.admin_state = state
        node.save(update_fields=["admin_state", "last_updated"])
        text = Phrase(ADMIN_EVENTS[AdminState(state)], {"user": user.get_username(), "reason": reason})
        NodeEvent.objects.create(node=node, at=timezone.now(), kind=NodeEvent.Kind.ADMIN, from_state=before,
                                 to_state=state, reason=text, actor=user, data=phrases.data_of(text))
        audit.record(AuditAction.NODE_ADMIN, node, actor=user, reason=reason, before={"admin_state": before},
                     after={"admin_state": state})
        note = JOB_NOTES.get(AdminState(state))
        signals.capacity_changed.send(sender=Node, node=node, actor=user, job_note=Phrase(note, {
            "node": node.name, "user": user.get_username(), "reason": reason}) if note else "")
    return node
