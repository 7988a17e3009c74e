"""The review document: what ``build_review`` hands the renderers (PDF, spreadsheet, charts), as typed records.

One document per month and scope (the platform, or one tenant). It opens with its identity (title, site, month,
tenant, when it was made, from which frozen report, in which language), says how much of the month the data
covers, sums the month up, puts the headline figures beside the previous month's, then answers one question per
group (resources, tasks, governance, improvements) with conclusions, figures, tables and charts; the platform's
document ends with an appendix (the acceptance checklist) in the same shape as a group.

Every string is already in the document's language: the builder translates, the renderers only lay out (and
translate their own chrome: "Contents", "Page 3 of 9"). Numbers stay numbers (the spreadsheet keeps them so);
None is "not known" and shows as "—" or an empty cell, never as 0.

The records are frozen: a renderer cannot change the document another renderer reads after it. ``to_json``
gives the plain JSON shape (lists and dicts, the keys named as the fields) and ``from_json`` reads it back,
tolerating the optional keys a hand-written document leaves out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

#: A table cell: a number where it is a figure (the spreadsheet keeps it as a number), text otherwise, None for
#: "not known" (an empty cell, "—" on paper).
Cell = str | int | float | None
#: A figure's value: a count, an amount, hours, a percentage (0..100) or None when it is not known.
Number = int | float | None
ChartKind = Literal["bar", "line"]


def plottable(value: Any) -> float | None:
    """A plottable number, or None for a gap (None, text, NaN, infinity, bool)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


@dataclass(frozen=True, slots=True)
class Figure:
    """One headline figure of a group, with the previous month's beside it.

    ``key`` names the figure for code and tests (``gpu_hours_allocated``, ``wait_p95``); ``label`` is its
    translated name. ``value`` and ``previous`` are in ``unit`` (translated: "GPU-hours", "hours", a currency
    code, "%" for percentages 0..100, "" for counts); None where not known. ``change`` is how the value moved,
    worded once by the builder for every renderer: "+12.3 %", "+4.0 pts" for percentages, "unchanged", "new",
    "—" when either is unknown, or "month open: 10 of 31 days" while the month is open. ``change_number`` is the
    same move as a number, for a spreadsheet to compute with: the relative change (0.123 for "+12.3 %"), or the
    difference in points where ``change_in_points`` ("+4.0 pts"); None where the change is words only."""

    key: str
    label: str
    value: Number
    unit: str = ""
    previous: Number = None
    change: str = ""
    change_number: float | None = None
    change_in_points: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        return cls(key=data.get("key", ""), label=data.get("label", ""), value=data.get("value"),
                   unit=data.get("unit") or "", previous=data.get("previous"), change=data.get("change") or "",
                   change_number=data.get("change_number"), change_in_points=bool(data.get("change_in_points")))


