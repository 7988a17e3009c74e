"""``manage.py review_pack --month 2026-10 [--tenant vision] --format pdf|xlsx --output FILE [--language zh-hans]``:
the month's review pack as a file, the same document the report page's download links serve."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from metering.management.commands._options import month_option, tenant_option
from metering.review.document import build_review
from metering.review.render.formats import FORMATS, pdf_pages, render


class Command(BaseCommand):
    help = "Write the monthly review pack (four groups: resources, tasks, governance, improvements) as PDF or xlsx."

    def add_arguments(self, parser):
        parser.add_argument("--month", required=True, help="YYYY-MM")
        parser.add_argument("--tenant", help="A tenant's name; omitted: the platform-wide pack.")
        parser.add_argument("--format", default="pdf", help=f"One of {', '.join(FORMATS)} (default pdf).")
        parser.add_argument("--output", required=True, help="The file to write.")
        parser.add_argument("--language", default=settings.LANGUAGE_CODE,
                            help=f"One of {', '.join(code for code, _name in settings.LANGUAGES)}.")

    def handle(self, *args, **options):
        month = month_option(options["month"])
        fmt = options["format"]
        if fmt not in FORMATS:
            raise CommandError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}.")
        languages = [code for code, _name in settings.LANGUAGES]
        if options["language"] not in languages:
            raise CommandError(f"--language: {options['language']!r} is not one of {', '.join(languages)}.")
        tenant = tenant_option(options["tenant"])
        started = time.monotonic()
        content = render(build_review(month, tenant, language=options["language"]), fmt)
        try:
            with open(options["output"], "wb") as handle:
                handle.write(content)
        except OSError as exc:
            raise CommandError(f"--output: cannot write {options['output']}: {exc.strerror}") from None
        seconds = time.monotonic() - started
        pages = pdf_pages(options["output"]) if fmt == "pdf" else None
        if pages is None:
            self.stderr.write(f"wrote {options['output']} ({seconds:.1f} s)")
        else:
            self.stderr.write(f"wrote {options['output']} ({pages} pages, {seconds:.1f} s)")
