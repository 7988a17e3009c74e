"""``manage.py verify_audit``: exit 0 when the audit chain is intact, 1 naming the first bad record."""

from django.core.management.base import BaseCommand

from audit.log import verify


class Command(BaseCommand):
    help = "Check the audit log's hash chain: every record unaltered, none removed."

    def handle(self, *args, **options):
        result = verify()
        if result.ok:
            self.stdout.write(f"audit chain intact: {result.checked} records")
            return
        self.stderr.write(f"audit chain broken: {result.problem} ({result.checked} records checked before it)")
        raise SystemExit(1)
