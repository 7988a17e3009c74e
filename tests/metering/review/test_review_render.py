"""The review pack's renderers: a review document (``metering.review.contract.ReviewDocument``) -> PDF and
spreadsheet.

The documents are written here by hand in the contract's JSON shape (``ReviewDocument.from_json`` reads them),
not built by metering/review/document.py, so that these tests pin the renderers alone.
The PDFs are read back with poppler (pdftotext, pdfinfo, pdfimages, pdftoppm), the spreadsheets with openpyxl.
No database is needed.
"""

from __future__ import annotations

import copy
import io
import re
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from openpyxl import load_workbook
from reportlab.pdfbase import pdfmetrics

from metering.review.contract import Chart, ReviewDocument
from metering.review.parts import chart_has_data, figure, moment_text, number_text
from metering.review.render.charts import chart_png
from metering.review.render.pdf import break_lines, render_pdf
from metering.review.render.xlsx import render_xlsx, sheet_title

GROUP_TITLES = ["Resources", "Tasks", "Governance", "Improvements"]
CHINESE_TITLES = ["资源", "任务", "治理", "改进"]
SNAPSHOT_ID = 4217
ALLOCATED = 12345.5


def _chart(key, title, kind="bar", series=2, days=5, empty=False):
    categories = [f"2026-10-{day:02d}" for day in range(1, days + 1)]
    return {"key": key, "title": title, "kind": kind, "x_label": "Day", "y_label": "GPU-hours",
            "categories": categories,
            "series": [{"name": f"series {n}", "values": [None if empty or (day + n) % 4 == 0 else day * 10.5 + n
                                                           for day in range(days)]} for n in range(series)]}


def _group(key, title, charts, tables=None):
    return {
        "key": key, "title": title, "question": f"What does {title.lower()} answer?",
        "conclusions": [f"{title}: the first conclusion.", f"{title}: a second one, with <markup> & ampersands."],
        "figures": [
            {"key": "gpu_hours_allocated", "label": "GPU-hours allocated", "value": ALLOCATED, "unit": "GPU-hours",
             "previous": 11000.0, "change": "+12.2 %", "change_number": 0.122},
            {"key": "jobs", "label": "Jobs finished", "value": 1200, "unit": "", "previous": 0, "change": "new"},
            {"key": "missing", "label": "Not measured", "value": None, "unit": "%", "previous": None},
            {"key": "efficiency", "label": "Efficiency", "value": 84.0, "unit": "%", "previous": 84.4,
             "change": "−0.4 pts", "change_number": -0.4, "change_in_points": True},
        ],
        "tables": tables if tables is not None else [
            {"key": f"{key}_top", "title": f"{title} by project", "columns": ["Project", "GPU-hours", "Share %"],
             "rows": [["alpha", 5000.25, 40.5], ["=cmd|' /C calc'!A0", 2500, None],
                      ["a project with a rather long name " * 4, 1234567, 9.5]]},
        ],
        "charts": charts,
    }


def sample_document(**changes) -> dict:
    """An English review document in the contract's shape: four groups, charts (one without data), tables and
    an appendix."""
    document = {
        "title": "Monthly review — 2026-10", "site": "GPU Portal", "month": "2026-10", "tenant": None,
        "generated_at": "2026-11-01T08:30:00+00:00", "snapshot_id": SNAPSHOT_ID, "language": "en",
        "coverage": {"complete": True, "days_with_data": 31, "days_expected": 31, "days_in_month": 31,
                     "text": "All 31 days have data."},
        "summary": ["GPU-hours allocated rose by 12 %.", "Two improvement actions are late."],
        "comparison": {"previous_month": "2026-09", "rows": [
            {"label": "GPU-hours allocated", "value": ALLOCATED, "previous": 11000.0, "unit": "GPU-hours",
             "change": "+12.2 %", "change_number": 0.122},
            {"label": "Jobs finished", "value": 1200, "previous": None, "unit": "", "change": "—"},
        ]},
        "groups": [
            _group("resources", "Resources", [_chart("daily", "Daily GPU-hours"),
                                              _chart("trend", "Utilisation trend", kind="line", series=1, days=31)]),
            _group("tasks", "Tasks", [_chart("waits", "Queue waits", series=3)]),
            _group("governance", "Governance", [_chart("empty", "Quota refusals", empty=True)]),
            _group("improvements", "Improvements", [_chart("actions", "Actions by status", series=1)]),
        ],
        "appendix": [{"key": "acceptance", "title": "Acceptance checklist", "question": "Is every area accepted?",
                      "conclusions": [], "figures": [], "charts": [],
                      "tables": [{"key": "areas", "title": "Areas", "columns": ["Area", "Status", "Note"],
                                  "rows": [["Scheduling", "accepted", "ok"], ["Metering", "open", None]]}]}],
    }
    document.update(changes)
    return document


