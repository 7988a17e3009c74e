import json

from django.core.management.base import BaseCommand

from scheduling.passes.scheduler import run_pass
from scheduling.tasks import follow_up


class Command(BaseCommand):
    help = "Run one scheduling pass now and print what it decided (admissions and every wait reason)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print the decisions as JSON.")

    def handle(self, *args, **options):
        report = run_pass()
        follow_up(report)  # as the task does: dispatch the admitted jobs
        if options["json"]:
            self.stdout.write(json.dumps({
                "ran": report.ran, "seconds": round(report.seconds, 4),
                "admitted": [{"job": j, "placement": w} for j, w in report.admitted],
                "waiting": [{"job": j, "code": c, "message": m} for j, c, m in report.waiting]}, indent=2))
            return
        if not report.ran:
            self.stdout.write("Another scheduling pass holds the lock; nothing done.")
            return
        self.stdout.write(f"Pass took {report.seconds * 1000:.1f} ms: {len(report.admitted)} admitted, "
                          f"{len(report.waiting)} waiting.")
        for job_id, where in report.admitted:
            self.stdout.write(f"  admit  #{job_id}: {where}")
        for job_id, code, message in report.waiting:
            self.stdout.write(f"  wait   #{job_id} [{code}] {message}")
