"""The charts' figures: only trace types of the plotly.js bundle the pages load, labels that
fit, and a peak-demand chart where no line hides another."""

from datetime import date, timedelta

import plotly.graph_objects as go
import pytest

from metering.reports import monthly as reports
from metering.reports.presentation import BUNDLE_TRACE_TYPES, report_sections, section_by_name
from metering.usage import operations
from metering.usage.rollup import rollup
from tests.metering.helpers import at, gpus_of, ran_job, readings

MONTH = date(2026, 10, 1)


@pytest.fixture
def october(users):
    """Jobs on A100 and H100 in October 2026; every GPU model has 32 GPUs (four nodes of eight)."""
    a100 = gpus_of("dc1-r3-a100-01", 4)
    ran_job(users["alice"], "vision/detection", a100, at("2026-10-03T08:00"), at("2026-10-03T18:00"))
    readings(a100, at("2026-10-03T08:00"), at("2026-10-03T18:00"), utilization=70, every=timedelta(hours=1))
    ran_job(users["bob"], "nlp/llm-pretrain", gpus_of("dc1-r1-h100-01", 8), at("2026-10-05T00:00"),
            at("2026-10-05T05:00"), task="training", wait=timedelta(hours=2))
    rollup(MONTH, date(2026, 10, 31), force=True)
    return MONTH


def _figures(october):
    sections = report_sections(reports.build_report(october))
    for group in operations.dashboard(30, now=at("2026-10-31T12:00")):
        sections += group.sections
    return [(section.name, section.figure) for section in sections if section.figure]


def test_every_figure_is_a_valid_plotly_figure(october):
    """plotly's own validators (the Python package of the stack) accept every figure the pages draw."""
    for name, figure in _figures(october):
        try:
            go.Figure(figure)
        except ValueError as exc:  # plotly names the property it refuses
            pytest.fail(f"{name}: {exc}")


def test_every_figure_uses_the_bundled_trace_types_and_leaves_room_for_its_labels(october):
    figures = _figures(october)
    assert len(figures) >= 20
    for name, figure in figures:
        assert {trace["type"] for trace in figure["data"]} <= BUNDLE_TRACE_TYPES, name
        layout = figure["layout"]
        assert "title" not in layout, name  # the section's heading names the chart
        axes = [key for key in layout if key.startswith(("xaxis", "yaxis"))]
        assert axes and all(layout[key]["automargin"] for key in axes), name
        assert layout["legend"]["y"] > 1 and layout["legend"]["yanchor"] == "bottom", name  # above the plot


def test_peak_demand_gives_each_gpu_model_its_own_axes(october):
    figure = section_by_name(report_sections(reports.build_report(october)), "capacity_daily").figure
    layout = figure["layout"]
    assert [layout[key]["title"]["text"] for key in ("yaxis", "yaxis2", "yaxis3")] == [
        "A100 GPUs", "H100 GPUs", "L40S GPUs"]
    panels = {}
    for trace in figure["data"]:
        panels.setdefault(trace["yaxis"], []).append(trace)
    assert sorted(panels) == ["y", "y2", "y3"]
    for traces in panels.values():
        assert [t["name"] for t in traces] == ["peak allocated", "capacity", "peak demand"]
        assert len({(t["line"]["color"], t["line"].get("dash"), t.get("fill")) for t in traces}) == 3
        assert {t["x"][0] for t in traces} == {"2026-10-01"} and all(len(t["x"]) == 31 for t in traces)
    # Every model has 32 GPUs: three equal capacity lines, one per panel, each visible.
    assert [panel[1]["y"][0] for panel in panels.values()] == [32, 32, 32]
    h100 = panels["y2"]
    assert max(h100[2]["y"]) == 8 and max(h100[0]["y"]) == 8  # demand, and allocation once admitted
    assert [t["showlegend"] for t in figure["data"]] == [True] * 3 + [False] * 6  # one legend entry per line
