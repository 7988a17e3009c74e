"""The review pack's charts as PNG images: one ``contract.Chart`` of the review document -> the bytes of a PNG.

matplotlib is driven through its object API (``Figure`` + ``FigureCanvasAgg``), never ``pyplot``: pyplot keeps a
global current figure and backend, which the portal's threads (gunicorn gthread, Celery) would share. For the same
reason fonts are given to each text as ``FontProperties`` instead of through the global ``rcParams``.

Every image has the same size (1400 x 700 px at 200 dpi), so the PDF lays them out the same way each month; a
chart without a single value gets no image at all (``None``): the PDF writes "No data" in its place.
"""

from __future__ import annotations

import io
import math
from functools import cache
from pathlib import Path

from django.conf import settings
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import FuncFormatter

from metering.review.contract import Chart, Series, plottable
from metering.review.parts import is_chinese, whole

#: Output size: 7 x 3.5 inches at 200 dpi = 1400 x 700 pixels, whatever the data.
FIGURE_INCHES = (7.0, 3.5)
DPI = 200
#: Beyond this many categories the x labels are turned and thinned out, so that they stay readable.
MAX_UPRIGHT_LABELS = 12
MAX_LABELS = 31
#: A colour-blind-safe palette (Okabe-Ito), cycled when a chart has more series.
#: Families tried, in order, for a Chinese chart when settings REVIEW_PACK["CJK_FONT"] is missing.
CJK_FAMILIES = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Source Han Sans SC", "Droid Sans Fallback")
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def cjk_font_path() -> Path | None:
    """The font file of settings ``REVIEW_PACK["CJK_FONT"]`` when it exists (the PDF registers the same file)."""
    configured = (getattr(settings, "REVIEW_PACK", None) or {}).get("CJK_FONT")
    if configured and Path(configured).is_file():
        return Path(configured)
    return None


@cache
def _installed_cjk_font() -> Path | None:
    """A CJK font matplotlib knows of on this machine, when the configured one is missing; else None."""
    for family in CJK_FAMILIES:
        try:
            return Path(font_manager.findfont(FontProperties(family=family), fallback_to_default=False))
        except ValueError:
            continue
    return None


@cache
def _font(path: str | None) -> FontProperties:
    """One FontProperties per font file, made once per process (reading a 5 MB .ttc is not free).

    The CJK font is used for every language when it exists: an English document still names tenants, projects
    and GPU models typed by people, who may write them in Chinese."""
    return FontProperties(fname=path) if path else FontProperties(family="DejaVu Sans")


def chart_png(chart: Chart, language: str) -> bytes | None:
    """The chart as PNG bytes (1400 x 700 px), or None when it has no data.

    ``chart`` is a chart of the review document: kind "bar" (grouped bars when several series) or "line",
    title, x_label, y_label, categories and series of values (None: a gap). Its strings are already translated;
    ``language`` only matters without the configured font: a Chinese chart then looks for any installed CJK font
    (else its Chinese labels would be empty boxes)."""
    if not chart.has_data:
        return None
    path = cjk_font_path()
    if path is None and is_chinese(language):
        path = _installed_cjk_font()
    font = _font(str(path) if path else None)
    small = font.copy()
    small.set_size(7)
    normal = font.copy()
    normal.set_size(8)
    large = font.copy()
    large.set_size(10)

    figure = Figure(figsize=FIGURE_INCHES, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    categories = [str(category) for category in chart.categories]
    positions = list(range(len(categories)))
    series = [s for s in chart.series if s.values]
    if chart.kind == "line":
        _draw_lines(axes, positions, series)
    else:
        _draw_bars(axes, positions, series)

    axes.set_title(chart.title or "", fontproperties=large)
    axes.set_xlabel(chart.x_label or "", fontproperties=normal)
    axes.set_ylabel(chart.y_label or "", fontproperties=normal)
    _label_categories(axes, positions, categories, small)
    axes.yaxis.set_major_formatter(FuncFormatter(_axis_number))
    for label in axes.get_yticklabels():
        label.set_fontproperties(small)
    axes.grid(axis="y", linewidth=0.4, alpha=0.5)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    if any(s.name for s in series):
        axes.legend(prop=small, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _draw_bars(axes, positions: list[int], series: list[Series]) -> None:
    """Bars side by side per category (grouped when several series); a None value leaves its slot empty."""
    count = max(len(series), 1)
    width = 0.8 / count
    for index, one in enumerate(series):
        offset = (index - (count - 1) / 2) * width
        values = [plottable(value) for value in one.values]
        points = [(position + offset, y) for position, y in zip(positions, values, strict=False) if y is not None]
        axes.bar([x for x, _y in points], [y for _x, y in points], width=width * 0.95,
                 color=COLOURS[index % len(COLOURS)], label=one.name or None)


def _draw_lines(axes, positions: list[int], series: list[Series]) -> None:
    """One line per series; None values are NaN, which matplotlib leaves as gaps. Markers show lone points."""
    for index, one in enumerate(series):
        values = [plottable(value) for value in one.values]
        values += [None] * (len(positions) - len(values))
        ys = [math.nan if value is None else value for value in values[:len(positions)]]
        axes.plot(positions, ys, color=COLOURS[index % len(COLOURS)], linewidth=1.2, marker="o", markersize=2.5,
                  label=one.name or None)


def _label_categories(axes, positions: list[int], categories: list[str], font: FontProperties) -> None:
    """Category labels under the x axis: turned when many, and only every k-th one beyond MAX_LABELS."""
    step = max(1, math.ceil(len(categories) / MAX_LABELS))
    shown = positions[::step]
    axes.set_xticks(shown)
    turned = len(categories) > MAX_UPRIGHT_LABELS or max((len(c) for c in categories), default=0) > 12
    axes.set_xticklabels([categories[i] for i in shown], fontproperties=font,
                         rotation=45 if turned else 0, ha="right" if turned else "center")
    if positions:
        axes.set_xlim(-0.6, len(positions) - 0.4)


def _axis_number(value: float, _position) -> str:
    """Y axis labels as sentences print figures (``whole``: grouped in the document's language, no ".0"), two
    decimals at most."""
    return whole(round(float(value), 2))
