"""Who may read which report, regenerate a frozen one, or set a price: one place for pages, API and commands."""

from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.utils.translation import gettext as _

from fleet.catalogue import gpu_model_catalogue
from metering.models import GpuPrice, MonthlyReport
from metering.reports import monthly as reports
from tenants import access
from tenants.models import Tenant


def report_tenants(user):
    return Tenant.objects.visible_to(user)


def report_scope(user, tenant_name: str | None) -> Tenant | None:
    """The tenant of a tenant report (404 when the user may not see it), or None for the platform report
    (managers and platform admins only)."""
    if tenant_name is None:
        if not access.sees_all_tenants(user):
            raise PermissionDenied(_("The platform-wide report is for managers and platform admins."))
        return None
    tenant = report_tenants(user).filter(name=tenant_name).first()
    if tenant is None:
        raise Http404(_("No tenant %(t)s among yours.") % {"t": tenant_name})
    return tenant


def regenerate_report(user, month: date, tenant: Tenant | None, reason: str) -> MonthlyReport:
    if not access.is_platform_admin(user):
        raise PermissionDenied(_("Only platform admins regenerate a frozen report."))
    return reports.regenerate(month, tenant, user, reason)


def snapshot_history(month: date, tenant: Tenant | None):
    return MonthlyReport.objects.filter(month=month, tenant=tenant).select_related("generated_by")


def set_price(user, data: dict) -> GpuPrice:
    """A new price of a GPU model from a day on (platform admins); errors name the field."""
    if not access.is_platform_admin(user):
        raise PermissionDenied(_("Only platform admins set GPU prices."))
    errors = {}
    model = str(data.get("gpu_model", "")).strip()
    known = set(gpu_model_catalogue())
    if model not in known:
        errors["gpu_model"] = _("Unknown GPU model %(m)r; known: %(known)s.") % {
            "m": model, "known": ", ".join(sorted(known)) or "-"}
    try:
        price = Decimal(str(data.get("price_per_gpu_hour", "")))
        if not price.is_finite() or price < 0 or price >= Decimal("1000000"):
            raise InvalidOperation
    except InvalidOperation:
        errors["price_per_gpu_hour"] = _("Give a price from 0 to 999999.9999 per GPU-hour.")
    try:
        since = date.fromisoformat(str(data.get("effective_from", "")))
    except ValueError:
        errors["effective_from"] = _("Give the first day the price applies, as YYYY-MM-DD.")
    if not errors and GpuPrice.objects.filter(gpu_model=model, effective_from=since).exists():
        errors["effective_from"] = _("%(m)s already has a price from %(d)s; prices are history, add a later day.") % {
            "m": model, "d": since}
    if errors:
        raise ValidationError(errors)
    return GpuPrice.objects.create(gpu_model=model, price_per_gpu_hour=price.quantize(Decimal("0.0001")),
                                   effective_from=since, note=str(data.get("note", ""))[:200], created_by=user)
