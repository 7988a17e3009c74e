"""In Debian's Chromium, in Chinese: alice picks 简体中文 in the header, a bad submission is
refused with the reason in Chinese and what she typed kept, her waiting job says why in Chinese, carol approves
her request in Chinese, dave opens a report in Chinese."""

import re

import pytest

from governance import services
from scheduling.jobs import submission
from tenants.models import Quota
from tests.conftest import choose_language, job_payload, login, logout, long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CJK = re.compile(r"[\u4e00-\u9fff]")


def chinese(text: str) -> bool:
    return bool(CJK.search(text))


def test_the_main_paths_in_chinese(page, live_server, users):
    url = live_server.url
    Quota.objects.filter(tenant__name="vision", gpu_model="H100").update(guaranteed_gpus=8, limit_gpus=8)
    running = submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8,
                                                                command=long_run(9999)))
    login(page, url, "alice")
    choose_language(page, "zh-hans")
    assert chinese(page.locator("nav").inner_text())

    page.goto(f"{url}/jobs/new/")
    page.select_option("#id_project", "vision/detection")
    page.select_option("#id_task_type", "research")
    page.select_option("#id_gpu_model", "H100")
    page.fill("#id_gpus_per_node", "0")
    page.fill("#id_image", "registry.local/pytorch:2.4")
    page.fill("#id_name", "zh-job")
    page.click("main button[type=submit]")
    error = page.locator("#error-gpus_per_node").inner_text()
    assert chinese(error) and "at least" not in error
    assert page.input_value("#id_name") == "zh-job"

    page.fill("#id_gpus_per_node", "8")
    page.click("main button[type=submit]")
    page.wait_for_selector(".timeline")
    page.reload()  # the pass has run: the page says why it waits
    why = page.locator("main").inner_text()
    assert chinese(why) and "quota" not in why.lower().replace("quota_exhausted", "")

    request = services.submit_request(users["alice"], {
        "kind": "runtime_extension", "job": str(running.pk), "max_runtime_minutes": "900",
        "justification": "The sweep needs fifteen hours."})
    logout(page)
    login(page, url, "carol")  # the same browser: its language cookie says 简体中文 until carol chooses
    assert page.evaluate("document.documentElement.lang") == "zh-hans"
    page.goto(f"{url}/requests/{request.pk}/")
    page.fill("#id_comment", "同意。")
    page.click("#approve")
    page.wait_for_selector("#decision")
    assert chinese(page.locator("#request-state").inner_text())
    assert chinese(page.locator("#decision h2").inner_text())

    logout(page)
    login(page, url, "dave")
    choose_language(page, "zh-hans")
    page.goto(f"{url}/reports/")
    assert chinese(page.locator("h1").inner_text())
