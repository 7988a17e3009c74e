"""In a browser: the job list and the job page refresh in place (no reload) while jobs change, ask nothing while
the tab is hidden and at once when it is shown again; the shaped list passes axe-core's checks."""

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.core.cache import cache

from scheduling.models import Job, JobStatus
from tests.conftest import login
from tests.factories import build_world, make_job, make_queue_state
from tests.gpuportal.test_accessibility import blocking_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOWN = "/jobs/?shape=1&columns=name&columns=status&columns=exit_code&columns=wait&sort=-wait"


def set_visibility(page, state: str) -> None:
    """What the browser does when the tab is hidden or shown again (headless, it never is)."""
    page.evaluate("state => { Object.defineProperty(document, 'visibilityState', {value: state, configurable: true});"
                  " document.dispatchEvent(new Event('visibilitychange')); }", state)


def test_the_list_refreshes_in_place_and_pauses_while_hidden(page, live_server):
    cache.clear()
    world = build_world()
    job = make_job(world["users"]["alice"], world["tenants"]["vision"], JobStatus.QUEUED, "first-name")
    url = live_server.url
    login(page, url, "alice")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/jobs/rows/" in request.url else None)
    page.goto(f"{url}{SHOWN}")
    page.evaluate("window.notReloaded = true; document.getElementById('job-rows').dataset.liveSeconds = '0.2'")
    Job.objects.filter(pk=job.pk).update(name="renamed-meanwhile")
    set_visibility(page, "visible")  # the first turn at once
    page.wait_for_selector("#job-rows td.name >> text=renamed-meanwhile", timeout=5000)
    assert page.evaluate("window.notReloaded") is True
    assert page.locator("#job-rows th").all_inner_texts() == ["#", "Name", "Status", "Waited", "Exit code"]
    set_visibility(page, "hidden")
    page.wait_for_timeout(400)  # a request already under way may still finish
    before = len(asked)
    page.wait_for_timeout(1200)
    assert len(asked) == before  # nothing asked while hidden
    set_visibility(page, "visible")
    page.wait_for_timeout(300)
    assert len(asked) > before

    axe = Axe()
    assert blocking_violations(axe, page) == []


def test_the_job_page_refreshes_its_regions_in_place(page, live_server):
    cache.clear()
    world = build_world()
    job = make_job(world["users"]["alice"], world["tenants"]["vision"], JobStatus.QUEUED, "waits")
    make_queue_state(job, "held", {"held_by": "alice"}, 7, 2)
    url = live_server.url
    login(page, url, "alice")
    page.goto(f"{url}/jobs/{job.pk}/")
    page.wait_for_selector("#job-state >> text=within your tenant: 2")
    page.evaluate("window.notReloaded = true; document.getElementById('job-live').dataset.liveSeconds = '0.2'")
    make_queue_state(job, "held", {"held_by": "alice"}, 5, 5)
    set_visibility(page, "visible")
    page.wait_for_selector("#job-state >> text=within your tenant: 5", timeout=5000)
    assert page.evaluate("window.notReloaded") is True
