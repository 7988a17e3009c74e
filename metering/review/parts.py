"""Building blocks of the review document (``metering.review.document``): the context every group reads, the builders
of a group, figure, table and chart (the records of ``metering.review.contract``), and the few unit conversions
they share.

Kept apart from ``document`` and ``groups`` so both use one builder of each record and one rule for "hours",
"percent" and "+12 %" without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.utils.translation import gettext as _

from gpuportal.text.dates import local_day, next_month
from gpuportal.text.formatting import figure_text
from metering.reports.contract import MonthlyReportData
from metering.review.contract import Cell, Chart, ChartKind, Figure, Number, Section, Series, Table
from tenants.models import Tenant


@dataclass
class ReviewContext:
    """What every group reads: the month (its first day), its scope (None: the platform), the moment the
    document is made, the month's report and the previous month's (empty when that month has no data at all:
    "—" beside each figure, not zeros that make every figure "new")."""

    month: date
    tenant: Tenant | None
    now: datetime
    report: MonthlyReportData
    previous: MonthlyReportData
    previous_month: date

    @property
    def platform(self) -> bool:
        return self.tenant is None

    @property
    def month_text(self) -> str:
        return f"{self.month:%Y-%m}"

    @property
    def window(self) -> tuple[date, date]:
        """The month's first day and the next month's (half-open)."""
        return self.month, next_month(self.month)

    @property
    def days_in_month(self) -> int:
        return (next_month(self.month) - self.month).days

    @property
    def days_elapsed(self) -> int:
        """The month's days up to today (all of them once it is over, none before it starts)."""
        last = min(next_month(self.month) - timedelta(days=1), local_day(self.now))
        return max((last - self.month).days + 1, 0)

    @property
    def is_open(self) -> bool:
        return 0 < self.days_elapsed < self.days_in_month


def group(key: str, title: str, question: str, conclusions: Iterable[str | None], figures: Iterable[Figure],
          tables: Iterable[Table | None], charts: Iterable[Chart | None]) -> Section:
    """A group with the conclusions, tables and charts that came out empty (None, "") left out."""
    return Section(key=key, title=title, question=question, conclusions=[c for c in conclusions if c],
                   figures=list(figures), tables=[t for t in tables if t is not None],
                   charts=[c for c in charts if c is not None])


def month_open_change(ctx: ReviewContext) -> str | None:
    """The change a figure shows while its month is open ("month open: 10 of 31 days"); None once closed.

    Totals of part of a month against a whole month would read as a fall in everything, and the medians and
    percentiles of its first hours are the few jobs that ended in them: no change is worked out until it closes."""
    if not ctx.is_open:
        return None
    return _("month open: %(n)d of %(total)d days") % {"n": ctx.days_elapsed, "total": ctx.days_in_month}


def figure(key: str, label: str, value: Number, unit: str = "", previous: Number = None) -> Figure:
    """A figure with its change from the previous month, worked out here once (``change_text``) for every
    renderer: percentages move in points, other figures in per cent."""
    points = unit == "%"
    return Figure(key=key, label=label, value=value, unit=unit, previous=previous,
                  change=change_text(value, previous, points=points),
                  change_number=change_number(value, previous, points=points), change_in_points=points)


def table(key: str, title: str, columns: list[str], rows: list[list[Cell]]) -> Table:
    """Cells are numbers where they are figures (the spreadsheet keeps them as numbers), text otherwise."""
    return Table(key=key, title=title, columns=[str(c) for c in columns], rows=rows)


def chart(key: str, title: str, kind: ChartKind, x_label: str, y_label: str, categories: list[str],
          series: list[tuple[str, list]]) -> Chart | None:
    """A chart, or None when there is nothing to draw (``Chart.has_data``: the rule the renderers apply to a
    document they are given). A series of zeros is drawn: "no failure on any day" is a figure."""
    built = Chart(key=key, title=title, kind=kind, x_label=x_label, y_label=y_label,
                  categories=[str(c) for c in categories],
                  series=[Series(name=str(name), values=list(values)) for name, values in series])
    return built if built.has_data else None


def chart_has_data(chart: Chart) -> bool:
    """Whether the chart has at least one category and one plottable value (else the renderers say "No data")."""
    return chart.has_data


def choice_label(choices, code: str) -> str:
    """The translated label of a TextChoices code (the code itself when it is not one, "unclassified" when
    empty): frozen snapshots may hold codes a later version renamed."""
    try:
        return str(choices(code).label)
    except ValueError:
        return code or _("unclassified")


