"""Print a monthly report: ``manage.py monthly_report --month 2026-10 [--tenant vision] --format json``."""

import json

from django.core.management.base import BaseCommand, CommandError

from metering import reports
from tenants.models import Tenant


class Command(BaseCommand):
    help = "The monthly report (platform-wide, or one tenant's) with the same figures as the report page."

    def add_arguments(self, parser):
        parser.add_argument("--month", required=True, help="YYYY-MM")
        parser.add_argument("--tenant", help="A tenant's name; omitted: the platform-wide report.")
        parser.add_argument("--format", choices=["json", "text"], default="text")

    def handle(self, *args, **options):
        try:
            month = reports.parse_month(options["month"])
        except ValueError as exc:
            raise CommandError(f"--month: {exc}") from None
        tenant = None
        if options["tenant"]:
            tenant = Tenant.objects.filter(name=options["tenant"]).first()
            if tenant is None:
                known = ", ".join(Tenant.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"--tenant: no tenant {options['tenant']!r} (known: {known}).")
        data, _snapshot = reports.report_for(month, tenant)
        if options["format"] == "json":
            self.stdout.write(json.dumps(data, indent=2))
            return
        scope = f"tenant {tenant.name}" if tenant else "platform"
        self.stdout.write(f"Report {data['month']} ({scope}{', frozen' if _snapshot else ', live'})")
        self.stdout.write(f"  GPU-hours allocated {data['gpu_hours_allocated']}, used {data['gpu_hours_used']}, "
                          f"efficiency {data['efficiency']}, cost {data['cost']} {data['currency']}")
        self.stdout.write(f"  jobs {data['jobs']}; failures {data['failures_by_category']}")
        self.stdout.write(f"  wait median {data['wait_seconds_median']} s, p95 {data['wait_seconds_p95']} s")
        for advice in data.get("recommendations", []):
            self.stdout.write(f"  {advice['evidence']}")
