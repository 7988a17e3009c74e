"""Readable values: durations as "6 h 0 min", moments as "in 2 h" / "5 min ago" and figures with their
thousands grouped, translated."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, pgettext


def duration_parts(seconds: float) -> tuple[str, dict]:
    """The message id and numbers of a duration (``duration_text`` reads them now; a stored phrase later)."""
    seconds = int(round(abs(seconds)))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return gettext_noop("%(d)d d %(h)d h"), {"d": days, "h": hours}
    if hours:
        return gettext_noop("%(h)d h %(m)d min"), {"h": hours, "m": minutes}
    if minutes:
        return gettext_noop("%(m)d min"), {"m": minutes}
    return gettext_noop("%(s)d s"), {"s": secs}


def duration_text(seconds: float) -> str:
    """``21600`` -> "6 h 0 min"; under a minute in seconds, from a day in days and hours."""
    msgid, numbers = duration_parts(seconds)
    return _(msgid) % numbers


def relative_time(moment: datetime | None, now: datetime | None = None) -> str:
    """"in 2 h 5 min", "12 min ago", or "just now" (within a minute)."""
    if moment is None:
        return ""
    delta = (moment - (now or timezone.now())).total_seconds()
    if abs(delta) < 60:
        return _("just now")
    text = duration_text(delta)
    return _("in %(duration)s") % {"duration": text} if delta > 0 else _("%(duration)s ago") % {"duration": text}


def figure_text(value) -> str:
    """A number for reading: thousands grouped in the reader's language ("12,345.6"); a dash for none.

    Grouping is not switched on site-wide (``USE_THOUSAND_SEPARATOR``): ids in links and forms must stay
    plain, so the pages group the figures they show, and only those."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return str(value)
    return number_format(value, force_grouping=True)


def list_text(items, clauses: bool = False) -> str:
    """Items joined for a sentence in the reader's language: "a, b" ("a、b" in Chinese); ``clauses`` joins
    whole phrases: "a; b" ("a；b")."""
    separator = pgettext("separator of clauses", "; ") if clauses else pgettext("separator of list items", ", ")
    return separator.join(str(item) for item in items)
