import json

from django.core.management.base import BaseCommand

from scheduling.tasks import reconcile


class Command(BaseCommand):
    help = ("Run one reconciliation now: release GPUs of jobs that no longer hold them, dispatch jobs stuck in "
            "admitted, create objects that never appeared, delete cluster objects of no running attempt.")

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print what was repaired as JSON.")

    def handle(self, *args, **options):
        report = reconcile()  # the task's body, run here (it asks for a pass when it repaired anything)
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        counts = report["counts"]
        self.stdout.write(f"Reconciled in {report['seconds'] * 1000:.0f} ms: " + ", ".join(
            f"{n} {kind}" for kind, n in counts.items()) + ".")
        for repair in report["repairs"]:
            self.stdout.write(f"  {repair['kind']:<12} job #{repair['job']}: {repair['detail']}")
        for error in report["errors"]:
            self.stderr.write(f"  error: {error}")
