"""The report pages in Chromium as production serves them: the platform report and the
operations dashboard measured as they load, plotly.js comes compressed under a hashed name cached for years,
charts are drawn as they come into view (or before printing), and no chart cuts off a label.

The timing test prints one JSON line (``pytest -s`` shows it): per page and visit, milliseconds from the start
of the navigation to the request, the end of the response, DOMContentLoaded, the end of the load event and the
first chart drawn; the page's charts and height; the bytes of plotly.js sent and decoded (0 sent: from the
browser's cache). The first visit starts with an empty browser cache; the figures to compare with the budget
(``budget_ms``) are the median of the others, as a returning reader sees the pages. The server has answered each
page once before (a running server). The times are printed, not asserted: speed is measured (a busy machine
makes any timed assertion flaky), while what makes the pages fast — the compressed, cached bundle, charts drawn
as they come into view — is checked.
"""

import json
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

from fleet.models import Node, NodeReading
from gpuportal.text.dates import local_day
from metering.usage.rollup import rollup
from scheduling.models import FailureCategory, JobStatus
from tests.factories import build_world
from tests.metering.helpers import at, gpus_of, ran_job, readings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOAD_BUDGET_MS = 500
VISITS = 3  # per page; the median is held to the budget
HASHED_BUNDLE = re.compile(r"/static/plotly/plotly-basic\.min\.[0-9a-f]{12}\.js$")
YEAR = 365 * 24 * 3600

#: Records when the first chart of the page is drawn (charts.js marks each drawn chart data-rendered="1").
FIRST_CHART_PROBE = """
window.__firstChart = null;
new MutationObserver(function (changes, observer) {
  if (changes.some(function (c) { return c.target.getAttribute("data-rendered") === "1"; })) {
    window.__firstChart = performance.now(); observer.disconnect();
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-rendered"]});
"""

