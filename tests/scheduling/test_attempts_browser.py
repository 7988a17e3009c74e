"""In Debian's Chromium, as alice, whose job was preempted by another tenant's and requeued: its page lists the
attempt that ran and how it ended, shows no run time or deadline of it, fits 1440 and 390 px without sideways
scrolling, in English and in Chinese."""

import re

import pytest

from scheduling.jobs import submission
from scheduling.models import Job
from tenants.models import Quota
from tests.conftest import choose_language, job_payload, login, long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = "document.documentElement.scrollWidth <= window.innerWidth"
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_a_requeued_jobs_attempts_at_both_widths_in_both_languages(page, live_server, users):
    Quota.objects.filter(tenant__name="vision", gpu_model="H100").update(guaranteed_gpus=0, limit_gpus=32)
    borrowers = [submission.submit_job(users["alice"], job_payload(gpu_model="H100", gpus_per_node=8,
                                                                   command=long_run(9999))) for _ in range(4)]
    submission.submit_job(users["bob"], job_payload(tenant="nlp", project="llm-pretrain", gpu_model="H100",
                                                    gpus_per_node=8))
    victim = Job.objects.filter(pk__in=[b.pk for b in borrowers], retry_count=1).get()
    url = live_server.url
    login(page, url, "alice")

    for language in ("en", "zh-hans"):
        choose_language(page, language)
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{url}/jobs/{victim.pk}/")
            where = f"{language} at {width} px"
            assert page.evaluate("document.documentElement.lang") == language, where
            attempt = page.locator("#attempt-1")
            assert attempt.is_visible(), where
            assert attempt.get_attribute("data-outcome") == "preempted", where
            assert page.locator("#current-attempt").is_visible(), where
            assert page.locator("#run-time").count() == 0 and page.locator("#deadline").count() == 0, where
            assert page.evaluate(FITS), f"the job page scrolls sideways ({where})"
            box = attempt.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, where
            text = page.locator("#attempts").inner_text()
            if language == "en":
                assert "Preempted by a job of tenant nlp" in text, where
                assert "No log: the program never started." in text, where  # it was preempted while dispatched
            else:
                assert CJK.search(page.locator("#attempts h2").inner_text()), where
                assert "Preempted by" not in text and "No log" not in text, where
                assert "nlp" in text, where  # the tenant named, in the Chinese sentence
