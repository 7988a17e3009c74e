"""``manage.py verify_audit``: exit 0 when the audit chain is intact, 1 naming the first bad record.

The chain is checked on its own (hashes, links, keys, the head's MAC, count and time) and against the anchor:
every head exported to ``AUDIT["HEAD_FILE"]``, and the heads in each ``--heads`` file (the head file of another
machine, or the ``gpuportal-audit-head`` lines copied out of the syslog server when the heads go to syslog). On
its own the chain cannot show that the newest records were deleted and an older head row put back; the anchor
can, for every record exported before. When both hold, the current head is exported too, so each run extends
the evidence (a broken chain's head is not exported: it would only record the forgery).
"""

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils.translation import gettext as _

from audit.heads import check_heads, export_head, exported_heads, parse_heads
from audit.log import verify
from audit.models import AuditRecord


class Command(BaseCommand):
    help = ("Check the audit log's hash chain (every record unaltered, none removed) and compare it with the heads "
            "exported to the anchor (head file, syslog).")

    def add_arguments(self, parser):
        parser.add_argument("--heads", action="append", default=[], metavar="FILE",
                            help=_("Exported heads to compare with, besides GPUPORTAL_AUDIT_HEAD_FILE: a head file, "
                                   "or the syslog lines holding gpuportal-audit-head ('-': standard input). "
                                   "Repeatable."))

    def handle(self, *args, heads, **options):
        result, compared = verify(), 0
        sources = ([settings.AUDIT["HEAD_FILE"]] if settings.AUDIT["HEAD_FILE"] else []) + heads
        if result.ok:
            for source in sources:
                found = self._read(source, explicit=source in heads)
                against = check_heads(heads=found)
                if not against.ok:
                    against.problem = _("%(problem)s (anchor: %(source)s)") % {
                        "problem": against.problem, "source": source}
                    result = against
                    break
                compared += against.checked
        self._warn_about_the_role()
        if not result.ok:
            self.stderr.write(_("audit chain broken: %(problem)s (%(count)s checked before it)") % {
                "problem": result.problem, "count": result.checked})
            raise SystemExit(1)
        self.stdout.write(_("audit chain intact: %(count)s records") % {"count": result.checked})
        if compared:
            self.stdout.write(_("not behind the anchor: %(count)s exported heads found in the log") % {
                "count": compared})
        elif not sources:
            self.stderr.write(self._no_anchor())
        if export_head() is not None:
            self.stdout.write(_("head exported to %(where)s") % {
                "where": settings.AUDIT["HEAD_FILE"] or settings.AUDIT["HEAD_SYSLOG"]})
        else:
            self.stdout.write(_("no head exported: set GPUPORTAL_AUDIT_HEAD_FILE or GPUPORTAL_AUDIT_HEAD_SYSLOG "
                                "so that a truncated or rewritten log shows"))

    def _read(self, source: str, explicit: bool) -> list[dict]:
        if source == "-":
            found, unreadable = parse_heads(sys.stdin.read().splitlines())
        else:
            if explicit and not Path(source).is_file():
                raise CommandError(_("--heads %(source)s: no such file") % {"source": source})
            found, unreadable = exported_heads(source)
        if unreadable:
            self.stderr.write(_("%(source)s: %(count)s lines could not be read") % {
                "source": source, "count": unreadable})
        if not found and AuditRecord.objects.exists():
            self.stderr.write(_("%(source)s holds no exported head yet: nothing to compare the newest records "
                                "with") % {"source": source})
        return found

    def _no_anchor(self) -> str:
        if settings.AUDIT["HEAD_SYSLOG"]:
            return _("not compared with an anchor: the heads go to syslog only (GPUPORTAL_AUDIT_HEAD_SYSLOG); pass "
                     "the gpuportal-audit-head lines with --heads to see whether the newest records were removed")
        return _("not compared with an anchor: without exported heads, deleting the newest records and putting "
                 "back an older head row does not show")

    def _warn_about_the_role(self) -> None:
        """Say so when this login could have done it: a superuser, or the owner of the audit table, can switch
        the triggers off (the portal should run as the role ``audit_db_roles`` makes)."""
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), "
                           "pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class c "
                           "WHERE c.relname = %s AND c.relkind IN ('r', 'p')", [AuditRecord._meta.db_table])
            row = cursor.fetchone()
        if row and (row[1] or row[2]):
            self.stderr.write(_("note: this login (%(role)s) owns the audit log or is a superuser, so it can switch "
                                "the append-only triggers off; run the portal as the role manage.py audit_db_roles "
                                "makes") % {"role": row[0]})
