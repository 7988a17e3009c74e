"""Changes to the fleet that people make: cordon, drain or reactivate a node (platform admins)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit import log as audit
from audit.models import AuditAction
from fleet import signals
from fleet.models import AdminState, Node, NodeEvent
from tenants import access

#: The longest reason recorded with a cordon, drain or reactivation (refused above it, never cut).
MAX_ADMIN_REASON = 500


def set_node_admin_state(user, node: Node, state: str, reason: str = "") -> Node:
    """Cordon, drain or reactivate a node; recorded as a node event with the actor and as an audit record.
    The layers above hear of it (``capacity_changed``): scheduling runs a pass."""
    if not access.is_platform_admin(user):
        raise PermissionDenied(_("Only platform admins may change a node's state."))
    if state not in AdminState.values:
        raise ValidationError({"state": _("Unknown node state %(s)r.") % {"s": state}})
    if len(reason) > MAX_ADMIN_REASON:
        raise ValidationError({"reason": _("At most %(n)d characters (got %(got)d).") % {
            "n": MAX_ADMIN_REASON, "got": len(reason)}})
    if node.admin_state == state:
        return node
    before = node.admin_state
    with transaction.atomic():
        node.admin_state = state
        node.save(update_fields=["admin_state", "last_updated"])
        text = _("%(user)s set the node %(state)s.") % {"user": user.get_username(),
                                                          "state": AdminState(state).label.lower()}
        NodeEvent.objects.create(node=node, at=timezone.now(), kind=NodeEvent.Kind.ADMIN, from_state=before,
                                 to_state=state, reason=f"{text} {reason}".strip(), actor=user)
        audit.record(AuditAction.NODE_ADMIN, node, actor=user, reason=reason, before={"admin_state": before},
                     after={"admin_state": state})
        signals.capacity_changed.send(sender=Node, node=node)
    return node
