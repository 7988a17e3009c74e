"""In Debian's Chromium, English and Chinese, 1440 and 390 px: alice's submission that would stop her own running
job names it before anything is stored and offers to spare it; carol's preview of alice's priority request says
the job starts right after the preemption it needs."""

import pytest

from governance.models import PriorityRequest
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tenants.models import Quota
from tests.conftest import choose_language, job_payload, login, logout, long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def fill_training_job(page):
    page.select_option("#id_project", "vision/detection")
    page.select_option("#id_task_type", "training")
    page.select_option("#id_gpu_model", "A100")
    page.fill("#id_gpus_per_node", "8")
    page.fill("#id_image", "registry.local/x:1")
    page.fill("#id_command", long_run(600))
    page.fill("#id_max_runtime_minutes", "120")


def test_own_preemptions_are_named_before_submitting_and_the_preview_comes_true(page, live_server, users):
    Quota.objects.filter(tenant__name="nlp", gpu_model="A100").update(guaranteed_gpus=8, limit_gpus=24)
    Quota.objects.filter(tenant__name="vision", gpu_model="A100").update(guaranteed_gpus=16, limit_gpus=24)
    own = submission.submit_job(users["alice"], job_payload(task_type="evaluation", gpus_per_node=8, name="own-eval",
                                                            command=long_run(9999), max_runtime_minutes=240))
    for _ in range(3):
        submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpus_per_node=8,
                                                        command=long_run(9999)))
    url = live_server.url
    login(page, url, "alice")

    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{url}/jobs/new/")
    fill_training_job(page)
    page.click("main form[method=post] button[type=submit]:not([name])")
    warning = page.locator("#own-preemptions")
    warning.wait_for()
    assert "would stop one of your own running jobs" in warning.inner_text()
    assert warning.locator(f'a[href="/jobs/{own.pk}/"]').inner_text().endswith("own-eval")
    assert not Job.objects.filter(task_type__code="training").exists()  # nothing stored before she chooses

    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the question and both buttons fit
    assert no_sideways_scroll(page)
    for choice in ("spare", "preempt"):
        box = warning.locator(f'button[value="{choice}"]').bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390

    choose_language(page, "zh-hans")  # the same question in Chinese, on the phone
    page.goto(f"{url}/jobs/new/")
    fill_training_job(page)
    page.click("main form[method=post] button[type=submit]:not([name])")
    warning.wait_for()
    assert warning.locator(f'a[href="/jobs/{own.pk}/"]').count() == 1 and no_sideways_scroll(page)
    assert page.input_value("#id_image") == "registry.local/x:1"  # what was typed comes back with the question
    page.click('#own-preemptions button[value="spare"]')
    page.wait_for_url(f"{url}/jobs/*/")
    job = Job.objects.get(task_type__code="training")
    assert job.spare_own_jobs is True
    assert Job.objects.get(pk=own.pk).retry_count == 0  # her own job was spared
    assert no_sideways_scroll(page)

    # A priority request for a waiting job of hers: the preview says when the job itself starts.
    waiting = submission.submit_job(users["alice"], job_payload(task_type="evaluation", gpus_per_node=8,
                                                                command=long_run(60), max_runtime_minutes=60))
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.QUEUED
    choose_language(page, "en")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{url}/requests/new/?kind=priority&job={waiting.pk}")
    page.select_option("#id_task_type", "inference")
    page.fill("#id_justification", "The review needs this result today.")
    page.click("main form button[type=submit]:not([name])")
    page.wait_for_selector("#own-preemptions")  # inference would stop her cheapest job: her own evaluation
    assert page.locator(f'#own-preemptions a[href="/jobs/{own.pk}/"]').count() == 1
    assert not PriorityRequest.objects.exists()
    page.click('#own-preemptions button[value="preempt"]')
    page.wait_for_selector("#request-state")
    request = PriorityRequest.objects.get(job=waiting)
    logout(page)

    login(page, url, "admin")
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{url}/requests/{request.pk}/")
        after = page.locator("#impact-subject-after").inner_text()
        assert "right after the scheduler stops" in after, after
        assert "waits" in page.locator("#impact-subject-before").inner_text()
        assert "right after the scheduler stops 1 running job" in page.locator(".impact-starts").inner_text()
        assert no_sideways_scroll(page)
    choose_language(page, "zh-hans")
    assert page.locator("#impact-subject-after li").count() == 1 and no_sideways_scroll(page)
