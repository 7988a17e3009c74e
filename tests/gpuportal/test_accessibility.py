"""The main pages pass axe-core's checks with no serious or critical violation, as alice (researcher), dave
(manager) and admin see them: dashboard, job list, the job form refused, a job's page, the queue, a node's page,
a monthly report and the request form. axe-core comes with ``axe-playwright-python`` (requirements.txt), read
from disk into the page: nothing is fetched from the internet."""

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone

from scheduling.jobs import submission
from tests.conftest import job_payload, login, logout, long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: What counts as a failure: axe's two highest impacts.
BLOCKING = ("serious", "critical")


def blocking_violations(axe, page) -> list[str]:
    """``rule: selector`` for each serious or critical violation on the page as it is now."""
    results = axe.run(page).response
    return [f"{v['id']} ({v['impact']}): {', '.join(str(n['target']) for n in v['nodes'][:3])}"
            for v in results["violations"] if v["impact"] in BLOCKING]


def test_main_pages_have_no_serious_accessibility_violation(page, live_server, users):
    url = live_server.url
    job = submission.submit_job(users["alice"], job_payload(command=long_run(600)))
    axe = Axe()
    found: dict[str, list[str]] = {}

    def check(path, prepare=None):
        page.goto(f"{url}{path}")
        if prepare:
            prepare()
        found[f"{path} ({who})"] = blocking_violations(axe, page)

    def refuse_submission():
        page.fill("#id_gpus_per_node", "0")
        page.fill("#id_image", "")
        page.click("main form[method=post] button[type=submit]")
        page.wait_for_selector("#error-summary")

    who = "alice"
    login(page, url, who)
    for path in ("/", "/jobs/", f"/jobs/{job.pk}/", "/queue/", "/requests/new/?kind=quota"):
        check(path)
    check("/jobs/new/", refuse_submission)
    logout(page)

    who = "dave"
    login(page, url, who)
    check(f"/reports/{timezone.now():%Y-%m}/")
    logout(page)

    who = "admin"
    login(page, url, who)
    node = job.allocations.first().gpu.node.name
    check("/inventory/")
    check(f"/inventory/nodes/{node}/")

    failing = [f"{where}: {rule}" for where, rules in found.items() for rule in rules]
    assert not failing, "\n".join(failing)
    assert len(found) == 9
