import json

from django.core.management.base import BaseCommand, CommandError

from directory.ldap.sync import DirectoryUnavailable, sync_ldap


class Command(BaseCommand):
    help = ("Bring everyone who signed in with LDAP in line with the directory now: memberships and platform roles "
            "from their groups, inactive when disabled in or gone from the directory. Changes nothing when the "
            "directory cannot be read (exit status 1).")

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print what changed as JSON.")

    def handle(self, *args, **options):
        try:
            report = sync_ldap()
        except DirectoryUnavailable as error:
            raise CommandError(f"The directory could not be read; nothing was changed: {error}") from error
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        elif report.skipped:
            self.stdout.write(f"Nothing to do: {report.skipped}.")
        else:
            self.stdout.write(
                f"Synced {report.people} people: {report.added} memberships or roles added, {report.removed} removed, "
                f"{len(report.deactivated)} deactivated, {len(report.reactivated)} reactivated.")
            for username in report.deactivated:
                self.stdout.write(f"  deactivated {username}")
            for username in report.reactivated:
                self.stdout.write(f"  reactivated {username}")
