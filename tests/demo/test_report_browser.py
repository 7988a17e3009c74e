"""The demo itself (`make demo`): in Debian's Chromium, dave, a manager, opens the platform report of the seeded
demo's last month, at 1440 px in English, then on a phone (390 px) in Chinese. The only tests that read the
demo's seed; every other test builds its own world."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone, translation

from metering.models import MonthlyReport
from metering.reports import monthly as reports
from tests.conftest import choose_language, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


#: The daily chart's x tick labels, the legend's and the plot's boxes, and whether plotly drew its tool bar.
DAILY_CHART = """() => {
  const chart = document.querySelector('[data-figure="figure-daily"]');
  const box = el => { const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; };
  return {ticks: Array.from(chart.querySelectorAll("g.xtick text")).map(t => t.textContent),
          legend: box(chart.querySelector(".legend")), axis: box(chart.querySelector(".xaxislayer-above")),
          plot: box(chart.querySelector(".cartesianlayer .bg, .nsewdrag")),
          toolbar_buttons: chart.querySelectorAll(".modebar-btn").length};
}"""
ENGLISH_DATE = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b")


def _daily_chart(page) -> dict:
    page.locator("#section-daily").scroll_into_view_if_needed()
    page.wait_for_selector('[data-figure="figure-daily"][data-rendered="1"]')
    return page.evaluate(DAILY_CHART)


def _added(text: str) -> set[int]:
    return {int(n.replace(",", "")) for n in re.findall(r"add ([\d,]+)", text)}


def test_dave_sees_the_charts_and_downloads_csv(page, live_server, demo_months):
    last_month = (timezone.localdate().replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, live_server.url, "dave")

    page.goto(f"{live_server.url}/reports/")
    page.click(f'a[href="/reports/{last_month}/"]')
    page.locator("#section-by_tenant").scroll_into_view_if_needed()  # charts are drawn as they come into view
    page.wait_for_selector('[data-figure="figure-by_tenant"][data-rendered="1"]')
    page.wait_for_selector('[data-figure="figure-daily"][data-rendered="1"]')
    # Reading never freezes a month (only the beat task or an admin does): the seeded month shows live figures.
    assert "not frozen yet" in page.locator(".report-state").inner_text()
    # plotly drew real bars: one per tenant, in an SVG inside the chart
    assert page.locator('[data-figure="figure-by_tenant"] .main-svg g.point').count() >= 3
    assert page.locator('[data-figure="figure-daily"] .main-svg g.point').count() > 20
    assert float(page.locator("#gpu-hours-allocated").inner_text().replace(",", "")) > 0  # "1,234.5"

    with page.expect_download() as download:
        page.click("#section-by_tenant a.csv")
    with open(download.value.path(), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert lines[0] == "name,gpu_hours_allocated,gpu_hours_used,efficiency,cost"
    assert {line.split(",")[0] for line in lines[1:]} == {"vision", "nlp", "speech"}

    # One capacity number: where the month's advice says "add N", the plan of that model says the same N.
    for item in page.locator(".advice li.advice-add").all():
        model = item.get_attribute("data-model")
        why = page.locator(f'#capacity-plan h3[data-model="{model}"] + p.plan-why').inner_text()
        assert _added(item.inner_text()) == _added(why) != set()
    desktop = _daily_chart(page)
    assert desktop["legend"]["bottom"] <= desktop["plot"]["top"] + 1  # the legend above the plot on a wide screen
    assert desktop["ticks"] and ENGLISH_DATE.search(" ".join(desktop["ticks"]))

    # The open month: day ticks, never the hours of its first day ("00:00:00 Dec 1, 2026").
    page.goto(f"{live_server.url}/reports/{timezone.localdate():%Y-%m}/")
    assert not [t for t in _daily_chart(page)["ticks"] if ":" in t]

    # On a phone, in Chinese: Chinese dates, the legend under the plot and no tool bar over it; a frozen month
    # says why it was frozen in Chinese too.
    before = (timezone.localdate().replace(day=1) - timedelta(days=32)).replace(day=1)
    reports.freeze(before)
    choose_language(page, "zh-hans")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/reports/{before:%Y-%m}/")
    phone = _daily_chart(page)
    ticks = " ".join(phone["ticks"])
    assert "月" in ticks and "日" in ticks and not ENGLISH_DATE.search(ticks)
    assert phone["toolbar_buttons"] == 0
    assert phone["legend"]["top"] >= phone["axis"]["bottom"] - 1  # below the tick labels, not over them
    with translation.override("zh-hans"):
        frozen = translation.gettext(MonthlyReport.FROZEN_REASON)
    state = page.locator(".report-state").inner_text()
    assert frozen in state and MonthlyReport.FROZEN_REASON not in state
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
