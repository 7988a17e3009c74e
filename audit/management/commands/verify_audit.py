"""``manage.py verify_audit``: exit 0 when the audit chain is intact, 1 naming the first bad record.

The chain is checked on its own (hashes, links, keys, the head's MAC) and against every head exported to
``AUDIT["HEAD_FILE"]``; when both hold, the current head is exported too, so each run extends the evidence
(a broken chain's head is not exported: it would only record the forgery).
"""

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils.translation import gettext as _

from audit.heads import check_heads, export_head
from audit.log import verify


class Command(BaseCommand):
    help = "Check the audit log's hash chain (every record unaltered, none removed) and the exported heads."

    def handle(self, *args, **options):
        result = verify()
        if result.ok:
            against_heads = check_heads()
            if not against_heads.ok:
                result = against_heads
        if result.ok:
            self.stdout.write(_("audit chain intact: %(count)s records") % {"count": result.checked})
            if export_head() is None:
                self.stdout.write(_("no head exported: set GPUPORTAL_AUDIT_HEAD_FILE or GPUPORTAL_AUDIT_HEAD_SYSLOG "
                                    "so that a truncated or rewritten log shows"))
            else:
                self.stdout.write(_("head exported to %(where)s") % {
                    "where": settings.AUDIT["HEAD_FILE"] or settings.AUDIT["HEAD_SYSLOG"]})
            return
        self.stderr.write(_("audit chain broken: %(problem)s (%(count)s checked before it)") % {
            "problem": result.problem, "count": result.checked})
        raise SystemExit(1)
