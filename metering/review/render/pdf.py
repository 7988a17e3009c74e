"""The review pack as a PDF: the review document (``metering.review.contract.ReviewDocument``) -> PDF bytes.

reportlab's platypus lays it out: a title page, a table of contents, the summary and the comparison with the
previous month, then one section per group (Resources, Tasks, Governance, Improvements) and per appendix section,
each starting on a new page. Every page has a footer "site · title · Page N of M" and the generated time; "of M"
needs the page count before any page is finished, so the canvas keeps its pages and draws the footers when the
document is saved (``_FooterCanvas``). The table of contents needs the pages of the headings, so the document is
laid out more than once (``multiBuild``).

Fonts: the file of settings ``REVIEW_PACK["CJK_FONT"]`` (WenQuanYi Micro Hei) draws every text of every language
when it exists — an English document still names tenants, projects and GPU models people typed, possibly in
Chinese, and one font keeps both languages' packs alike. Without it Chinese documents use reportlab's built-in
STSong-Light (readers supply its glyphs), English ones Helvetica.

The document's strings are already translated by its builder; this module translates only its own chrome
("Contents", "Page 3 of 9", ...), in the document's language.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from functools import cache
from xml.sax.saxutils import escape

from django.utils import translation
from django.utils.translation import gettext as _
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfbase.ttfonts import TTFError, TTFont
from reportlab.pdfgen import canvas
from reportlab.platypus import (
    BaseDocTemplate,
    CondPageBreak,
    Frame,
    Image,
    KeepTogether,
    PageBreak,
    PageTemplate,
    Paragraph,
    Spacer,
    Table,
    TableStyle,
)
from reportlab.platypus.tableofcontents import TableOfContents

from metering.review.contract import Chart, ReviewDocument, Section, plottable
from metering.review.contract import Table as DataTable
from metering.review.parts import is_chinese, moment_text, number_text, text_width
from metering.review.render.charts import chart_png, cjk_font_path

logger = logging.getLogger(__name__)

PAGE_SIZE = A4
MARGIN = 18 * mm
BOTTOM_MARGIN = 22 * mm
#: A group starts on the page where the one before ended when this much height is left, else on a new page
#: (a page break before each group left pages with a few lines on them).
GROUP_ROOM = 110 * mm
#: A table whose rows carry more text than this on average (and at least ``RECORD_MIN_COLUMNS`` columns) is set
#: as one block per row, label beside value: as a grid, its narrow columns made a wall of text.
RECORD_MEAN_CHARS = 240
RECORD_MIN_COLUMNS = 4
#: The label column of a row set as a block.
RECORD_LABEL_WIDTH = 32 * mm
#: A table cell longer than this is cut (with "…"): one cell taller than a page cannot be laid out at all.
MAX_CELL_CHARS = 600
#: Charts are drawn across the text width at the PNG's 2:1 shape (charts.FIGURE_INCHES).
CHART_ASPECT = 0.5
FALLBACK_CJK_FONT = "STSong-Light"
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
LATIN_FONT = "Helvetica"
HEADER_BACKGROUND = colors.HexColor("#E8EDF3")
GRID = colors.HexColor("#B8C2CC")
MUTED = colors.HexColor("#555555")


# --- fonts ----------------------------------------------------------------------------------------------------


@cache
def _registered_ttf(path: str) -> str:
    """Registers the font file once per process and returns its reportlab name.

    The name comes from the path, so another configured file is another font. The same face is registered as
    its own bold and italic: the font has no such faces, and the family mapping keeps ``<b>`` from failing."""
    name = "Review-" + hashlib.sha1(path.encode(), usedforsecurity=False).hexdigest()[:10]
    pdfmetrics.registerFont(TTFont(name, path, subfontIndex=0))
    pdfmetrics.registerFontFamily(name, normal=name, bold=name, italic=name, boldItalic=name)
    return name


@cache
def _registered_cid() -> str:
    pdfmetrics.registerFont(UnicodeCIDFont(FALLBACK_CJK_FONT))
    return FALLBACK_CJK_FONT


def font_name(language: str) -> str:
    """The reportlab font that draws the document's text (see the module's docstring for the choice)."""
    path = cjk_font_path()
    if path is not None:
        try:
            return _registered_ttf(str(path))
        except (TTFError, OSError, ValueError) as error:  # a broken file: warn and fall back, never fail the pack
            logger.warning("review pack: cannot use the font %s (%s); falling back", path, error)
    return _registered_cid() if is_chinese(language) else LATIN_FONT


# --- text -----------------------------------------------------------------------------------------------------


def value_with_unit(value, unit: str) -> str:
    """"12,345.5 GPU-hours"; "—" alone when there is no value."""
    if value is None:
        return "—"
    return f"{number_text(value)} {unit}".strip() if unit else number_text(value)


def _markup(text) -> str:
    """Document text made safe for a Paragraph (which reads a small XML markup, and no control characters)."""
    return escape(CONTROL_CHARACTERS.sub("", str(text if text is not None else "")))


def _cell_text(text) -> str:
    text = str(text)
    return text[:MAX_CELL_CHARS - 1] + "…" if len(text) > MAX_CELL_CHARS else text


#: Chinese and full-width characters: a line may break before or after any of them.
_CJK = "\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef"
_TOKENS = re.compile(rf"\s+|[{_CJK}]|[^\s{_CJK}]+")
#: Punctuation that never starts a line: it stays at the end of the one before.
_NO_LINE_START = set("，。、；：？！）》」』】,.;:?!)]}%")


def break_lines(text: str, font: str, size: float, width: float) -> list[str]:
    """``text`` broken into lines of at most ``width`` points: between Chinese characters, at spaces, and inside
    a Latin word or number only when it is longer than a line (after a hyphen or slash first).

    ReportLab's CJK wrap breaks between any two characters and looks back only half a line for a better place,
    so narrow cells cut "GPU" and node names ("dc1-r1-h100-0" / "2" reads as another node)."""
    def measure(piece: str) -> float:
        return pdfmetrics.stringWidth(piece, font, size)

    lines, line = [], ""
    for token in _TOKENS.findall(str(text)):
        if token.isspace():
            if "\n" in token:
                lines.append(line.rstrip())
                line = ""
            elif line:
                line += " "
            continue
        for piece in _pieces(token, measure, width):
            if line.strip() and measure(line + piece) > width and piece not in _NO_LINE_START:
                lines.append(line.rstrip())
                line = piece
            else:
                line += piece
    lines.append(line.rstrip())
    return lines


def _pieces(token: str, measure, width: float) -> list[str]:
    """A token as pieces no wider than ``width``: whole when it fits, else cut after hyphens and slashes, and a
    piece still too wide character by character."""
    if measure(token) <= width:
        return [token]
    pieces = []
    for part in re.findall(r"[^-/_]*[-/_]+|[^-/_]+", token):
        while measure(part) > width and len(part) > 1:
            cut = max(1, next((i for i in range(len(part), 0, -1) if measure(part[:i]) <= width), 1))
            pieces.append(part[:cut])
            part = part[cut:]
        pieces.append(part)
    return pieces


class _BrokenParagraph(Paragraph):
    """A Chinese paragraph whose lines ``break_lines`` decides for the width it is laid out in (a table
    column's width is known only then); the parts ReportLab makes when it splits one over pages are plain."""

    def __init__(self, text, style=None, bulletText=None, frags=None, **kwargs):
        self._source = None if frags is not None or text is None else str(text)
        self._broken_for = None
        super().__init__(_markup(text) if self._source is not None else text, style, bulletText, frags, **kwargs)

    def wrap(self, availWidth, availHeight):
        if self._source is not None and availWidth != self._broken_for:
            self._broken_for = availWidth
            room = availWidth - self.style.leftIndent - self.style.rightIndent - 1
            markup = "<br/>".join(_markup(line) for line in break_lines(
                self._source, self.style.fontName, self.style.fontSize, room))
            Paragraph.__init__(self, markup, self.style, self.bulletText)
        return super().wrap(availWidth, availHeight)


def _paragraph(text, style: ParagraphStyle, **kwargs) -> Paragraph:
    """Document text as a paragraph: Chinese ones (``wordWrap`` "CJK") broken into lines by ``break_lines``."""
    if style.wordWrap == "CJK":
        return _BrokenParagraph("" if text is None else text, style, **kwargs)
    return Paragraph(_markup(text), style, **kwargs)


# --- styles ---------------------------------------------------------------------------------------------------


def _styles(font: str, language: str) -> dict[str, ParagraphStyle]:
    """Paragraph styles in the document's font; Chinese text wraps between any two characters (no spaces)."""
    wrap = "CJK" if is_chinese(language) else None
    base = ParagraphStyle("body", fontName=font, fontSize=10, leading=14, spaceAfter=4, wordWrap=wrap)

    def style(name: str, **changes) -> ParagraphStyle:
        return ParagraphStyle(name, parent=base, **changes)

    return {
        "body": base,
        "site": style("site", fontSize=12, leading=16, textColor=MUTED, spaceAfter=6),
        "title": style("title", fontSize=24, leading=30, spaceBefore=40, spaceAfter=18),
        "meta": style("meta", fontSize=10, leading=14, spaceAfter=2),
        "contents": style("contents", fontSize=18, leading=24, spaceAfter=12),
        "heading": style("heading", fontSize=18, leading=24, spaceAfter=6, keepWithNext=1),
        "question": style("question", fontSize=11, leading=15, textColor=MUTED, spaceAfter=8),
        "subheading": style("subheading", fontSize=12, leading=16, spaceBefore=10, spaceAfter=4, keepWithNext=1),
        "bullet": style("bullet", leftIndent=12, bulletIndent=2, spaceAfter=2),
        "cell": style("cell", fontSize=8, leading=10, spaceAfter=0),
        "header": style("header", fontSize=8, leading=10, spaceAfter=0),
        "header_number": style("header_number", fontSize=8, leading=10, spaceAfter=0, alignment=TA_RIGHT),
        "no_data": style("no_data", textColor=MUTED, spaceAfter=8),
        "record_title": style("record_title", fontSize=10, leading=13, spaceBefore=6, spaceAfter=2, keepWithNext=1),
        "record_label": style("record_label", fontSize=8, leading=10, spaceAfter=0, textColor=MUTED),
        "toc": style("toc", fontSize=11, leading=16, spaceAfter=0),
    }


# --- page furniture -------------------------------------------------------------------------------------------


def _footer_canvas(font: str, site: str, title: str, generated: str):
    """A canvas class that holds its pages back until the document is saved, so that each footer can say
    "Page N of M" (reportlab's documented two-pass numbering recipe)."""

    class _FooterCanvas(canvas.Canvas):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._held_pages: list[dict] = []

        def showPage(self):  # noqa: N802 (reportlab's name)
            self._held_pages.append(dict(self.__dict__))
            self._startPage()

        def save(self):
            total = len(self._held_pages)
            for number, state in enumerate(self._held_pages, 1):
                self.__dict__.update(state)
                self._draw_footer(number, total)
                super().showPage()
            super().save()

        def _draw_footer(self, number: int, total: int) -> None:
            width, _height = self._pagesize
            size = 8
            self.saveState()
            self.setFont(font, size)
            self.setFillColor(MUTED)
            self.setStrokeColor(GRID)
            self.setLineWidth(0.4)
            y = BOTTOM_MARGIN / 2
            self.line(MARGIN, y + 10, width - MARGIN, y + 10)
            right = _("Generated %(moment)s") % {"moment": generated}
            page = _("Page %(n)s of %(m)s") % {"n": number, "m": total}
            room = width - 2 * MARGIN - pdfmetrics.stringWidth(right, font, size) - 12
            left = f"{site} · {title} · {page}"
            shown_title = title
            while len(shown_title) > 1 and pdfmetrics.stringWidth(left, font, size) > room:
                shown_title = shown_title[:-2] + "…"  # a long title gives way; the page number always shows
                left = f"{site} · {shown_title} · {page}"
            self.drawString(MARGIN, y, left)
            self.drawRightString(width - MARGIN, y, right)
            self.restoreState()

    return _FooterCanvas


class _ReviewDocTemplate(BaseDocTemplate):
    """One page layout; a heading flowable that carries ``toc_entry`` becomes a contents line and a bookmark."""

    def __init__(self, buffer, **kwargs):
        super().__init__(buffer, pagesize=PAGE_SIZE, leftMargin=MARGIN, rightMargin=MARGIN, topMargin=MARGIN,
                         bottomMargin=BOTTOM_MARGIN, **kwargs)
        frame = Frame(self.leftMargin, self.bottomMargin, self.width, self.height, id="body")
        self.addPageTemplates([PageTemplate(id="page", frames=[frame])])

    def afterFlowable(self, flowable):  # noqa: N802 (reportlab's name)
        entry = getattr(flowable, "toc_entry", None)
        if entry is None:
            return
        markup, plain, key = entry
        self.canv.bookmarkPage(key)
        self.canv.addOutlineEntry(plain, key, level=0, closed=True)
        self.notify("TOCEntry", (0, markup, self.page, key))


def _heading(text: str, key: str, style: ParagraphStyle) -> Paragraph:
    """A section heading that is its own paragraph (its own line of text) and a contents entry."""
    paragraph = _paragraph(text, style)
    paragraph.toc_entry = (_markup(text), str(text), key)
    return paragraph


# --- sections -------------------------------------------------------------------------------------------------


class _Renderer:
    def __init__(self, review: ReviewDocument, font: str, styles: dict[str, ParagraphStyle], width: float):
        self.review, self.font, self.styles, self.width = review, font, styles, width
        self._keys = 0

    def key(self) -> str:
        self._keys += 1
        return f"section-{self._keys}"

    def story(self) -> list:
        review = self.review
        story = [*self.title_page(), PageBreak()]
        story += [_paragraph(_("Contents"), self.styles["contents"]), self.contents(), PageBreak()]
        story += self.summary()
        story += self.comparison()
        for section in review.sections:
            story += [CondPageBreak(GROUP_ROOM), Spacer(1, 4 * mm), *self.section(section)]
        return story

    def title_page(self) -> list:
        review, styles = self.review, self.styles
        snapshot = review.snapshot_id
        rows = [
            (_("Month"), review.month),
            (_("Tenant"), review.tenant) if review.tenant else (_("Scope"), _("Platform")),
            (_("Generated"), moment_text(review.generated_at)),
            (_("Snapshot"), f"#{snapshot}" if snapshot is not None else _("live figures, not frozen")),
            (_("Coverage"), review.coverage.text),
        ]
        table = Table([[_paragraph(label, styles["meta"]), _paragraph(value, styles["meta"])]
                       for label, value in rows], colWidths=[40 * mm, self.width - 40 * mm], hAlign="LEFT")
        table.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP"), ("LEFTPADDING", (0, 0), (0, -1), 0)]))
        return [Spacer(1, 30 * mm), _paragraph(review.site, styles["site"]),
                _paragraph(review.title, styles["title"]), table]

    def contents(self) -> TableOfContents:
        toc = TableOfContents(dotsMinLevel=0)
        toc.levelStyles = [self.styles["toc"]]
        return toc

    def summary(self) -> list:
        lines = self.review.summary
        story = [_heading(_("Summary"), self.key(), self.styles["heading"])]
        story += self.bullets(lines) if lines else [_paragraph(_("No data"), self.styles["no_data"])]
        return story

    def comparison(self) -> list:
        comparison = self.review.comparison
        previous = comparison.previous_month
        title = _("Compared with %(month)s") % {"month": previous} if previous else _("Compared with last month")
        story = [Spacer(1, 6 * mm), _heading(title, self.key(), self.styles["heading"])]
        rows = [[row.label, value_with_unit(row.value, row.unit), value_with_unit(row.previous, row.unit),
                 row.change or "—"] for row in comparison.rows]
        if not rows:
            return [*story, _paragraph(_("No data"), self.styles["no_data"])]
        columns = [_("Figure"), _("This month"), _("Previous month"), _("Change")]
        return [*story, self.table(columns, rows, numeric=[False, True, True, True])]

    def section(self, section: Section) -> list:
        styles = self.styles
        story: list = [_heading(section.title, self.key(), styles["heading"])]
        if section.question:
            story.append(_paragraph(section.question, styles["question"]))
        story += self.bullets(section.conclusions)
        if section.figures:
            columns = [_("Figure"), _("Value"), _("Previous month"), _("Change")]
            rows = [[f.label, value_with_unit(f.value, f.unit), value_with_unit(f.previous, f.unit), f.change or "—"]
                    for f in section.figures]
            story += [Spacer(1, 3 * mm), self.table(columns, rows, numeric=[False, True, True, True])]
        for chart in section.charts:
            story += self.chart(chart)
        for table in section.tables:
            story += self.data_table(table)
        return story

    def bullets(self, lines: list[str]) -> list:
        return [_paragraph(line, self.styles["bullet"], bulletText="•") for line in lines]

    def chart(self, chart: Chart) -> list:
        png = chart_png(chart, self.review.language)
        if png is None:
            return self.no_data(chart.title)
        return [Spacer(1, 4 * mm), Image(io.BytesIO(png), width=self.width, height=self.width * CHART_ASPECT)]

    def no_data(self, title: str) -> list:
        """A chart or table with nothing in it: its title and "No data", kept on one page."""
        return [KeepTogether([_paragraph(title, self.styles["subheading"]),
                              _paragraph(_("No data"), self.styles["no_data"])])]

    def data_table(self, table: DataTable) -> list:
        rows = table.rows
        columns = [str(c) for c in table.columns]
        width = max([len(columns), *(len(row) for row in rows)]) if rows else 0
        if not width:
            return self.no_data(table.title)
        story = [_paragraph(table.title, self.styles["subheading"])]
        columns += [""] * (width - len(columns))
        numeric = [all(plottable(row[i]) is not None for row in rows if i < len(row) and row[i] is not None)
                   and any(i < len(row) and plottable(row[i]) is not None for row in rows) for i in range(width)]
        body = [[number_text(row[i]) if i < len(row) else "" for i in range(width)] for row in rows]
        if width >= RECORD_MIN_COLUMNS and sum(len(c) for row in body for c in row) / len(body) > RECORD_MEAN_CHARS:
            return [*story, *self.records(columns, body)]
        return [*story, self.table(columns, body, numeric)]

    def records(self, columns: list[str], rows: list[list[str]]) -> list:
        """Each row as a block: its first cell as the block's title, then every other column's header beside
        its value (empty values left out), so long sentences run across the page instead of down a narrow column."""
        styles, blocks = self.styles, []
        for row in rows:
            pairs = [[_paragraph(columns[i], styles["record_label"]), _paragraph(_cell_text(row[i]), styles["cell"])]
                     for i in range(1, len(row)) if str(row[i]).strip() not in ("", "—")]
            block = Table(pairs or [["", ""]], colWidths=[RECORD_LABEL_WIDTH, self.width - RECORD_LABEL_WIDTH],
                          hAlign="LEFT")
            block.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP"), ("LEFTPADDING", (0, 0), (0, -1), 0),
                                       ("TOPPADDING", (0, 0), (-1, -1), 1), ("BOTTOMPADDING", (0, 0), (-1, -1), 1),
                                       ("LINEBELOW", (0, -1), (-1, -1), 0.25, GRID)]))
            blocks += [_paragraph(row[0], styles["record_title"]), block]
        return blocks

    def table(self, columns: list[str], rows: list[list[str]], numeric: list[bool]) -> Table:
        """A table across the text width; its header row repeats on every page it runs over. Text cells wrap
        (Paragraph); numbers are right-aligned plain strings, which lay out faster than paragraphs."""
        styles = self.styles
        header = [_paragraph(column, styles["header_number" if numeric[i] else "header"])
                  for i, column in enumerate(columns)]
        body = [[cell if numeric[i] else _paragraph(_cell_text(cell), styles["cell"]) for i, cell in enumerate(row)]
                for row in rows]
        table = Table([header, *body], colWidths=self.column_widths(columns, rows), repeatRows=1, hAlign="LEFT")
        commands = [
            ("FONTNAME", (0, 0), (-1, -1), self.font),
            ("FONTSIZE", (0, 0), (-1, -1), 8),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ("BACKGROUND", (0, 0), (-1, 0), HEADER_BACKGROUND),
            ("LINEBELOW", (0, 0), (-1, 0), 0.6, GRID),
            ("LINEBELOW", (0, 1), (-1, -1), 0.25, GRID),
            ("TOPPADDING", (0, 0), (-1, -1), 2),
            ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
        ]
        commands += [("ALIGN", (i, 1), (i, -1), "RIGHT") for i, flag in enumerate(numeric) if flag]
        table.setStyle(TableStyle(commands))
        return table

    def column_widths(self, columns: list[str], rows: list[list[str]]) -> list[float]:
        """Every column first gets its longest word (header or cell: no word is cut mid-way where the width
        allows), then the rest of the text width goes to the columns with longer text, in proportion to how
        much more they would take (bounded, so one long column cannot squeeze the others). Chinese characters
        count double."""
        shortest, longest = [], []
        for i, column in enumerate(columns):
            texts = [column, *(str(row[i]) for row in rows[:500])]
            shortest.append(min(max([text_width(word) for text in texts for word in text.split()] or [1]),
                                WORD_CAP) + CELL_PADDING_CHARS)
            longest.append(min(max(text_width(text) for text in texts), LINE_CAP) + CELL_PADDING_CHARS)
        available = self.width / CHAR_POINTS
        if sum(shortest) >= available:
            return [self.width * w / sum(shortest) for w in shortest]
        extra = [max(long - short, 0) for short, long in zip(shortest, longest, strict=True)]
        spare = available - sum(shortest)
        grow = sum(extra)
        widths = [short + (spare * e / grow if grow else spare / len(shortest)) for short, e in zip(shortest, extra,
                                                                                                  strict=True)]
        return [w * CHAR_POINTS for w in widths]


#: Table layout in characters of the 8-point table font: a character's mean width in points, the cell padding,
#: the longest word kept whole and the longest line a column asks for.
CHAR_POINTS = 4.8
CELL_PADDING_CHARS = 4
WORD_CAP = 24
LINE_CAP = 60


# --- entry point ----------------------------------------------------------------------------------------------


def render_pdf(review: ReviewDocument) -> bytes:
    """The review document as the bytes of a PDF."""
    language = review.language or "en"
    with translation.override(language):
        font = font_name(language)
        buffer = io.BytesIO()
        site, title = str(review.site or ""), str(review.title or "")
        tenant = review.tenant or _("Platform")
        document = _ReviewDocTemplate(
            buffer, title=title, author=site, creator=site,
            subject=_("Monthly review %(month)s — %(scope)s") % {"month": review.month, "scope": tenant},
            lang="zh-Hans" if is_chinese(language) else language)
        renderer = _Renderer(review, font, _styles(font, language), document.width)
        document.multiBuild(renderer.story(), canvasmaker=_footer_canvas(
            font, site, title, moment_text(review.generated_at)))
        return buffer.getvalue()
