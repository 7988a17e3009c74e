"""In Debian's Chromium: alice asks for a longer runtime (the form showing only that kind's fields), carol
approves it, alice sees the decision."""

import pytest

from governance.models import PriorityRequest
from scheduling.jobs import submission
from tests.conftest import job_payload, login, logout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_carol_approves_alices_request_and_alice_sees_it(page, live_server, users):
    job = submission.submit_job(users["alice"], job_payload(gpus_per_node=2, name="long-run"))
    url = live_server.url
    login(page, url, "alice")
    page.goto(f"{url}/requests/new/")
    page.select_option("#id_kind", "quota")  # the form shows only the fields of the chosen kind
    assert page.is_visible("#id_guaranteed") and page.is_visible("#id_gpu_model")
    assert not page.is_visible("#id_job") and not page.is_visible("#id_max_runtime_minutes")
    page.select_option("#id_kind", "runtime_extension")
    assert page.is_visible("#id_job") and page.is_visible("#id_max_runtime_minutes")
    assert not page.is_visible("#id_gpu_model") and not page.is_visible("#id_start")
    page.fill("#id_job", str(job.pk))
    page.fill("#id_max_runtime_minutes", "900")
    page.fill("#id_justification", "short")
    page.click("main button[type=submit]")
    assert "at least 10 characters" in page.locator("#error-justification").inner_text()
    assert page.input_value("#id_max_runtime_minutes") == "900"  # what was typed is kept
    page.fill("#id_justification", "The sweep needs fifteen hours on two GPUs.")
    page.click("main button[type=submit]")
    page.wait_for_selector("#request-state")
    assert page.locator("#request-state").inner_text() == "Pending"
    assert "Nobody decides their own request" in page.locator("#no-decision").inner_text()
    request = PriorityRequest.objects.get()
    logout(page)

    login(page, url, "carol")
    page.goto(f"{url}/requests/")
    page.click(f'tr[data-request="{request.pk}"] a')
    page.wait_for_selector("#approve")
    page.fill("#id_comment", "Approved for this sweep only.")
    page.click("#approve")
    page.wait_for_selector("#decision")
    logout(page)

    login(page, url, "alice")
    assert page.locator("#notifications-link .bell").inner_text() == "1"
    page.click("#notifications-link")
    page.click(f'.notifications a[href="/requests/{request.pk}/"]')
    page.wait_for_selector("#decision")
    assert page.locator("#request-state").inner_text() == "Approved"
    decision = page.locator("#decision").inner_text()
    assert "carol" in decision and "Approved for this sweep only." in decision
    assert page.locator("#impact").count() == 0  # a decided request shows its decision, not a preview