@dataclass(frozen=True, slots=True)
class Table:
    """A table of a group: ``columns`` are the translated headers, each row a list of cells in their order
    (numbers as numbers: amounts in the unit its column header names, percentages 0..100)."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Table:
        return cls(key=data.get("key", ""), title=data.get("title", ""),
                   columns=[str(c) for c in data.get("columns") or []],
                   rows=[list(row) for row in data.get("rows") or []])


@dataclass(frozen=True, slots=True)
class Series:
    """One line or one set of bars: its legend ``name`` and one value per category of its chart, in the chart's
    y unit (None: a gap)."""

    name: str
    values: list[Number]


@dataclass(frozen=True, slots=True)
class Chart:
    """A chart of a group: ``kind`` "bar" (grouped bars when several series) or "line"; ``categories`` are the
    x axis labels (days "01".."31", GPU models, months "2026-10"); ``x_label`` and ``y_label`` the axes' titles
    (the y one names the unit: "GPU-hours", "hours", "GPUs", a currency)."""

    key: str
    title: str
    kind: ChartKind
    x_label: str
    y_label: str
    categories: list[str]
    series: list[Series]

    @property
    def has_data(self) -> bool:
        """Whether there is at least one category and one plottable value (else the renderers say "No data").
        A series of zeros has data: "no failure on any day" is a figure."""
        if not self.categories:
            return False
        return any(plottable(value) is not None for one in self.series for value in one.values)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Chart:
        return cls(key=data.get("key", ""), title=data.get("title", ""), kind=data.get("kind") or "bar",
                   x_label=data.get("x_label") or "", y_label=data.get("y_label") or "",
                   categories=[str(c) for c in data.get("categories") or []],
                   series=[Series(str(s.get("name") or ""), list(s.get("values") or []))
                           for s in data.get("series") or []])


@dataclass(frozen=True, slots=True)
class Section:
    """A group of the document (or an appendix section): the ``question`` it answers, its ``conclusions``
    (sentences computed from the figures beside them, the first one the summary quotes), then its figures,
    tables and charts, each in the order shown. ``key`` is one of ``document.GROUP_KEYS`` or "acceptance"."""

    key: str
    title: str
    question: str = ""
    conclusions: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)

    def table(self, key: str) -> Table:
        """The table named ``key`` (StopIteration when there is none)."""
        return next(t for t in self.tables if t.key == key)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Section:
        return cls(key=data.get("key", ""), title=data.get("title", ""), question=data.get("question") or "",
                   conclusions=list(data.get("conclusions") or []),
                   figures=[Figure.from_json(f) for f in data.get("figures") or []],
                   tables=[Table.from_json(t) for t in data.get("tables") or []],
                   charts=[Chart.from_json(c) for c in data.get("charts") or []])


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of the month the rollup covered: ``days_with_data`` of ``days_expected`` (the month's days up to
    the document's making: all of them once it closed, none before it starts) of ``days_in_month``; ``complete``
    when none is missing; ``text`` says it in a sentence (the summary repeats it when incomplete)."""

    complete: bool
    days_with_data: int
    days_expected: int
    days_in_month: int
    text: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Coverage:
        return cls(complete=bool(data.get("complete")), days_with_data=data.get("days_with_data") or 0,
                   days_expected=data.get("days_expected") or 0, days_in_month=data.get("days_in_month") or 0,
                   text=data.get("text") or "")


@dataclass(frozen=True, slots=True)
class Comparison:
    """The headline figures of the month beside the previous month's (``previous_month``: "2026-09"): the
    groups' own figures, in ``document.COMPARISON_KEYS`` order."""

    previous_month: str
    rows: list[Figure]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Comparison:
        return cls(previous_month=data.get("previous_month") or "",
                   rows=[Figure.from_json(row) for row in data.get("rows") or []])


@dataclass(frozen=True, slots=True)
class ReviewDocument:
    """The whole review pack of one month and scope.

    ``month`` is "2026-10"; ``tenant`` the tenant's name, None for the platform's document; ``generated_at``
    an ISO 8601 moment with its offset; ``snapshot_id`` the frozen ``MonthlyReport`` the figures come from (None:
    live figures of an open or not yet frozen month); ``language`` the code every string is in ("en",
    "zh-hans"). ``summary`` is the headline in sentences; ``groups`` the four groups in ``document.GROUP_KEYS``
    order; ``appendix`` the acceptance checklist in the platform's document, empty in a tenant's."""

    title: str
    site: str
    month: str
    tenant: str | None
    generated_at: str
    snapshot_id: int | None
    language: str
    coverage: Coverage
    summary: list[str]
    comparison: Comparison
    groups: list[Section]
    appendix: list[Section] = field(default_factory=list)

    @property
    def sections(self) -> list[Section]:
        """The groups, then the appendix: every section the renderers lay out after the summary."""
        return [*self.groups, *self.appendix]

    def group(self, key: str) -> Section:
        """The group named ``key`` (one of ``document.GROUP_KEYS``; StopIteration when there is none)."""
        return next(g for g in self.groups if g.key == key)

    def to_json(self) -> dict[str, Any]:
        """The document as plain JSON data, keys named as the fields."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReviewDocument:
        return cls(title=data.get("title") or "", site=data.get("site") or "", month=data.get("month") or "",
                   tenant=data.get("tenant"), generated_at=data.get("generated_at") or "",
                   snapshot_id=data.get("snapshot_id"), language=data.get("language") or "en",
                   coverage=Coverage.from_json(data.get("coverage") or {}), summary=list(data.get("summary") or []),
                   comparison=Comparison.from_json(data.get("comparison") or {}),
                   groups=[Section.from_json(g) for g in data.get("groups") or []],
                   appendix=[Section.from_json(a) for a in data.get("appendix") or []])