def chinese_document() -> dict:
    document = sample_document(language="zh-hans", title="月度评审 — 2026-10", site="GPU 门户", tenant="视觉组",
                               summary=["分配的 GPU 小时增加了 12%。"], snapshot_id=None)
    for group, title in zip(document["groups"], CHINESE_TITLES, strict=True):
        group["title"] = title
        group["question"] = "资源与工作相匹配吗？"
        group["conclusions"] = ["这是一个很长的中文结论，用来检查没有空格的文字也能正确换行。" * 3]
        group["charts"][0]["title"] = f"{title}：每日 GPU 小时"
        group["charts"][0]["series"][0]["name"] = "已分配"
    document["appendix"][0]["title"] = "验收清单"
    return document


def charts_with_data(document: dict) -> int:
    return sum(chart_has_data(Chart.from_json(chart)) for section in [*document["groups"], *document["appendix"]]
               for chart in section["charts"])


def pdf_of(document: dict) -> bytes:
    return render_pdf(ReviewDocument.from_json(document))


def xlsx_of(document: dict) -> bytes:
    return render_xlsx(ReviewDocument.from_json(document))


def _poppler(*args) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def pdf_text(path: Path) -> str:
    return _poppler("pdftotext", "-layout", str(path), "-")


def page_count(path: Path) -> int:
    return int(re.search(r"^Pages:\s+(\d+)", _poppler("pdfinfo", str(path)), re.M).group(1))


def image_count(path: Path) -> int:
    lines = _poppler("pdfimages", "-list", str(path)).splitlines()
    return sum(1 for line in lines[2:] if line.split()[2:3] == ["image"])


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and every third pixel of every third row of an 8-bit RGB/grey PNG (to tell a blank page)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, _depth, colour_type = header[:4]
    channels = {0: 1, 2: 3, 6: 4}[colour_type]
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels + 1
    values = [raw[row * stride + 1 + x * channels: row * stride + 1 + (x + 1) * channels]
              for row in range(0, height, 3) for x in range(0, width, 3)]
    return width, height, values


# --- the PDF --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def english_pdf(tmp_path_factory) -> tuple[dict, Path]:
    document = sample_document()
    return document, _write(tmp_path_factory.mktemp("pdf"), "review.pdf", pdf_of(document))


def test_pdf_has_each_group_heading_on_its_own_line_and_in_the_contents(english_pdf):
    _document, path = english_pdf
    text = pdf_text(path)
    lines = lines_of(text)
    for title in [*GROUP_TITLES, "Acceptance checklist"]:
        assert title in lines, f"{title} is not a line of its own"
    contents = text.split("\f")[1]
    assert "Contents" in contents
    for title in [*GROUP_TITLES, "Acceptance checklist", "Summary"]:
        assert re.search(rf"^\s*{title}[ .]+\d+\s*$", contents, re.M), f"{title} missing from the contents"


def test_pdf_footer_numbers_pages_out_of_the_total(english_pdf):
    _document, path = english_pdf
    pages = page_count(path)
    assert pages >= 3
    text = pdf_text(path).split("\f")
    assert f"Page 1 of {pages}" in text[0]
    assert f"Page {pages} of {pages}" in text[pages - 1]
    assert "GPU Portal · Monthly review — 2026-10 · Page 2 of" in text[1]
    assert "Generated 2026-11-01 08:30 UTC" in text[0]


def test_pdf_shows_figures_grouped_snapshot_and_change(english_pdf):
    _document, path = english_pdf
    text = pdf_text(path)
    assert "12,345.5 GPU-hours" in text
    assert "1,234,567" in text  # a table number with thousands grouped
    assert "+12.2 %" in text  # a figure's change, as the builder worded it
    assert f"#{SNAPSHOT_ID}" in text
    assert "All 31 days have data." in text
    assert "Platform" in text.split("\f")[0]
    assert "<markup> & ampersands" in text  # document text is escaped, not read as markup


