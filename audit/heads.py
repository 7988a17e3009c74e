"""Export the chain head to where the database's owner cannot reach (the anchor), and check the chain against it.

A keyed chain stops anyone without the key from re-hashing edited records, but not from removing records
wholesale: after a TRUNCATE the portal starts a new, perfectly valid chain at #1, and after deleting the newest
records the owner can put back an older head row, whose MAC is valid. So the head (sequence number, hash, record
count, time of the newest record) is appended regularly — by the beat task ``audit.tasks.export_head`` and after
every successful ``verify_audit`` — as one JSON line to ``AUDIT["HEAD_FILE"]`` (make it append-only for the
portal's user, e.g. ``chattr +a``, or ship it off the machine) and/or to syslog (``AUDIT["HEAD_SYSLOG"]``, as
``gpuportal-audit-head {json}``). The database must not end before the newest head exported, and every head
ever exported must still be in it with the same hash. Records written since the last export are not covered:
the export interval is how much of the newest log the owner could still remove unseen.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
import os
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from .log import Verification, instant
from .models import AuditChainHead, AuditRecord

logger = logging.getLogger(__name__)


#: What each syslog message starts with, so the anchor's lines can be told from the rest of a syslog extract.
HEAD_MARK = "gpuportal-audit-head"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def current_head() -> dict:
    """The head row as it is exported: its sequence number, hash, record count and last record's time."""
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is None or not head.last_seq:
        return {"seq": 0, "hash": "", "count": 0, "at": None}
    return {"seq": head.last_seq, "hash": head.last_hash, "count": head.record_count,
            "at": instant(head.last_at) or None}


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
        handler.emit(logging.LogRecord("gpuportal.audit", logging.INFO, __file__, 0, f"{HEAD_MARK} %s",
                                       (text,), None))
    finally:
        handler.close()


def parse_heads(lines: Iterable[str]) -> tuple[list[dict], int]:
    """The heads among ``lines`` — the head file's JSON lines, or syslog lines holding ``HEAD_MARK`` and the
    JSON after it, whatever the syslog server put before — in sequence order, and how many of those lines
    could not be read (a torn last write). Other lines of a syslog extract are skipped."""
    heads, unreadable = [], 0
    for raw in lines:
        text = raw.replace("\x00", "").strip()
        if HEAD_MARK in text:
            text = text.split(HEAD_MARK, 1)[1].strip()
        elif not text.startswith("{"):
            continue
        try:
            line = json.loads(text)
            heads.append({"seq": int(line["seq"]), "hash": str(line["hash"]),
                          "count": None if line.get("count") is None else int(line["count"]),
                          "at": _time(line.get("at")), "exported_at": line.get("exported_at") or "?"})
        except (ValueError, KeyError, TypeError, AttributeError):
            unreadable += 1
    return sorted(heads, key=lambda h: (h["seq"], h["exported_at"])), unreadable


def _time(text) -> dt.datetime | None:
    if not text:
        return None
    value = dt.datetime.fromisoformat(str(text))
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def exported_heads(path: str | Path) -> tuple[list[dict], int]:
    """The heads in a file (the head file, or syslog lines copied out of the syslog server): see ``parse_heads``."""
    try:
        return parse_heads(Path(path).read_text(errors="replace").splitlines())
    except FileNotFoundError:
        return [], 0


def _database_end() -> dict:
    """Where the records in the database end (not the head row, which may be an older copy put back)."""
    last = AuditRecord.objects.order_by("-seq").values("seq", "at").first() or {"seq": 0, "at": None}
    return {**last, "count": AuditRecord.objects.count()}


def check_heads(path: str | Path | None = None, heads: list[dict] | None = None) -> Verification:
    """The chain against the anchor (``heads``, else those in ``path`` or the head file): the database must not
    end before the newest head exported — by sequence number, count or time — and every exported head must
    still be in it with the hash it had. Names the records that are gone, or the first head that differs."""
    if heads is None:
        path = path or settings.AUDIT["HEAD_FILE"]
        heads, _unreadable = exported_heads(path) if path else ([], 0)
    heads = [h for h in heads if h["seq"] > 0]
    if not heads:
        return Verification(True, 0)
    end = _database_end()
    newest = max(heads, key=lambda h: (h["seq"], h["count"] or 0, h["at"] or _EPOCH))
    # Time only decides at the same sequence number: a clock stepped back must not make later records look gone.
    if (newest["seq"] > end["seq"] or (newest["count"] or 0) > end["count"]
            or (newest["seq"] == end["seq"] and newest["at"] and newest["at"] > end["at"])):
        first, last = end["seq"] + 1, max(newest["seq"], end["seq"] + 1)
        values = {"first": first, "last": last, "exported": newest["exported_at"], "seq": newest["seq"],
                  "count": newest["count"] if newest["count"] is not None else "?",
                  "at": instant(newest["at"]) or "?", "end": end["seq"], "end_count": end["count"],
                  "end_at": instant(end["at"]) or "-"}
        if first == last:
            problem = _("record #%(first)s is gone: the newest head exported (at %(exported)s) is #%(seq)s, "
                        "%(count)s records, the last written at %(at)s; the database's log ends at #%(end)s, "
                        "%(end_count)s records, the last written at %(end_at)s") % values
        else:
            problem = _("records #%(first)s to #%(last)s are gone: the newest head exported (at %(exported)s) is "
                        "#%(seq)s, %(count)s records, the last written at %(at)s; the database's log ends at "
                        "#%(end)s, %(end_count)s records, the last written at %(end_at)s") % values
        return Verification(False, 0, problem, first)
    stored = dict(AuditRecord.objects.filter(seq__in={h["seq"] for h in heads}).values_list("seq", "hash"))
    for checked, head in enumerate(heads):
        if head["seq"] not in stored:
            problem = _("record #%(seq)s is gone, yet the head exported at %(at)s was #%(seq)s (the log now ends "
                        "at #%(end)s)") % {"seq": head["seq"], "at": head["exported_at"], "end": end["seq"]}
            return Verification(False, checked, problem, head["seq"])
        if stored[head["seq"]] != head["hash"]:
            problem = _("record #%(seq)s differs from the head exported at %(at)s: the log was rewritten up to "
                        "it") % {"seq": head["seq"], "at": head["exported_at"]}
            return Verification(False, checked, problem, head["seq"])
    return Verification(True, len(heads))

