"""Print a monthly report: ``manage.py monthly_report --month 2026-10 [--tenant vision] --format json``."""

import json

from django.core.management.base import BaseCommand

from metering.management.commands._options import month_option, tenant_option
from metering.reports import monthly as reports


class Command(BaseCommand):
    help = "The monthly report (platform-wide, or one tenant's) with the same figures as the report page."

    def add_arguments(self, parser):
        parser.add_argument("--month", required=True, help="YYYY-MM")
        parser.add_argument("--tenant", help="A tenant's name; omitted: the platform-wide report.")
        parser.add_argument("--format", choices=["json", "text"], default="text")

    def handle(self, *args, **options):
        month = month_option(options["month"])
        tenant = tenant_option(options["tenant"])
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
