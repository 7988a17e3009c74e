"""Rebuild the metering facts of a range of days: ``manage.py rollup --start 2026-10-01 --end 2026-10-31``."""

import json
from datetime import date, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from gpuportal.text.dates import local_day
from metering.usage.rollup import RollupRangeError, rollup


def _day(text: str, name: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--{name}: give a day as YYYY-MM-DD, not {text!r}.") from None


class Command(BaseCommand):
    help = "Roll allocations and readings up into daily and monthly usage (idempotent; re-run to absorb late data)."

    def add_arguments(self, parser):
        parser.add_argument("--start", help="First day (YYYY-MM-DD); default yesterday.")
        parser.add_argument("--end", help="Last day, inclusive (YYYY-MM-DD); default today.")
        parser.add_argument("--force", action="store_true",
                            help="Also roll up days older than the readings' retention.")

    def handle(self, *args, **options):
        today = local_day(timezone.now())
        start = _day(options["start"], "start") if options["start"] else today - timedelta(days=1)
        end = _day(options["end"], "end") if options["end"] else today
        try:
            result = rollup(start, end, force=options["force"])
        except RollupRangeError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(result.as_dict()))
