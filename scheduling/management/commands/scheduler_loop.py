"""Run the beat schedule in-process: the embedded demo's stand-in for `celery beat` + a worker."""

import logging
import signal
import time

from django.core.management.base import BaseCommand

from gpuportal.celery import app, beat_schedule

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = ("Fire the Celery beat schedule declared in gpuportal/celery.py in this process, calling the same "
            "task functions a worker would run. For the embedded demo (no Redis); production runs celery beat.")

    def add_arguments(self, parser):
        parser.add_argument("--iterations", type=int, default=0, help="Stop after this many ticks (0: never).")

    def handle(self, *args, iterations=0, **options):
        stop = {"now": False}
        signal.signal(signal.SIGTERM, lambda *_a: stop.update(now=True))
        app.loader.import_default_modules()  # registers the tasks autodiscovery found
        entries = beat_schedule()
        due = dict.fromkeys(entries, 0.0)
        self.stdout.write("Scheduler loop running: " + ", ".join(
            f"{name} every {entry['schedule']:g}s" for name, entry in entries.items()))
        ticks = 0
        try:
            while not stop["now"]:
                now = time.monotonic()
                for name, entry in entries.items():
                    if now >= due[name]:
                        due[name] = now + float(entry["schedule"])
                        try:
                            app.tasks[entry["task"]].apply(throw=True)
                        except Exception:
                            logger.exception("%s failed; the loop goes on", name)
                ticks += 1
                if iterations and ticks >= iterations:
                    break
                time.sleep(1)
        except KeyboardInterrupt:
            pass
