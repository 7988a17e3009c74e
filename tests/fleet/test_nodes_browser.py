"""In Debian's Chromium, at 1440 and 390 px, in English and Chinese: the queue's key cells (position, job, why it
waits, likely start) and a node's GPU rows (GPU, health, who holds it) lie inside the window without scrolling
sideways; an admin drains a node through its confirmation step, which names the running job, and the job's
timeline then says what happened."""

import re

import pytest

from fleet.models import AdminState, Node
from scheduling.jobs import submission
from tests.conftest import choose_language, job_payload, login, logout, long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CJK = re.compile(r"[\u4e00-\u9fff]")
WIDE, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
FITS = "document.documentElement.scrollWidth <= window.innerWidth"
#: Every element the selector finds is drawn (not hidden, not empty) and lies wholly inside the window's width.
IN_VIEW = """els => els.length > 0 && els.every(e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth + 1; })"""


def in_view(page, selector: str) -> bool:
    return page.locator(selector).evaluate_all(IN_VIEW)


def test_queue_and_node_pages_at_both_widths_and_a_confirmed_drain(page, live_server, users):
    url = live_server.url
    for _ in range(2):
        submission.submit_job(users["alice"], job_payload(gpus_per_node=8, command=long_run(9999)))
    mine = submission.submit_job(users["alice"], job_payload(gpus_per_node=8, name="alice-waits"))
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="L40S",
                                                    gpus_per_node=8, command=long_run(9999)))
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="L40S",
                                                    gpus_per_node=4, name="bob-waits"))
    running = submission.submit_job(users["erin"], job_payload(tenant="speech", project="asr", gpus_per_node=2,
                                                               name="erin-runs", command=long_run(9999)))
    node = running.allocations.first().gpu.node

    login(page, url, "alice")
    for size in (WIDE, PHONE):
        page.set_viewport_size(size)
        page.goto(f"{url}/queue/")
        assert page.evaluate(FITS), f"/queue/ scrolls sideways at {size['width']} px"
        for cells in (".queue-table td.position", ".queue-table td.name", ".queue-table td.reason",
                      ".queue-table td.start"):
            assert in_view(page, cells), f"{cells} not in view at {size['width']} px"
        text = page.locator(".queue-table").inner_text()
        assert "quota_exhausted" not in text and "alice-waits" in text and "bob-waits" not in text
        assert "Tenant nlp uses 8 L40S GPUs, 4 of them borrowed" in text  # bob's row: its reason, not its name
    page.select_option("#gm", "A100")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r".*gpu_model=A100.*"))
    assert page.locator(".queue-table tbody tr").count() == 1
    name = page.locator(".queue-table td.name")
    assert name.inner_text() == f"#{mine.pk} alice-waits"
    # at 390 px each cell is labelled by its column's name, the header row being hidden
    assert name.evaluate("td => getComputedStyle(td, '::before').content") == '"Job: "'

    page.set_viewport_size(WIDE)
    choose_language(page, "zh-hans")
    for size in (WIDE, PHONE):
        page.set_viewport_size(size)
        page.goto(f"{url}/queue/")
        assert page.evaluate(FITS) and in_view(page, ".queue-table td.reason")
        assert CJK.search(page.locator(".queue-table td.reason").first.inner_text())
    page.set_viewport_size(WIDE)  # at a phone's width the menu, with the sign-out button, is folded
    logout(page)

    login(page, url, "admin")  # the same browser: still in Chinese until the admin chooses
    choose_language(page, "en")
    for size in (WIDE, PHONE):
        page.set_viewport_size(size)
        page.goto(f"{url}/inventory/nodes/{node.name}/")
        assert page.evaluate(FITS), f"the node page scrolls sideways at {size['width']} px"
        for cells in (".gpus-table td.name", ".gpus-table td.health", ".gpus-table td.holder"):
            assert in_view(page, cells), f"{cells} not in view at {size['width']} px"
        uuids = page.locator(".gpus-table code.uuid").all_inner_texts()
        assert len(set(uuids)) == len(uuids) == 8  # the ends told apart, not one shared prefix

    page.goto(f"{url}/inventory/?rack={node.rack}")  # at 390 px: the inventory, its node's GPUs unfolded
    page.locator(f'[data-node="{node.name}"] details.node-gpus > summary').click()
    assert page.evaluate(FITS) and in_view(page, f'[data-node="{node.name}"] .gpus-table td.holder')

    page.set_viewport_size(PHONE)  # the action through its confirmation, on a phone
    page.goto(f"{url}/inventory/nodes/{node.name}/")
    page.fill("#id_reason", "PSU swap")
    page.click("button[value=draining]")
    page.wait_for_selector(".node-confirm")
    assert page.evaluate(FITS) and in_view(page, ".node-confirm td.name") and in_view(page, ".node-confirm td.fate")
    summary = page.locator(".affected-summary").inner_text()
    assert summary == "1 job holds 2 GPUs of this node (tenants: speech)."
    assert "erin-runs" in page.locator(".node-confirm table").inner_text()
    page.click(".node-confirm button[type=submit]")
    page.wait_for_url(f"{url}/inventory/nodes/{node.name}/")
    node.refresh_from_db()
    assert node.admin_state == AdminState.DRAINING
    page.goto(f"{url}/jobs/{running.pk}/")
    assert f"Node {node.name} is being drained by admin: PSU swap." in page.locator("main").inner_text()

    page.set_viewport_size(WIDE)
    choose_language(page, "zh-hans")
    page.set_viewport_size(PHONE)
    page.goto(f"{url}/inventory/nodes/{Node.objects.exclude(pk=node.pk).order_by('name').first().name}/")
    assert page.evaluate(FITS) and CJK.search(page.locator("main").inner_text())
    assert in_view(page, ".gpus-table td.health")