def test_pdf_draws_one_image_per_chart_with_data_and_no_data_otherwise(english_pdf):
    document, path = english_pdf
    expected = charts_with_data(document)
    assert expected == 4
    assert image_count(path) >= expected
    governance = next(page for page in pdf_text(path).split("\f") if "Quota refusals" in page)
    assert "No data" in governance


def test_pdf_first_page_renders_to_a_non_blank_image(english_pdf, tmp_path):
    _document, path = english_pdf
    subprocess.run(["pdftoppm", "-r", "50", "-png", "-f", "1", "-l", "1", str(path), str(tmp_path / "page")],
                   check=True, timeout=60)
    [png] = list(tmp_path.glob("page*.png"))
    width, height, pixels = png_pixels(png.read_bytes())
    assert abs(width - 413) <= 1 and abs(height - 585) <= 1  # A4 at 50 dpi
    inked = [pixel for pixel in pixels if pixel != b"\xff" * len(pixel)]
    assert len(inked) > 100, "the title page rendered blank"


def test_pdf_metadata_names_the_document(english_pdf):
    _document, path = english_pdf
    info = _poppler("pdfinfo", str(path))
    assert re.search(r"^Title:\s+Monthly review — 2026-10$", info, re.M)
    assert re.search(r"^Author:\s+GPU Portal$", info, re.M)
    assert re.search(r"^Subject:\s+Monthly review 2026-10 — Platform$", info, re.M)


def test_pdf_in_chinese_draws_chinese_titles_and_translated_chrome(tmp_path):
    document = chinese_document()
    path = _write(tmp_path, "zh.pdf", pdf_of(document))
    text = pdf_text(path)
    lines = lines_of(text)
    for title in [*CHINESE_TITLES, "验收清单"]:
        assert title in lines
    assert "视觉组" in text and "GPU 门户" in text
    assert "这是一个很长的中文结论" in text
    fonts = _poppler("pdffonts", str(path))
    assert "STSong" not in fonts  # the configured TrueType font, embedded
    assert re.search(r"WenQuanYi|Review-", fonts)


def test_chinese_lines_break_between_characters_but_never_inside_a_word_that_fits():
    """ReportLab's CJK wrap cut "GP|U" and "dc1-r1-h100-0|2" (another node's name) in narrow cells."""
    font, size = "Helvetica", 8  # the widths only matter; Helvetica measures CJK as its default glyph
    width = pdfmetrics.stringWidth("已分配 GP", font, size)
    assert break_lines("已分配 GPU 卡时", font, size, width) == ["已分配", "GPU 卡时"]
    nodes = "位于 dc1-r1-h100-02, dc1-r2-h100-04 的作业"
    lines = break_lines(nodes, font, size, pdfmetrics.stringWidth("位于 dc1-r1-h100-0", font, size))
    assert "dc1-r1-h100-02," in lines and "dc1-r2-h100-04" in " ".join(lines)
    assert all(pdfmetrics.stringWidth(line, font, size) <= pdfmetrics.stringWidth("位于 dc1-r1-h100-0", font, size)
               for line in lines if " " in line)
    # a word longer than the line breaks after a hyphen first, then where it must
    long = break_lines("test-ascend910b-1130-1557", font, size, pdfmetrics.stringWidth("test-ascend910b-", font, size))
    assert long == ["test-ascend910b-", "1130-1557"]
    # no line starts with a comma or a full stop: they hang at the end of the line before
    assert break_lines("很长，。", font, size, pdfmetrics.stringWidth("很长", font, size)) == ["很长，。"]
    assert break_lines("", font, size, 50) == [""]


def test_pdf_in_chinese_without_the_font_falls_back_to_the_builtin_cid_font(tmp_path, settings):
    """(This poppler lacks poppler-data, the CMaps it needs to read the built-in CID font: so the font is checked
    in the PDF's own objects, not with pdffonts or pdftotext.)"""
    settings.REVIEW_PACK = {"CJK_FONT": str(tmp_path / "missing.ttc")}
    data = pdf_of(chinese_document())
    assert b"/BaseFont /STSong-Light" in data
    assert b"/FontFile2" not in data  # no TrueType font embedded
    assert page_count(_write(tmp_path, "zh.pdf", data)) >= 3


def test_pdf_without_snapshot_says_live_figures(tmp_path):
    path = _write(tmp_path, "live.pdf", pdf_of(sample_document(snapshot_id=None, tenant="vision")))
    first = pdf_text(path).split("\f")[0]
    assert "live figures, not frozen" in first
    assert "vision" in first and "Platform" not in first


