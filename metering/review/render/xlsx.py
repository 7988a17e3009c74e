"""The review pack as a spreadsheet: the review document (``metering.review.contract.ReviewDocument``) -> .xlsx
bytes.

Sheets: "Summary" first (the document's identity, coverage, the headline conclusions and the comparison with the
previous month), then one per group and one per appendix section, named after their titles. Figures are stored
as numbers (int/float cells with a number format), never as text, so that the reader can compute with them;
each chart's data is a small table (categories down, series across) with a native chart drawn beside it.

Text typed by people (job, project and tenant names) is stored as text even when it starts with "=": openpyxl
would otherwise write it as a formula, which the spreadsheet would run (gpuportal/text/exports.py has the same rule
for CSV).
"""

from __future__ import annotations

import io
import math
import re

from django.utils import translation
from django.utils.translation import gettext as _
from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter

from metering.review.contract import Chart, ReviewDocument, Section, plottable
from metering.review.parts import moment_text, text_width

MAX_SHEET_TITLE = 31
#: Excel refuses these in a sheet's name; "History" is its own reserved name.
SHEET_TITLE_FORBIDDEN = re.compile(r"[\[\]:*?/\\]")
RESERVED_SHEET_TITLES = {"history"}
#: Excel's limit for one cell's text.
MAX_CELL_CHARS = 32767
INT_FORMAT = "#,##0"
FLOAT_FORMAT = "#,##0.0#"
#: A figure's change: relative (0.123 reads "+12.3%") or, for percentages, in points (``points_format``).
RATIO_FORMAT = "+0.0%;-0.0%;0.0%"
MIN_WIDTH, MAX_WIDTH = 8, 60
#: A sheet's header row is frozen only when it is the sheet's one table and starts this high up (freezing
#: a long preamble with it would leave little room to scroll).
MAX_FROZEN_ROW = 10
#: A native chart is about this many rows high; the rows below its data are kept free for it.
CHART_ROWS = 16
HEADER_FILL = PatternFill("solid", fgColor="E8EDF3")


def sheet_title(title: str, used: set[str]) -> str:
    """A legal, unique sheet name for ``title``: no ``[]:*?/\\``, no quote at either end, 31 characters at most,
    not one already in ``used`` (compared without case, as Excel does); ``used`` gets the new name."""
    name = re.sub(r"\s+", " ", SHEET_TITLE_FORBIDDEN.sub(" ", ILLEGAL_CHARACTERS_RE.sub("", str(title or ""))))
    name = name.strip().strip("'").strip()[:MAX_SHEET_TITLE].strip() or _("Sheet")
    candidate, number = name, 1
    while candidate.lower() in used or candidate.lower() in RESERVED_SHEET_TITLES:
        number += 1
        suffix = f" ({number})"
        candidate = name[:MAX_SHEET_TITLE - len(suffix)].rstrip() + suffix
    used.add(candidate.lower())
    return candidate


def points_format() -> str:
    """The number format of a change in percentage points, its unit in the document's language."""
    unit = _("pts").replace('"', "")
    return f'+0.0" {unit}";-0.0" {unit}";0.0" {unit}"'


class _SheetWriter:
    """Writes a sheet top to bottom, one block after another, remembering each column's widest value."""

    def __init__(self, sheet):
        self.sheet = sheet
        self.row = 1
        self.widths: dict[int, float] = {}
        self.table_headers: list[int] = []

    def cell(self, row: int, column: int, value, *, measure: bool = True, bold: bool = False):
        cell = self.sheet.cell(row=row, column=column)
        if plottable(value) is not None:
            cell.value = value
            cell.number_format = INT_FORMAT if isinstance(value, int) else FLOAT_FORMAT
            text = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
        elif value is None or (isinstance(value, float) and not math.isfinite(value)):
            text = ""
        else:
            text = ILLEGAL_CHARACTERS_RE.sub("", str(value))[:MAX_CELL_CHARS]
            cell.value = text
            cell.data_type = "s"  # text, even when it starts with "=": never a formula
        if bold:
            cell.font = Font(bold=True)
        if measure and text:
            self.widths[column] = max(self.widths.get(column, 0), text_width(text))
        return cell

    def heading(self, text: str, size: int = 12) -> None:
        cell = self.cell(self.row, 1, text, measure=False)
        cell.font = Font(bold=True, size=size)
        self.row += 1

    def text(self, text: str) -> None:
        self.cell(self.row, 1, text, measure=False).alignment = Alignment(wrap_text=False)
        self.row += 1

    def pair(self, label: str, value, number_format: str | None = None) -> None:
        self.cell(self.row, 1, label, bold=True)
        cell = self.cell(self.row, 2, value, measure=False)
        if number_format and plottable(value) is not None:
            cell.number_format = number_format
        self.row += 1

    def blank(self) -> None:
        self.row += 1

    def table(self, columns: list, rows: list[list]) -> tuple[int, int]:
        """A bold header row and the rows under it; returns (header row, last row)."""
        header = self.row
        for column, title in enumerate(columns, 1):
            cell = self.cell(header, column, title, bold=True)
            cell.fill = HEADER_FILL
        for offset, values in enumerate(rows, 1):
            for column, value in enumerate(values, 1):
                self.cell(header + offset, column, value)
        self.table_headers.append(header)
        self.row = header + len(rows) + 1
        return header, self.row - 1

    def change_formats(self, header: int, column: int, figures) -> None:
        """The "Change" column holds numbers (a spreadsheet computes with them), shown as "+12.3 %" or, for figures
        that are percentages already, "+4.0 pts"; the words beside it say what a blank cell means ("new")."""
        for offset, figure in enumerate(figures, 1):
            if figure.change_number is not None:
                cell = self.sheet.cell(row=header + offset, column=column)
                cell.number_format = points_format() if figure.change_in_points else RATIO_FORMAT
                self.widths[column] = max(self.widths.get(column, 0), 10)

    def finish(self) -> None:
        """Column widths from the widest values; the header frozen when the sheet is one table."""
        for column, width in self.widths.items():
            self.sheet.column_dimensions[get_column_letter(column)].width = min(max(width + 2, MIN_WIDTH), MAX_WIDTH)
        if len(self.table_headers) == 1 and self.table_headers[0] <= MAX_FROZEN_ROW:
            self.sheet.freeze_panes = f"A{self.table_headers[0] + 1}"


