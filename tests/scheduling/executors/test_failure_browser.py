"""A failed job's page in Debian's Chromium, as its owner reads it in English and in Chinese, at 1440 and
390 px: the cause its log named, the decisive line quoted, the next step and the evidence in sentences, and
nothing that scrolls the page sideways."""

import re

import pytest

from accounts.models import Preference
from scheduling import lifecycle
from scheduling.executors.kubernetes.diagnosis import PodState, diagnose
from scheduling.jobs import submission
from scheduling.models import Job, JobStatus
from tests.conftest import job_payload, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = "document.documentElement.scrollWidth <= window.innerWidth"
CHINESE = re.compile(r"[\u4e00-\u9fff]")
LINE = ("ImportError: cannot import name 'FlashAttention' from 'flash_attn' "
        "(/usr/local/lib/python3.11/site-packages/flash_attn/__init__.py)")


def _failed_job(users) -> Job:
    job = Job.objects.get(pk=submission.submit_job(users["alice"], job_payload(name="flash-attn-probe")).pk)
    if job.status != JobStatus.RUNNING:
        lifecycle.transition(job, JobStatus.RUNNING, "Containers started.")
    pod = PodState("train-0", node="node-a", phase="Failed", exit_code=1, terminated_reason="Error")
    found = diagnose([pod], logs={"train-0": "\n".join(["Traceback (most recent call last):",
                                                        '  File "/workspace/model.py", line 9, in <module>', LINE])},
                     conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                  "message": "Job has reached the specified backoff limit"}])
    lifecycle.fail_or_retry(job, found.as_dict())
    return Job.objects.get(pk=job.pk)


def test_the_failure_names_its_cause_in_both_languages_and_widths(page, live_server, users):
    job = _failed_job(users)
    assert job.status == JobStatus.FAILED
    seen = {}
    for language in ("en", "zh-hans"):
        Preference.objects.update_or_create(user=users["alice"], defaults={"language": language})
        page.context.clear_cookies()  # a new session: the language comes from her preference
        login(page, live_server.url, "alice")
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{live_server.url}/jobs/{job.pk}/")
            card = page.locator("section.failure")
            message, advice = card.locator("#failure-message"), card.locator("#failure-advice")
            decisive = card.locator("#failure-log-line code")
            assert message.is_visible() and advice.is_visible() and decisive.is_visible(), (language, width)
            assert decisive.inner_text() == LINE
            card.locator("summary").last.click()  # the evidence, folded
            facts = card.locator(".evidence-facts li").all_inner_texts()
            assert facts and not any("{" in fact or "condition:" in fact for fact in facts), facts
            assert page.evaluate(FITS), f"the failed job's page scrolls sideways at {width} px ({language})"
            seen[language] = (message.inner_text(), advice.inner_text(), facts)
    english, chinese = seen["en"], seen["zh-hans"]
    assert english[0] == "The program stopped at an import: the installed flash_attn has no FlashAttention " \
                         "(ImportError)."
    assert "pip show flash_attn" in english[1] and "Pod train-0: its container exited with an error." in english[2]
    assert "exited with code" not in english[0]
    assert CHINESE.search(chinese[0]) and "FlashAttention" in chinese[0] and CHINESE.search(chinese[1])
    assert all(CHINESE.search(fact) for fact in chinese[2])