def test_long_table_splits_over_pages_with_its_header_repeated(tmp_path):
    rows = [[f"job-{n:04d}", n * 1000 + 0.5, "project " + "x" * (n % 50), None if n % 7 else "late"]
            for n in range(300)]
    document = sample_document()
    document["groups"][1]["tables"].append({"key": "jobs", "title": "Every job", "rows": rows,
                                            "columns": ["Job name", "GPU-hours used", "Project", "Remark"]})
    path = _write(tmp_path, "long.pdf", pdf_of(document))
    text = pdf_text(path)
    assert text.count("GPU-hours used") >= 3
    pages_with_header = [page for page in text.split("\f") if re.search(r"Job name\s+GPU-hours used", page)]
    assert len(pages_with_header) >= 3
    assert "job-0299" in text and "299,000.5" in text
    assert page_count(path) >= 10


def test_chart_without_data_gets_no_image_in_the_pdf(tmp_path):
    document = sample_document()
    for section in document["groups"]:
        section["charts"] = [_chart("none", f"{section['title']} chart", empty=True)]
    path = _write(tmp_path, "empty.pdf", pdf_of(document))
    assert image_count(path) == 0
    assert pdf_text(path).count("No data") >= 4


def test_odd_documents_still_render(tmp_path):
    """A title longer than the footer, control characters, ragged and empty tables, a line chart with fewer
    values than categories, no groups' figures: the pack is still made, and says what it has."""
    document = sample_document(title="A very long review title " * 20)
    resources = document["groups"][0]
    resources["figures"] = []
    resources["conclusions"] = ["bell\x07 and nul\x00 characters"]
    resources["tables"] = [{"key": "ragged", "title": "Ragged", "columns": ["One"], "rows": [["a", 1, 2.5], []]},
                           {"key": "empty", "title": "Empty", "columns": [], "rows": [[], []]}]
    resources["charts"] = [{**_chart("short", "Short line", kind="line", series=1, days=6),
                            "series": [{"name": "", "values": [1, 2]}]}]
    path = _write(tmp_path, "odd.pdf", pdf_of(document))
    text = pdf_text(path)
    assert "bell and nul characters" in text
    assert f"Page 1 of {page_count(path)}" in text
    assert "Ragged" in text and "2.5" in text
    empty_at = text.index("Empty")
    assert "No data" in text[empty_at:empty_at + 200]
    assert image_count(path) >= charts_with_data(document)
    book = load_workbook(io.BytesIO(xlsx_of(document)))
    assert "bell and nul characters" in [row[0] for row in _rows(book["Resources"])]


# --- the charts -----------------------------------------------------------------------------------------------


def test_chart_png_has_a_fixed_size_and_none_without_data():
    for chart in (_chart("a", "Few", series=1, days=2), _chart("b", "Many", kind="line", series=5, days=31),
                  _chart("c", "资源：每日", series=3)):
        width, height = struct.unpack(">II", chart_png(Chart.from_json(chart), "zh-hans")[16:24])
        assert (width, height) == (1400, 700)
    assert chart_png(Chart.from_json(_chart("d", "Nothing", empty=True)), "en") is None
    assert chart_png(Chart.from_json({**_chart("e", "No categories"), "categories": []}), "en") is None


# --- formatting -----------------------------------------------------------------------------------------------


def test_number_and_change_texts():
    assert number_text(1234567) == "1,234,567"
    assert number_text(0.1 + 0.2) == "0.3"
    assert number_text(None) == "—"
    # A figure's change is worked out once by the builder (review_parts.figure) and shown as it is.
    assert figure("f", "GPU-hours", 110, "GPU-hours", 100).change == "+10.0 %"
    assert figure("f", "Efficiency", 84.0, "%", 84.4).change == "−0.4 pts"
    assert figure("f", "Jobs", 5, "", 0).change == "new"
    assert figure("f", "Jobs", None, "", 100).change == "—"
    # nearly all gone is not all gone; a tiny change is not none
    assert figure("f", "GPU-hours", 10.91, "GPU-hours", 22853.95).change == "−99.95 %"
    assert figure("f", "GPU-hours", 100001, "GPU-hours", 100000).change == "+0.01 %"
    assert figure("f", "GPU-hours", 0, "GPU-hours", 50).change == "−100.0 %"
    assert moment_text("2026-11-01T08:30:00+08:00") == "2026-11-01 08:30 UTC+08:00"