def yes_no(flag: bool) -> str:
    return _("yes") if flag else _("no")


def hours(seconds) -> float | None:
    """Seconds -> hours, two decimals (waits and run times are read in hours)."""
    return None if seconds is None else round(float(seconds) / 3600, 2)


def percent(fraction, digits: int = 1) -> float | None:
    """A fraction 0..1 -> a percentage."""
    return None if fraction is None else round(float(fraction) * 100, digits)


def percent_text(fraction: float) -> str:
    """A fraction as a percentage for a sentence: "62", or "99.7" where rounding to a whole number would
    claim "100" (or "0") for what is not quite all (or nothing): "99.9", never "100.0"."""
    return _percent_digits(fraction * 100, 0)


def _percent_digits(value: float, digits: int) -> str:
    """``value`` (a percentage, 0 or more) with ``digits`` decimals, one more where rounding would claim "100" or
    "0" for what is not quite all or not quite nothing (rounded toward it, so never quite reaching it)."""
    text = f"{value:.{digits}f}"
    scale = 10 ** (digits + 1)
    if float(text) == 100 and value < 100:
        return f"{math.floor(value * scale) / scale:.{digits + 1}f}"
    if float(text) == 0 and value > 0:
        return f"{math.ceil(value * scale) / scale:.{digits + 1}f}"
    return text


def share(part, whole) -> float | None:
    """``part`` / ``whole`` as a percentage (None when ``whole`` is nothing)."""
    return round(100 * (part or 0) / whole, 1) if whole else None


def whole(value) -> str:
    """A figure for a sentence: no ".0" on whole numbers, thousands grouped in the reader's language."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return figure_text(value)


def change_number(value, previous, points: bool = False) -> float | None:
    """The move ``change_text`` words, as a number: the difference in points, or the relative change (0.123 for
    "+12.3 %"); None where it is words only ("new", unknown)."""
    if value is None or previous is None:
        return None
    difference = float(value) - float(previous)
    if abs(difference) < 1e-9:
        return 0.0
    if points:
        return round(difference, 4)
    if not previous:
        return None
    return round(difference / abs(float(previous)), 6)


def change_text(value, previous, points: bool = False) -> str:
    """How ``value`` moved from ``previous``: "+12.3 %" (or "+4.0 pts" for figures that are percentages
    already), "unchanged", "new" when there was nothing before, a dash when either is unknown."""
    if value is None or previous is None:
        return "—"
    difference = float(value) - float(previous)
    if abs(difference) < 1e-9:
        return _("unchanged")
    if points:
        return _("%(sign)s%(n)s pts") % {"sign": "+" if difference > 0 else "−", "n": f"{abs(difference):.1f}"}
    if not previous:
        return _("new")
    relative = difference / abs(float(previous)) * 100  # all but gone is "−99.95 %", never "−100.0 %"
    return f"{'+' if relative > 0 else '−'}{_percent_digits(abs(relative), 1)} %"


# --- text shared by the renderers --------------------------------------------------------------------------------


def is_chinese(language: str) -> bool:
    """Whether a document in ``language`` is set in Chinese (its font, its line breaking, its chart labels)."""
    return (language or "").lower().startswith("zh")


def number_text(value) -> str:
    """A figure for reading: thousands grouped in the document's language, floats to two decimals at most,
    "—" for None; text as it is."""
    if isinstance(value, float) and math.isfinite(value):
        value = round(value, 2)
    return figure_text(value)


def moment_text(value) -> str:
    """An ISO datetime as "2026-11-01 08:00 UTC" (its own offset kept); other text as it is."""
    try:
        moment = datetime.fromisoformat(str(value))
    except (TypeError, ValueError):
        return str(value or "")
    offset = moment.utcoffset()
    if offset is None:
        return f"{moment:%Y-%m-%d %H:%M}"
    if not offset:
        return f"{moment:%Y-%m-%d %H:%M} UTC"
    zone = moment.strftime("%z")
    return f"{moment:%Y-%m-%d %H:%M} UTC{zone[:3]}:{zone[3:]}"


def text_width(text: str) -> int:
    """Characters a text takes on paper or in a spreadsheet column: CJK characters count double."""
    return sum(2 if ord(char) > 0x2E7F else 1 for char in text)
