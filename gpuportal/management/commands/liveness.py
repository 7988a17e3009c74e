"""``manage.py liveness worker|beat``: exit 0 when that process's loop touched its file recently, 1 with the
reason otherwise (the exec probe of the worker and beat Deployments; see ``gpuportal.observability.liveness``)."""

from django.core.management.base import BaseCommand, CommandError

from gpuportal.observability.liveness import ROLES, STALE_SECONDS, age_seconds, liveness_file


class Command(BaseCommand):
    help = "Exit 0 if the Celery worker or beat on this host is alive (its liveness file is fresh)."

    def add_arguments(self, parser):
        parser.add_argument("role", choices=ROLES)
        parser.add_argument("--max-age", type=float, default=STALE_SECONDS,
                            help="Seconds after which the file counts as stale (default %(default)s).")

    def handle(self, *args, role, max_age, **options):
        age = age_seconds(role)
        if age is None:
            raise CommandError(f"{role}: no liveness file at {liveness_file(role)} (not started, or stopped)")
        if age > max_age:
            raise CommandError(f"{role}: last alive {age:.0f} s ago (more than {max_age:.0f} s)")
        self.stdout.write(f"{role}: alive {age:.1f} s ago")
