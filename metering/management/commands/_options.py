"""Options the metering commands share, each read and refused one way (the option named in the error)."""

from django.core.management.base import CommandError

from metering.reports import monthly as reports
from tenants.models import Tenant


def month_option(text: str):
    """``--month YYYY-MM`` as the month's first day."""
    try:
        return reports.parse_month(text)
    except ValueError as exc:
        raise CommandError(f"--month: {exc}") from None


def tenant_option(name: str | None) -> Tenant | None:
    """``--tenant NAME`` as the tenant (None when omitted: platform-wide); an unknown name lists the known ones."""
    if not name:
        return None
    tenant = Tenant.objects.filter(name=name).first()
    if tenant is None:
        known = ", ".join(Tenant.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise CommandError(f"--tenant: no tenant {name!r} (known: {known}).")
    return tenant