class _Renderer:
    def __init__(self, review: ReviewDocument):
        self.review = review
        self.book = Workbook()
        self.used: set[str] = set()

    def sheet(self, title: str) -> _SheetWriter:
        if not self.used:  # the workbook's first, empty sheet becomes the summary
            sheet = self.book.active
            sheet.title = sheet_title(title, self.used)
        else:
            sheet = self.book.create_sheet(sheet_title(title, self.used))
        return _SheetWriter(sheet)

    def summary(self) -> None:
        review = self.review
        writer = self.sheet(_("Summary"))
        coverage = review.coverage
        snapshot = review.snapshot_id
        writer.heading(review.title, size=14)
        writer.pair(_("Site"), review.site)
        writer.pair(_("Month"), review.month)
        if review.tenant:
            writer.pair(_("Tenant"), review.tenant)
        else:
            writer.pair(_("Scope"), _("Platform"))
        writer.pair(_("Generated"), moment_text(review.generated_at))
        writer.pair(_("Snapshot"), snapshot if snapshot is not None else _("live figures, not frozen"),
                    number_format="0")  # an id: no thousands separator
        writer.pair(_("Coverage"), coverage.text)
        writer.pair(_("Days with data"), coverage.days_with_data)
        writer.pair(_("Days expected (elapsed)"), coverage.days_expected)
        writer.pair(_("Days in the month"), coverage.days_in_month)
        writer.blank()
        writer.heading(_("Summary"))
        for line in review.summary:
            writer.text(line)
        comparison = review.comparison
        if comparison.rows:
            writer.blank()
            previous = comparison.previous_month
            writer.heading(_("Compared with %(month)s") % {"month": previous} if previous
                           else _("Compared with last month"))
            header, _last = writer.table(
                [_("Figure"), _("This month"), _("Previous month"), _("Unit"), _("Change"), _("Change in words")],
                [[row.label, row.value, row.previous, row.unit, row.change_number, row.change or None]
                 for row in comparison.rows])
            writer.change_formats(header, 5, comparison.rows)
        writer.finish()

    def section(self, section: Section) -> None:
        writer = self.sheet(section.title)
        writer.heading(section.title, size=14)
        if section.question:
            writer.text(section.question)
        if section.conclusions:
            writer.blank()
            writer.heading(_("Conclusions"))
            for line in section.conclusions:
                writer.text(line)
        if section.figures:
            writer.blank()
            writer.heading(_("Figures"))
            header, _last = writer.table(
                [_("Figure"), _("Value"), _("Unit"), _("Previous month"), _("Change"), _("Change in words")],
                [[f.label, f.value, f.unit, f.previous, f.change_number, f.change] for f in section.figures])
            writer.change_formats(header, 5, section.figures)
        for table in section.tables:
            writer.blank()
            writer.heading(table.title)
            if table.rows:
                writer.table(table.columns, table.rows)
            else:
                writer.text(_("No data"))
        for chart in section.charts:
            writer.blank()
            self.chart(writer, chart)
        writer.finish()

    def chart(self, writer: _SheetWriter, chart: Chart) -> None:
        """The chart's data as a table (categories down, one column per series) and a native chart beside it."""
        writer.heading(chart.title)
        if not chart.has_data:
            writer.text(_("No data"))
            return
        series = chart.series
        rows = [[category, *[(s.values[i] if i < len(s.values) else None) for s in series]]
                for i, category in enumerate(chart.categories)]
        header, last = writer.table([chart.x_label or _("Category"), *[s.name for s in series]], rows)
        native = LineChart() if chart.kind == "line" else BarChart()
        native.title = chart.title or None
        native.x_axis.title = chart.x_label or None
        native.y_axis.title = chart.y_label or None
        native.width, native.height = 16, 7.5
        native.add_data(Reference(writer.sheet, min_col=2, max_col=1 + len(series), min_row=header, max_row=last),
                        titles_from_data=True)
        native.set_categories(Reference(writer.sheet, min_col=1, min_row=header + 1, max_row=last))
        writer.sheet.add_chart(native, f"{get_column_letter(len(series) + 3)}{header}")
        writer.row = max(writer.row, header + CHART_ROWS)


def render_xlsx(review: ReviewDocument) -> bytes:
    """The review document as the bytes of an .xlsx workbook (see the module's docstring for its sheets)."""
    with translation.override(review.language or "en"):
        renderer = _Renderer(review)
        book = renderer.book
        book.properties.title = str(review.title or "")
        book.properties.creator = str(review.site or "")
        book.properties.subject = _("Monthly review %(month)s — %(scope)s") % {
            "month": review.month, "scope": review.tenant or _("Platform")}
        renderer.summary()
        for section in review.sections:
            renderer.section(section)
        buffer = io.BytesIO()
        book.save(buffer)
        return buffer.getvalue()
