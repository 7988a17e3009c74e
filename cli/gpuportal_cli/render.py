"""Human output: aligned tables, times in the reader's time zone with how far away they are, durations."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta

from .i18n import gettext_ as _

EMPTY = "-"


def cell(value) -> str:
    if value is None or value == "" or value == []:
        return EMPTY
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def width(text: str) -> int:
    """Columns ``text`` takes in a terminal: a wide character (Chinese, full-width punctuation) takes two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def _pad(text: str, columns: int) -> str:
    return text + " " * (columns - width(text))


def table(headers: list[str], rows: list[list]) -> str:
    """Columns padded to their widest cell, measured in terminal columns (a Chinese header is twice as wide as
    its length); the last column is not padded (it may be a sentence)."""
    cells = [[cell(value) for value in row] for row in rows]
    widths = [max([width(header), *(width(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lines = []
    for row in [headers, *cells]:
        lines.append("  ".join(_pad(value, columns) for value, columns in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def duration(delta: timedelta) -> str:
    """``2 d 3 h``, ``1 h 5 min``, ``40 s``: two units at most."""
    seconds = int(abs(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return _("%(d)s d %(h)s h") % {"d": days, "h": hours}
    if hours:
        return _("%(h)s h %(m)s min") % {"h": hours, "m": minutes}
    if minutes:
        return _("%(m)s min") % {"m": minutes}
    return _("%(s)s s") % {"s": seconds}


def when(text: str | None, relative: bool = True) -> str:
    """An API timestamp as local ``YYYY-MM-DD HH:MM``, with ``(in 1 h 5 min)`` or ``(3 min ago)``."""
    moment = parse_time(text)
    if moment is None:
        return EMPTY
    local = moment.astimezone()
    shown = local.strftime("%Y-%m-%d %H:%M")
    if not relative:
        return shown
    delta = moment - datetime.now(UTC)
    if abs(delta) < timedelta(seconds=30):
        return _("%(t)s (now)") % {"t": shown}
    if delta > timedelta(0):
        return _("%(t)s (in %(d)s)") % {"t": shown, "d": duration(delta)}
    return _("%(t)s (%(d)s ago)") % {"t": shown, "d": duration(delta)}


def size(job: dict) -> str:
    """``nodes x GPUs per node [x share] model``, as the portal's queue writes a job's size."""
    share = job.get("gpu_share")
    share_text = f" x {share:g}" if isinstance(share, int | float) and share < 1 else ""
    return f"{job.get('nodes') or 1} x {job.get('gpus_per_node')}{share_text} {job.get('gpu_model', '')}"


def placement(job: dict) -> str:
    return ", ".join(f"{p['node']} [{','.join(str(g) for g in p['gpus'])}]" for p in job.get("placement") or []) \
        or EMPTY
