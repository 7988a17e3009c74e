"""In Debian's Chromium, in English and in Chinese, at 1440 and 390 px: a refused submission opens on the summary
of what is wrong (focused, in view, every refusal at once, the way to ask for quota a working link, each line
leading into its field); the dashboard and the job list show each job's name, status, reason and likely start
at a phone's width without a sideways scroll, and the quota bars whole."""

import re

import pytest

from scheduling.jobs import submission
from tests.conftest import choose_language, job_payload, login, long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CJK = re.compile(r"[\u4e00-\u9fff]")
WIDE, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
#: The right edge of every element matching the selector, and the page's own width.
RIGHT_EDGES = """selector => ({
    edges: [...document.querySelectorAll(selector)].map(e => e.getBoundingClientRect().right),
    page: document.documentElement.scrollWidth, view: window.innerWidth})"""


def refuse_a_submission(page, url):
    """Erin (tenant speech, no H100 quota) asks for 12 H100 GPUs on one node and forgets the image."""
    page.goto(f"{url}/jobs/new/")
    page.select_option("#id_gpu_model", "H100")
    page.fill("#id_gpus_per_node", "12")
    page.fill("#id_image", "")
    page.click("main form[method=post] button[type=submit]")
    page.wait_for_selector("#error-summary")


def check_refused_form(page, url, chinese: bool):
    summary = page.locator("#error-summary")
    assert page.evaluate("document.activeElement.id") == "error-summary"
    box = summary.bounding_box()
    assert 0 <= box["y"] < page.viewport_size["height"]  # in view, not below the fold
    items = summary.locator("li")
    assert items.count() == 3  # the model without quota, the size and the image: at once
    text = summary.inner_text()
    assert bool(CJK.search(text)) == chinese
    for field in ("gpu_model", "gpus_per_node", "image"):
        assert summary.locator(f'a[href="#id_{field}"]').count() == 1
    quota_link = summary.locator('a[href^="/requests/new/?kind=quota"]')
    assert quota_link.count() == 1, text
    assert page.locator('#error-gpu_model a[href^="/requests/new/"]').count() == 1
    summary.locator('a[href="#id_image"]').click()
    assert page.evaluate("document.activeElement.id") == "id_image"
    described = page.get_attribute("#id_image", "aria-describedby").split()
    assert "error-image" in described and all(page.locator(f"#{ref}").count() == 1 for ref in described)
    quota_link.click()
    page.wait_for_url(re.compile(r"/requests/new/\?kind=quota"))
    assert page.input_value("#id_gpu_model") == "H100"


def check_phone_tables(page, url, job_name: str):
    page.set_viewport_size(PHONE)
    for path in ("/", "/jobs/"):
        page.goto(f"{url}{path}")
        row = page.locator("table.jobs tr", has_text=job_name).first
        for cell in ("name", "state", "reason", "position"):
            box = row.locator(f"td.{cell}").bounding_box()
            assert box and box["width"] > 0 and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], \
                (path, cell, box)
        assert row.locator("td.reason").inner_text().strip()  # the reason is there, readable
        edges = page.evaluate(RIGHT_EDGES, "table.jobs td.state, table.jobs td.reason, .quota .bar, .quota td")
        assert edges["page"] <= edges["view"] and max(edges["edges"]) <= edges["view"], (path, edges)
    page.set_viewport_size(WIDE)


def test_refused_forms_and_phone_tables_in_english_and_chinese(page, live_server, users):
    url = live_server.url
    # erin's speech holds all its A100s; the next A100 job waits for quota with a reason
    submission.submit_job(users["erin"], job_payload(tenant="speech", project="asr", gpus_per_node=8,
                                                     command=long_run(600)))
    submission.submit_job(users["erin"], job_payload(tenant="speech", project="asr", gpus_per_node=4,
                                                     name="waits-for-quota", command=long_run(60)))
    page.set_viewport_size(WIDE)
    login(page, url, "erin")
    refuse_a_submission(page, url)
    check_refused_form(page, url, chinese=False)
    page.set_viewport_size(PHONE)
    refuse_a_submission(page, url)
    assert page.evaluate("document.activeElement.id") == "error-summary"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.set_viewport_size(WIDE)
    check_phone_tables(page, url, "waits-for-quota")
    page.goto(f"{url}/")
    assert re.search(r"\b\d+ GPUs?\b", page.locator("table.quota td.queued").first.inner_text())
    submitted = page.locator("table.jobs td.submitted").first.inner_text()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", submitted)  # with the year and the zone
    waiting = page.locator("table.jobs tr", has_text="waits-for-quota").first.locator("td.position").inner_text()
    assert waiting.rstrip().endswith(" UTC"), waiting  # a likely start names its zone
    page.goto(f"{url}/jobs/")
    assert page.locator("#id_mine").get_attribute("type") == "checkbox"
    page.check("#id_mine")
    page.click("form.filters button[type=submit]")
    assert page.locator("table.jobs tr", has_text="waits-for-quota").count() == 1

    choose_language(page, "zh-hans")
    refuse_a_submission(page, url)
    check_refused_form(page, url, chinese=True)
    check_phone_tables(page, url, "waits-for-quota")
