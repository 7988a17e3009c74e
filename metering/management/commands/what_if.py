"""Replay a closed month with one change: ``manage.py what_if --month 2026-10 --add H100=8 --json``."""

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from metering.management.commands._options import month_option
from metering.models import WhatIfRun
from metering.whatif import services
from metering.whatif.change import parse_change


class Command(BaseCommand):
    help = ("A closed month's demand replayed through the scheduling engine as it was and with one change, beside "
            "the month's real figures; the run is kept and listed on the what-if page.")

    def add_arguments(self, parser):
        parser.add_argument("--month", required=True, help="YYYY-MM (a closed month)")
        parser.add_argument("--add", action="append", default=[], metavar="MODEL=GPUS",
                            help="GPUs to add (negative: remove), in whole nodes of the model; repeatable.")
        parser.add_argument("--quota", action="append", default=[], metavar="TENANT:MODEL=GPUS",
                            help="A tenant's quota limit of a model; repeatable (to move GPUs: lower one, raise one).")
        parser.add_argument("--guarantee", action="append", default=[], metavar="TENANT:MODEL=GPUS",
                            help="A tenant's guaranteed GPUs of a model; repeatable.")
        parser.add_argument("--half-life-hours", help="The fair-share half-life, in hours.")
        parser.add_argument("--backfill", choices=["on", "off"])
        parser.add_argument("--preemption", choices=["on", "off"])
        parser.add_argument("--sizing", action="store_true",
                            help="Instead of a change: the fewest nodes per model that bring the production p95 wait "
                                 "under the target (what the capacity advice cites).")
        parser.add_argument("--backtest", action="store_true",
                            help="Instead of a change: backtest every fleet change of the month (nodes registered in "
                                 "it): the weeks before replayed with it, against the weeks after as they were.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options):
        month = month_option(options["month"])
        try:
            services.check_month(month)
            change = parse_change(add=options["add"], quota=options["quota"], guarantee=options["guarantee"],
                                  half_life_hours=options["half_life_hours"],
                                  backfill=_switch(options["backfill"]), preemption=_switch(options["preemption"]))
        except ValidationError as exc:
            raise CommandError("; ".join(f"--{k.replace('_', '-')}: {' '.join(v)}"
                                         for k, v in exc.message_dict.items())) from None
        if options["backtest"]:
            runs = services.start_backtests(month)
            found = [{"id": r.pk, "status": r.status, **(r.result or {})} for r in runs]
            self.stdout.write(json.dumps(found, indent=2))
            return
        kind = WhatIfRun.Kind.SIZING if options["sizing"] else WhatIfRun.Kind.CHANGE
        run = WhatIfRun.objects.create(month=month, kind=kind, change=change.as_data())
        run = services.execute(run.pk)
        if run.status != WhatIfRun.Status.DONE:
            raise CommandError(f"what-if #{run.pk} failed: {run.error}")
        result = {"id": run.pk, **run.result}
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2))
            return
        self.stdout.write(f"What-if #{run.pk} of {result['month']}: {result.get('jobs')} jobs")
        for line in result.get("effects", []):
            self.stdout.write(f"  {line['text']}")
        for model, sized in result.get("models", {}).items():
            self.stdout.write(f"  {model}: add {sized['add_gpus']} GPUs ({sized['add_nodes']} nodes)")


def _switch(value):
    return None if value is None else value == "on"