# --- the spreadsheet ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workbook():
    document = sample_document()
    return document, load_workbook(io.BytesIO(xlsx_of(document)))


def _rows(sheet) -> list[tuple]:
    return list(sheet.iter_rows(values_only=True))


def _find(sheet, value) -> tuple[int, int]:
    for row in sheet.iter_rows():
        for cell in row:
            if cell.value == value:
                return cell.row, cell.column
    raise AssertionError(f"{value!r} not in sheet {sheet.title}")


def test_xlsx_has_a_summary_then_a_sheet_per_group_and_appendix(workbook):
    _document, book = workbook
    assert book.sheetnames == ["Summary", *GROUP_TITLES, "Acceptance checklist"]
    summary = _rows(book["Summary"])
    flat = [cell for row in summary for cell in row if cell is not None]
    assert "Monthly review — 2026-10" in flat and "2026-10" in flat and SNAPSHOT_ID in flat
    assert "GPU-hours allocated rose by 12 %." in flat
    row, column = _find(book["Summary"], SNAPSHOT_ID)
    assert book["Summary"].cell(row, column).number_format == "0"  # an id, not a figure to group


def test_xlsx_figures_are_numbers_equal_to_the_document(workbook):
    document, book = workbook
    sheet = book["Resources"]
    row, column = _find(sheet, "GPU-hours allocated")
    value = sheet.cell(row, column + 1).value
    assert isinstance(value, float) and not isinstance(value, str)
    assert value == document["groups"][0]["figures"][0]["value"]
    assert sheet.cell(row, column + 2).value == "GPU-hours"
    assert sheet.cell(row, column + 3).value == 11000
    jobs_row, jobs_column = _find(sheet, "Jobs finished")
    assert isinstance(sheet.cell(jobs_row, jobs_column + 1).value, int)
    missing_row, missing_column = _find(sheet, "Not measured")
    assert sheet.cell(missing_row, missing_column + 1).value is None


def test_xlsx_comparison_table_holds_numbers(workbook):
    _document, book = workbook
    sheet = book["Summary"]
    row, column = _find(sheet, "GPU-hours allocated")
    assert sheet.cell(row, column + 1).value == ALLOCATED
    assert sheet.cell(row, column + 2).value == 11000
    header_row = [sheet.cell(row - 1, column + i).value for i in range(5)]
    assert header_row[0] == "Figure" and "Previous month" in header_row


def test_xlsx_change_is_a_number_with_a_number_format_and_words_beside_it(workbook):
    """A spreadsheet computes with the change: a number shown "+12.2%" (or "-0.4 pts" for a percentage); where
    the change is only words ("new"), the number is blank and the words column says why."""
    _document, book = workbook
    for name in ("Resources", "Summary"):
        sheet = book[name]
        row, column = _find(sheet, "GPU-hours allocated")
        headers = [sheet.cell(row - 1, column + i).value for i in range(6)]
        change = headers.index("Change")
        assert headers[change + 1] == "Change in words"
        cell = sheet.cell(row, column + change)
        assert cell.value == 0.122 and cell.number_format == "+0.0%;-0.0%;0.0%"
        assert sheet.cell(row, column + change + 1).value == "+12.2 %"
    sheet = book["Resources"]
    row, column = _find(sheet, "Efficiency")
    assert sheet.cell(row, column + 4).value == -0.4 and "pts" in sheet.cell(row, column + 4).number_format
    row, column = _find(sheet, "Jobs finished")
    assert sheet.cell(row, column + 4).value is None and sheet.cell(row, column + 5).value == "new"


def test_figures_carry_their_change_as_a_number():
    assert figure("f", "GPU-hours", 110, "GPU-hours", 100).change_number == pytest.approx(0.1)
    points = figure("f", "Efficiency", 84.0, "%", 84.4)
    assert points.change_number == pytest.approx(-0.4) and points.change_in_points
    assert figure("f", "Jobs", 5, "", 0).change_number is None  # "new": words only
    assert figure("f", "Jobs", 5, "", 5).change_number == 0.0


