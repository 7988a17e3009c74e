"""At a phone's width (390 x 844) in Debian's Chromium: the page never scrolls sideways (wide tables scroll in
their own box; the job tables are drawn as cards) and the folded navigation opens and leads somewhere."""

import pytest

from scheduling.jobs import submission
from tests.conftest import job_payload, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = "document.documentElement.scrollWidth <= window.innerWidth"


def test_pages_fit_a_phone_and_the_menu_opens(page, live_server, users):
    job = submission.submit_job(users["alice"], job_payload(name="phone-layout-check-with-a-long-unbroken-name"))
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, live_server.url, "alice")

    for path in ("/", "/jobs/", f"/jobs/{job.pk}/"):
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate(FITS), f"{path} scrolls sideways at 390 px"
    page.goto(f"{live_server.url}/jobs/")
    job_table = page.locator(".table-wrap").first  # each job a card: nothing to scroll, even inside the box
    assert job_table.evaluate("box => box.scrollWidth <= box.clientWidth")

    menu, toggle = page.locator("#site-menu"), page.locator(".menu-toggle")
    assert toggle.is_visible() and not menu.is_visible()
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true" and menu.is_visible()
    assert page.evaluate(FITS)
    menu.get_by_role("link", name="Inventory").click()
    page.wait_for_url(f"{live_server.url}/inventory/")
    assert page.locator("h1").inner_text() == "Inventory"
