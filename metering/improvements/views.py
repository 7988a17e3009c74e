"""Improvement action pages. Thin: who may write is decided by ``improvements``, the rows come from
``improvement_queries``, and the forms attach the services' errors to their fields."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from metering.forms import ActionCreateForm, ActionDeleteForm, ActionEditForm
from metering.improvements import queries as improvement_queries
from metering.improvements import services as improvements
from metering.models import ImprovementAction, ImprovementStatus
from metering.reports import monthly as reports
from tenants import access
from tenants.models import Tenant


def _require_reader(user) -> None:
    """The actions follow the platform report's advice: those who may read that report may read them."""
    if not access.sees_all_tenants(user):
        raise PermissionDenied(_("Improvement actions are for managers and platform admins."))


#: Why anyone but a platform admin is refused the pages that write actions.
ADMINS_ONLY = gettext_lazy("Only platform admins create and change improvement actions.")


@login_required
def action_list(request):
    _require_reader(request.user)
    status = request.GET.get("status", "")
    due_text = request.GET.get("due", "").strip()
    errors = {}
    if status and status not in ImprovementStatus.values:
        errors["status"] = _("status: one of %(choices)s.") % {"choices": ", ".join(ImprovementStatus.values)}
        status = ""
    due = None
    if due_text:
        try:
            due = reports.parse_month(due_text)
        except ValueError as exc:
            errors["due"] = _("due: %(problem)s") % {"problem": exc}
    rows = [] if errors else improvement_queries.action_list(request.user, status=status, due=due)
    return render(request, "metering/actions.html", {
        "rows": rows, "status": status, "due": due_text, "statuses": ImprovementStatus.choices, "errors": errors,
        "filtered": bool(status or due_text), "can_edit": access.is_platform_admin(request.user)},
        status=400 if errors else 200)


def _prefill(request) -> dict:
    """Initial values from a report's recommendation link (``month``, ``tenant``, ``gpu_model``,
    ``recommendation``); a link with a bad month or an unknown tenant starts a blank form."""
    try:
        month = reports.parse_month(request.GET.get("month", ""))
    except ValueError:
        return {}
    tenant_name = request.GET.get("tenant", "")
    tenant = None
    if tenant_name:
        tenant = Tenant.objects.filter(name=tenant_name).first()
        if tenant is None:
            return {"month": f"{month:%Y-%m}", "due_month": f"{month:%Y-%m}"}
    return improvement_queries.advice_prefill(month, tenant,
                                              request.GET.get("gpu_model", "")[:improvements.MAX_GPU_MODEL],
                                              request.GET.get("recommendation", ""))


@login_required
@access.platform_admin_required(message=ADMINS_ONLY)
def action_create(request):
    form = ActionCreateForm(request.POST or None, initial=None if request.method == "POST" else _prefill(request))
    if request.method == "POST":
        created = form.save(request.user)
        if created is not None:
            messages.success(request, _("Action #%(id)d created; its baseline is the metric in %(m)s's report.") % {
                "id": created.pk, "m": f"{created.month:%Y-%m}"})
            return redirect("metering:action-list")
    return render(request, "metering/action_form.html", {"form": form, "action": None},
                  status=400 if form.errors else 200)


@login_required
@access.platform_admin_required(message=ADMINS_ONLY)
def action_edit(request, pk):
    action = get_object_or_404(ImprovementAction.objects.select_related("owner", "tenant"), pk=pk)
    deleting = request.method == "POST" and "delete-reason" in request.POST
    form = ActionEditForm(request.POST if request.method == "POST" and not deleting else None, action=action)
    delete_form = ActionDeleteForm(request.POST if deleting else None, action=action)
    if request.method == "POST":
        if deleting and delete_form.save(request.user):
            messages.success(request, _("Action #%(id)d removed.") % {"id": pk})
            return redirect("metering:action-list")
        if not deleting:
            before = action.last_updated
            saved = form.save(request.user)
            if saved is not None:
                messages.success(request, _("Action #%(id)d saved.") % {"id": pk} if saved.last_updated != before
                                 else _("Nothing changed."))
                return redirect("metering:action-list")
    row = improvement_queries.action_row(action, action.month)
    return render(request, "metering/action_form.html", {"form": form, "delete_form": delete_form, "action": action,
                                                         "row": row},
                  status=400 if form.errors or delete_form.errors else 200)