FIGURES = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const bundle = performance.getEntriesByType("resource").find(r => r.name.includes("/plotly/"));
  return {load_ms: Math.round(nav.loadEventEnd), request_ms: Math.round(nav.requestStart),
          response_ms: Math.round(nav.responseEnd),
          dom_content_loaded_ms: Math.round(nav.domContentLoadedEventEnd),
          first_chart_ms: window.__firstChart === null ? null : Math.round(window.__firstChart),
          charts: document.querySelectorAll("[data-figure]").length,
          page_height_px: document.documentElement.scrollHeight,
          bundle_transfer_bytes: bundle ? bundle.transferSize : null,
          bundle_bytes: bundle ? bundle.decodedBodySize : null};
}"""

#: Texts of every drawn chart (tick labels, axis titles, legend entries) that stick out of the chart's SVG, and
#: tick labels the legend covers.
CLIPPED_LABELS = """() => {
  // Tick labels of every axis (g.xtick, g.y2tick...), axis titles (text.ytitle, text.y2title...), legend entries.
  const LABELS = 'g[class$="tick"] > text, text[class$="title"], text.legendtext';
  const clipped = [];
  const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  document.querySelectorAll("[data-rendered='1']").forEach(chart => {
    const svg = chart.querySelector(".main-svg").getBoundingClientRect();
    const legend = chart.querySelector(".legend");
    const legendBox = legend && legend.getBoundingClientRect();
    chart.querySelectorAll(LABELS).forEach(text => {
      const box = text.getBoundingClientRect();
      if (!box.width) { return; }
      if (box.left < svg.left - 1 || box.right > svg.right + 1 || box.top < svg.top - 1
          || box.bottom > svg.bottom + 1) {
        clipped.push(chart.dataset.figure + ": " + text.textContent + " (cut off)");
      } else if (legendBox && !text.classList.contains("legendtext") && overlap(box, legendBox)) {
        clipped.push(chart.dataset.figure + ": " + text.textContent + " (under the legend)");
      }
    });
  });
  return clipped;
}"""


#: (owner, project, node, GPUs, task type): one stream of jobs per GPU model.
STREAMS = (("alice", "vision/detection", "dc1-r3-a100-01", 4, "research"),
           ("bob", "nlp/llm-pretrain", "dc1-r1-h100-01", 8, "training"),
           ("erin", "speech/asr", "dc2-r2-l40s-01", 2, "evaluation"))


@pytest.fixture
def busy_platform(transactional_db, settings):
    """Since the first of last month, each GPU model runs a job of one to three days after another (every sixth
    fails), with hourly GPU readings and node counters, all rolled up: every chart of both pages has something
    to draw, day after day."""
    settings.TIME_ZONE = "UTC"
    users = build_world()["users"]
    today = local_day(timezone.now())
    first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    now = timezone.now()
    for offset, (owner, project, node, count, task) in enumerate(STREAMS):
        gpus = gpus_of(node, count)
        start, number = at(f"{first.isoformat()}T{2 + 3 * offset:02d}:00"), offset
        while start < now:
            end = min(start + timedelta(hours=20 + 13 * (number % 4)), now)
            failed = number % 6 == 5
            ran_job(users[owner], project, gpus, start, end, task=task, wait=timedelta(minutes=5 + 47 * (number % 5)),
                    status=JobStatus.FAILED if failed else JobStatus.SUCCEEDED,
                    category=FailureCategory.OUT_OF_MEMORY if failed else "")
            readings(gpus, start, end, utilization=30 + 11 * (number % 6), every=timedelta(hours=1))
            start, number = end + timedelta(hours=2 + number % 7), number + 1
    nodes = list(Node.objects.all())
    moment, counters = at(f"{first.isoformat()}T00:00"), []
    while moment < now:
        counters += [NodeReading(node=node, at=moment, cpu_percent=10 + i, memory_percent=20 + i,
                                 net_rx_bytes_per_s=10**6 * (i + 1), disk_read_bytes_per_s=10**6 * (i + 2))
                     for i, node in enumerate(nodes)]
        moment += timedelta(hours=6)
    NodeReading.objects.bulk_create(counters)
    rollup(first, today, force=True)
    return {"users": users, "month": first}


PRODUCTION_STORAGE = {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory):
    """collectstatic with the production storage (hashed names, gzip copies), once for the session. The admin's,
    DRF's and Swagger UI's files are not on the report pages; leaving them out saves seconds."""
    root = tmp_path_factory.mktemp("static")
    with override_settings(STORAGES={**settings.STORAGES, "staticfiles": PRODUCTION_STORAGE}, STATIC_ROOT=root):
        call_command("collectstatic", interactive=False, verbosity=0,
                     ignore_patterns=["admin", "rest_framework", "drf_spectacular_sidecar"])
    return root


@pytest.fixture
def production_static(live_server, settings, collected_static):
    """The live server answering static files as production does: whitenoise serving the collected folder.

    The session's live server answers static files itself, from the source folders; for this test its
    application is swapped for a fresh one, whose whitenoise reads the collected folder with these settings."""
    settings.STORAGES = {**settings.STORAGES, "staticfiles": PRODUCTION_STORAGE}
    settings.STATIC_ROOT = collected_static
    server = live_server.thread.httpd
    served = server.get_app()
    server.set_app(WSGIHandler())
    yield live_server
    server.set_app(served)


def _sign_in(page, base_url, user) -> Client:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}])
    return client


def _pages(month) -> list[tuple[str, str]]:
    return [("platform_report", f"/reports/{month:%Y-%m}/"), ("operations", "/reports/operations/")]


def test_report_pages_load_measured(page, production_static, busy_platform):
    base = production_static.url
    client = _sign_in(page, base, busy_platform["users"]["dave"])
    pages = _pages(busy_platform["month"])
    for _name, path in pages:  # a running server: templates compiled, modules imported
        assert client.get(path).status_code == 200
    page.add_init_script(FIRST_CHART_PROBE)
    bundles = []
    page.on("response", lambda r: bundles.append(r) if "/static/plotly/" in r.url else None)
    results = []
    for name, path in pages:
        # The first visit of all starts with an empty browser cache; the others find plotly.js in it.
        for _visit in range(VISITS + (not results)):
            page.goto(base + path)
            page.wait_for_selector("[data-rendered='1']")
            results.append({"page": name, "plotly_cached": bool(results), **page.evaluate(FIGURES)})
    medians = {name: sorted(r["load_ms"] for r in results[1:] if r["page"] == name) for name, _path in pages}
    print(json.dumps({"report_pages": results, "budget_ms": LOAD_BUDGET_MS,
                      "median_load_ms": {name: loads[len(loads) // 2] for name, loads in medians.items()}}))

    bundle = bundles[0]
    assert HASHED_BUNDLE.search(bundle.url), bundle.url
    headers = bundle.all_headers()
    assert headers.get("content-encoding") in {"gzip", "br"}
    max_age = int(re.search(r"max-age=(\d+)", headers["cache-control"]).group(1))
    assert max_age >= YEAR and "immutable" in headers["cache-control"]
    assert results[0]["bundle_transfer_bytes"] < results[0]["bundle_bytes"] / 2  # compressed on the way
    assert all(r["bundle_transfer_bytes"] == 0 for r in results[1:])  # then taken from the cache, not asked for
    assert all(r["load_ms"] > 0 for r in results)  # every visit measured
    assert all(r["first_chart_ms"] is not None for r in results)


def test_charts_are_drawn_as_they_scroll_into_view_or_print_and_cut_off_no_label(page, production_static,
                                                                                   busy_platform, tmp_path):
    _sign_in(page, production_static.url, busy_platform["users"]["dave"])
    report = _pages(busy_platform["month"])[0][1]
    for _name, path in reversed(_pages(busy_platform["month"])):
        page.goto(production_static.url + path)
        page.wait_for_selector("[data-rendered='1']")
        page.wait_for_timeout(500)
        charts = page.locator("[data-figure]")
        # Only the charts on or near the first screen are drawn; the rest wait until they are scrolled to.
        assert 0 < page.locator("[data-rendered='1']").count() < charts.count() / 2
        height = page.evaluate("document.documentElement.scrollHeight")
        for index in range(charts.count()):
            charts.nth(index).scroll_into_view_if_needed()
        page.wait_for_function("document.querySelectorAll('[data-rendered=\"1\"]').length === "
                               "document.querySelectorAll('[data-figure]').length")
        assert page.evaluate("document.documentElement.scrollHeight") == height  # room was kept for every chart
        assert page.evaluate(CLIPPED_LABELS) == [], path
    # Peak demand versus capacity: a panel per GPU model (all three have 32 GPUs, so their capacity lines
    # coincided on shared axes), each with its capacity, allocation and demand lines.
    demand = page.locator('[data-figure="figure-capacity_daily"]')
    assert demand.locator("text.ytitle, text.y2title, text.y3title").all_text_contents() == [
        "A100 GPUs", "H100 GPUs", "L40S GPUs"]
    assert demand.locator(".scatterlayer .trace").count() == 9
    assert demand.locator("text.legendtext").all_text_contents() == ["peak allocated", "capacity", "peak demand"]

    # "Print or save as PDF" draws the charts not drawn yet, and opens every table.
    page.goto(production_static.url + report)
    page.wait_for_selector("[data-rendered='1']")
    page.pdf(path=tmp_path / "report.pdf")
    assert page.locator("[data-rendered='1']").count() == page.locator("[data-figure]").count() == 12
    assert page.locator("details.data:not([open])").count() == 0
