"""The demo itself (`make demo`): in Debian's Chromium, dave, a manager, opens the platform report of the seeded
demo's last month. The only tests that read the demo's seed; every other test builds its own world."""

from datetime import timedelta

import pytest
from django.utils import timezone

from demo.metering import seed_metering
from demo.world import history_start, seed_history, seed_structure

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_history(transactional_db):
    world = seed_structure()
    start = history_start()
    seed_history(world["users"], start)
    seed_metering(start)
    return world


def test_dave_sees_the_charts_and_downloads_csv(page, live_server, demo_history):
    last_month = (timezone.localdate().replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "dave")
    page.fill("#id_password", "demo")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")

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
