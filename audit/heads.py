"""Export the chain head to where the database's owner cannot reach, and check the chain against it.

A keyed chain stops anyone without the key from re-hashing edited records, but not from removing records
wholesale: after a TRUNCATE the portal starts a new, perfectly valid chain at #1. So the head (sequence
number, hash, time of the newest record) is appended regularly — by the beat task ``audit.tasks.export_head``
and after every successful ``verify_audit`` — as one JSON line to ``AUDIT["HEAD_FILE"]`` (make it append-only
for the portal's user, e.g. ``chattr +a``, or ship it off the machine) and optionally to syslog. Every head
ever exported must still be in the database with the same hash.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from .log import Verification
from .models import AuditChainHead, AuditRecord

logger = logging.getLogger(__name__)


def current_head() -> dict:
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is None or not head.last_seq:
        return {"seq": 0, "hash": "", "at": None}
    last = AuditRecord.objects.filter(seq=head.last_seq).values_list("at", flat=True).first()
    return {"seq": head.last_seq, "hash": head.last_hash, "at": last.isoformat() if last else None}


def export_head() -> dict | None:
    """Append the current head to the head file and syslog; None when neither is configured."""
    path, syslog = settings.AUDIT["HEAD_FILE"], settings.AUDIT["HEAD_SYSLOG"]
    if not path and not syslog:
        return None
    line = {**current_head(), "exported_at": timezone.now().isoformat()}
    text = json.dumps(line, sort_keys=True)
    if path:
        # One write of one short line with O_APPEND: concurrent exporters never interleave or overwrite.
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(descriptor, (text + "\n").encode())
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    if syslog:
        _send_to_syslog(syslog, text)
    return line


def _send_to_syslog(address: str, text: str) -> None:
    host, _, port = address.rpartition(":")
    target = (host, int(port)) if host and port.isdigit() else address
    handler = logging.handlers.SysLogHandler(address=target, facility=logging.handlers.SysLogHandler.LOG_AUTH)
    try:
        handler.emit(logging.LogRecord("gpuportal.audit", logging.INFO, __file__, 0, "gpuportal-audit-head %s",
                                       (text,), None))
    finally:
        handler.close()


def exported_heads(path: str | Path) -> tuple[list[dict], int]:
    """The heads in the file, in sequence order, and how many lines could not be read (a torn last write)."""
    heads, unreadable = [], 0
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return [], 0
    for text in lines:
        try:
            line = json.loads(text)
            heads.append({"seq": int(line["seq"]), "hash": str(line["hash"]), "at": line.get("exported_at")})
        except (ValueError, KeyError, TypeError):
            unreadable += 1
    return sorted(heads, key=lambda h: h["seq"]), unreadable


def check_heads(path: str | Path | None = None) -> Verification:
    """Every exported head must still be in the database with the hash it had; names the first that is not."""
    path = path or settings.AUDIT["HEAD_FILE"]
    heads, _unreadable = exported_heads(path) if path else ([], 0)
    heads = [h for h in heads if h["seq"] > 0]
    stored = dict(AuditRecord.objects.filter(seq__in={h["seq"] for h in heads}).values_list("seq", "hash"))
    newest = AuditRecord.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    for checked, head in enumerate(heads):
        if head["seq"] not in stored:
            problem = _("record #%(seq)s is gone, yet the head exported at %(at)s was #%(seq)s (the log now ends "
                        "at #%(end)s)") % {"seq": head["seq"], "at": head["at"], "end": newest}
            return Verification(False, checked, problem, min(head["seq"], newest + 1))
        if stored[head["seq"]] != head["hash"]:
            problem = _("record #%(seq)s differs from the head exported at %(at)s: the log was rewritten up to "
                        "it") % {"seq": head["seq"], "at": head["at"]}
            return Verification(False, checked, problem, head["seq"])
    return Verification(True, len(heads))