def test_xlsx_tables_have_bold_headers_numbers_and_no_formulas(workbook):
    _document, book = workbook
    sheet = book["Resources"]
    row, column = _find(sheet, "Project")
    assert sheet.cell(row, column).font.b
    assert sheet.cell(row + 1, column + 1).value == 5000.25
    assert sheet.cell(row + 3, column + 1).value == 1234567
    dangerous = sheet.cell(row + 2, column)
    assert dangerous.value == "=cmd|' /C calc'!A0" and dangerous.data_type == "s"  # text, never a formula
    assert all(cell.data_type != "f" for line in sheet.iter_rows() for cell in line)


def test_xlsx_chart_data_is_a_numeric_table(workbook):
    document, book = workbook
    chart = document["groups"][0]["charts"][0]
    sheet = book["Resources"]
    row, column = _find(sheet, chart["categories"][0])
    header = [sheet.cell(row - 1, column + i).value for i in range(3)]
    assert header == [chart["x_label"], "series 0", "series 1"]
    values = [sheet.cell(row + i, column + 1).value for i in range(len(chart["categories"]))]
    assert values == chart["series"][0]["values"]
    assert sheet._charts, "no native chart drawn over the data"


def test_xlsx_single_table_sheet_freezes_its_header(workbook):
    _document, book = workbook
    sheet = book["Acceptance checklist"]
    row, _column = _find(sheet, "Area")
    assert sheet.freeze_panes == f"A{row + 1}"
    assert book["Resources"].freeze_panes is None  # several tables: nothing to freeze for all of them


def test_xlsx_in_chinese_keeps_chinese_sheet_names():
    book = load_workbook(io.BytesIO(xlsx_of(chinese_document())))
    assert book.sheetnames[1:] == [*CHINESE_TITLES, "验收清单"]


def test_sheet_titles_are_legal_and_unique():
    used: set[str] = set()
    names = [sheet_title(title, used) for title in
             ["Summary", "a/b:c*d?e[f]g\\h", "x" * 40, "x" * 40, "'quoted'", "", "summary"]]
    assert names[0] == "Summary"
    assert names[1] == "a b c d e f g h"
    assert len(names[2]) == 31 and len(names[3]) <= 31 and names[2] != names[3]
    assert names[4] == "quoted"
    assert names[5] and names[6].lower() != "summary"
    assert len({name.lower() for name in names}) == len(names)


def test_rendering_does_not_change_the_document():
    document = ReviewDocument.from_json(sample_document())
    before = copy.deepcopy(document.to_json())
    render_pdf(document)
    render_xlsx(document)
    assert document.to_json() == before


def test_a_table_of_long_sentences_is_set_as_one_block_per_row(tmp_path):
    """The checklist's rows are sentences: as a grid of six narrow columns they were a wall of text. Each row
    is a block instead, its first cell as the title and every other header beside its value (empty ones left
    out)."""
    long = "The evidence is a sentence long enough to turn a grid of narrow columns into a wall of text. " * 3
    appendix = [{"key": "acceptance", "title": "Acceptance checklist", "question": "Is every area accepted?",
                 "conclusions": [], "figures": [], "charts": [], "tables": [{
                     "key": "acceptance", "title": "Areas",
                     "columns": ["Area", "Capability", "Status", "Why", "Evidence", "Notes"],
                     "rows": [["Multi-card", "8 GPUs in one job", "present", long, long, ""],
                              ["Multi-node", "2 nodes in one job", "missing", long, long, "a note"]]}]}]
    text = pdf_text(_write(tmp_path, "records.pdf", pdf_of(sample_document(appendix=appendix))))
    assert not re.search(r"Area\s+Capability\s+Status", text)  # no grid header
    assert len(re.findall(r"^\s*Why\s+The evidence is", text, re.M)) == 2
    assert len(re.findall(r"^\s*Status\s+(present|missing)", text, re.M)) == 2
    assert len(re.findall(r"^\s*Notes\s+a note", text, re.M)) == 1 and text.count("Notes") == 1


def test_groups_follow_on_where_the_page_has_room(english_pdf):
    """A page break before every group left pages holding a few lines; a group now starts on the page where
    the one before ended when there is room for it."""
    _document, path = english_pdf
    pages = [_poppler("pdftotext", "-f", str(n), "-l", str(n), str(path), "-") for n in range(1, page_count(path) + 1)]
    starts = [next(i for i, page in enumerate(pages) if re.search(rf"^{title}$", page, re.M))
              for title in ("Summary", "Resources")]
    assert starts[0] == starts[1]  # the summary is short: the first group follows on its page
