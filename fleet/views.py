"""Fleet pages: what can run now, the asset tree, a node's page and its admin actions. Thin: read through
``queries``/``inventory``, act through ``services``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from fleet import services
from fleet.agents import tokens as agent_tokens
from fleet.inventory import gpu_rows, inventory_tree, node_series
from fleet.models import AdminState, Node, OutsideWork
from fleet.queries import capacity_summary, runnable_now
from tenants import access


@login_required
def cluster_overview(request):
    return render(request, "fleet/cluster.html", {"capacity": capacity_summary(with_nodes=True),
                                                  "runnable": runnable_now(request.user)})


@login_required
def inventory(request):
    datacenter, rack = request.GET.get("datacenter", ""), request.GET.get("rack", "")
    return render(request, "fleet/inventory.html", {
        "tree": inventory_tree(request.user, datacenter=datacenter, rack=rack),
        "datacenter": datacenter, "rack": rack})


def _outside_rows(node) -> list[OutsideWork]:
    """The work outside the portal on the node (each GPU row it holds names it: ``inventory.gpu_rows``). Who
    submitted it and its job id are the page's to show to platform staff only (the template asks
    ``sees_outside_owners``)."""
    return list(OutsideWork.objects.filter(node=node).order_by("external_id"))


def _node_page(request, node, new_token="", reason="", reason_error="", status=200):
    """The node's page; after a refused action it keeps the reason typed and says what was wrong."""
    gpus = gpu_rows(request.user, node.gpus.all())
    return render(request, "fleet/node_detail.html", {
        "node": node, "gpus": gpus, "outside_work": _outside_rows(node),
        "sees_outside_owners": access.sees_all_tenants(request.user),
        "host": node_series([node.pk]).get(node.pk, {}), "events": node.events.select_related("actor", "gpu")[:200],
        "can_admin": access.is_platform_admin(request.user), "new_token": new_token,
        "admin_states": AdminState.choices, "reason": reason, "reason_error": reason_error,
        "max_reason": services.MAX_ADMIN_REASON}, status=status)


@login_required
def node_detail(request, name):
    node = get_object_or_404(Node.objects.select_related("cluster"), name=name)
    return _node_page(request, node)


@never_cache  # the answer may carry a new agent token: no-store
@login_required
@require_POST
def node_action(request, name):
    """Platform admins: cordon / drain / reactivate a node, or issue its agent token (shown once).

    A state change takes two steps: the first (with its reason) shows what it would touch — the running jobs, their
    GPUs and tenants, and what becomes of each — and the second (``confirm``) makes it."""
    node = get_object_or_404(Node.objects.select_related("cluster"), name=name)
    if not access.is_platform_admin(request.user):
        raise PermissionDenied
    action = request.POST.get("action", "")
    if action == "issue_token":
        token = agent_tokens.issue(node, actor=request.user)
        return _node_page(request, node, new_token=token)
    reason = request.POST.get("reason", "").strip()
    try:
        services.check_reason(reason)
        if request.POST.get("confirm") != "1":
            return render(request, "fleet/node_confirm.html", {
                "preview": services.preview_admin_state(request.user, node, action), "reason": reason})
        services.set_node_admin_state(request.user, node, action, reason)
        messages.success(request, _("Node %(n)s is now %(s)s.") % {"n": node.name, "s": node.get_state_display()})
    except ValidationError as exc:
        if "reason" in exc.message_dict:
            return _node_page(request, node, reason=reason, reason_error=" ".join(exc.message_dict["reason"]),
                              status=400)
        messages.error(request, " ".join(exc.messages))
    return redirect("fleet:node-detail", name=node.name)
