"""Report pages. Thin: who may read what is decided by ``metering.permissions``; figures come from ``reports``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from metering import permissions as services
from metering.reports import capacity_plan, presentation
from metering.reports import monthly as reports
from metering.usage import operations
from tenants import access


def _csv_response(section, filename: str) -> HttpResponse:
    response = HttpResponse(section.csv(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def month_or_404(text: str):
    """``YYYY-MM`` from a URL as the month's first day; a 404 naming what is wrong otherwise."""
    try:
        return reports.parse_month(text)
    except ValueError as exc:
        raise Http404(str(exc)) from None


@login_required
def report_index(request):
    months = reports.months_with_data()
    return render(request, "metering/index.html", {
        "months": months, "tenants": services.report_tenants(request.user),
        "platform": access.sees_all_tenants(request.user)})


def render_report_page(request, month, tenant, data, snapshot=None):
    """The report page for ``data`` (used by the view and by ``bench_rollup`` to time the render)."""
    return render(request, "metering/report.html", {
        "data": data, "month": month, "tenant": tenant, "snapshot": snapshot,
        "sections": presentation.report_sections(data),
        # A closed month can be frozen (or frozen anew) by a platform admin; reading it never freezes it.
        "can_regenerate": bool(data.get("closed")) and access.is_platform_admin(request.user),
        "unfrozen": snapshot is None and bool(data.get("closed")),
        "capacity_plan": capacity_plan.with_advice(capacity_plan.plan(month), data.get("recommendations") or [])
        if tenant is None else None,
        "history": services.snapshot_history(month, tenant) if snapshot else [], "max_reason": reports.MAX_REASON})


@login_required
def monthly_report(request, month, tenant=None):
    month = month_or_404(month)
    scope = services.report_scope(request.user, tenant)
    data, snapshot = reports.report_for(month, scope)
    return render_report_page(request, month, scope, data, snapshot)


@login_required
def report_csv(request, month, table, tenant=None):
    month = month_or_404(month)
    scope = services.report_scope(request.user, tenant)
    data, _snapshot = reports.report_for(month, scope)
    section = presentation.section_by_name(presentation.report_sections(data), table)
    if section is None:
        raise Http404(_("No table named %(t)s in this report.") % {"t": table})
    return _csv_response(section, f"gpuportal-{month:%Y-%m}-{scope.name if scope else 'platform'}-{table}.csv")


@login_required
@require_POST
def report_regenerate(request, month, tenant=None):
    month = month_or_404(month)
    scope = services.report_scope(request.user, tenant)
    reason = request.POST.get("reason", "")
    try:
        if reports.is_closed(month) and reports.current_snapshot(month, scope) is None:
            # Not frozen yet: freeze the figures shown (the explicit action; reading never freezes).
            if not access.is_platform_admin(request.user):
                raise PermissionDenied(_("Only platform admins freeze a report."))
            if not reason.strip():
                raise ValueError(_("reason: say why the report is frozen now (it is recorded)."))
            reports.freeze(month, scope, actor=request.user, reason=reason)
            messages.success(request, _("The report was frozen."))
        else:
            services.regenerate_report(request.user, month, scope, reason)
            messages.success(request, _("The report was rolled up again and frozen anew."))
    except ValueError as exc:
        messages.error(request, str(exc))
    if scope is None:
        return redirect("metering:platform-report", month=f"{month:%Y-%m}")
    return redirect("metering:tenant-report", month=f"{month:%Y-%m}", tenant=scope.name)


@login_required
def operations_dashboard(request):
    if not access.sees_all_tenants(request.user):
        raise PermissionDenied
    days = operations.window_days(request.GET.get("days"))
    groups = operations.dashboard(days)
    table = request.GET.get("csv")
    if table:
        section = next((s for g in groups for s in g.sections if s.name == table), None)
        if section is None:
            raise Http404(_("No table named %(t)s on this dashboard.") % {"t": table})
        return _csv_response(section, f"gpuportal-operations-{table}.csv")
    return render(request, "metering/operations.html", {"groups": groups, "days": days, "days_text": str(days),
                                                        "choices": operations.WINDOW_CHOICES})
