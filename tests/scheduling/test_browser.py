"""In Debian's Chromium through Playwright: log in as alice, submit a job, see it in the list."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_alice_logs_in_submits_and_sees_her_job(page, live_server, world):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "demo")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator('tr.quota-row[data-tenant="vision"]').count() == 3

    page.goto(f"{live_server.url}/jobs/new/")
    page.select_option("#id_project", "vision/detection")
    page.select_option("#id_task_type", "research")
    page.select_option("#id_gpu_model", "A100")
    page.fill("#id_gpus_per_node", "0")
    page.fill("#id_image", "registry.local/pytorch:2.4")
    page.fill("#id_name", "browser-job")
    page.click("main button[type=submit]")
    assert "at least 1" in page.locator("#error-gpus_per_node").inner_text()
    assert page.input_value("#id_name") == "browser-job"  # what was typed is kept

    page.fill("#id_gpus_per_node", "4")
    page.click("main button[type=submit]")
    page.wait_for_selector(".timeline")
    assert "browser-job" in page.locator("h1").inner_text()

    page.goto(f"{live_server.url}/jobs/")
    row = page.locator("tr", has_text="browser-job")
    status = row.locator(".status").inner_text()
    position = row.locator(".position").inner_text()
    assert status in ("Queued", "Admitted", "Dispatching", "Running")
    assert status != "Queued" or position.strip() not in ("", "—")
