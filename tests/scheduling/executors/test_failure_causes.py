"""A failed pod's log names its cause end to end: Kubernetes (the fake API server) -> the sync's diagnosis ->
the job, its timeline, the API and the page, in English and in Chinese."""

import re

import pytest

from accounts.models import Preference
from scheduling.models import Job, JobStatus
from tests.scheduling.executors.test_kubernetes import submit

pytestmark = pytest.mark.django_db(transaction=True)

LOG = "\n".join([
    "2026-12-04T10:00:01Z training starts",
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 214, in <module>',
    "    from model import build_model",
    '  File "/workspace/model.py", line 9, in <module>',
    "    from flash_attn import FlashAttention",
    "ImportError: cannot import name 'FlashAttention' from 'flash_attn' "
    "(/usr/local/lib/python3.11/site-packages/flash_attn/__init__.py)",
])
DECISIVE = "ImportError: cannot import name 'FlashAttention' from 'flash_attn'"
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def _failure_section(page: str) -> str:
    return page.split('<section class="card failure">', 1)[1].split("</section>", 1)[0]


def test_an_import_error_in_the_pods_log_is_the_failure_it_names(kube, users, client, api):
    job = submit(users)
    namespace, name = kube.objects_of(job)
    kube.fake.exit(namespace, name, code=1, log=LOG)
    kube.sync()
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.failure_category, job.exit_code) == (JobStatus.FAILED, "exit_code", 1)
    assert job.failure_message == ("The program stopped at an import: the installed flash_attn has no FlashAttention "
                                   "(ImportError).")
    event = job.events.get(kind="status", to_status=JobStatus.FAILED)
    assert event.reason == job.failure_message and event.data["phrase"]["params"]["name"] == "FlashAttention"
    failure = api("alice").get(f"/api/jobs/{job.pk}/").json()["failure"]
    assert failure["evidence"]["log_line"].startswith(DECISIVE) and "pip show flash_attn" in failure["advice"]

    client.login(username="alice", password="demo")
    section = _failure_section(client.get(f"/jobs/{job.pk}/").content.decode())
    assert "the installed flash_attn has no FlashAttention" in section and "pip show flash_attn" in section
    assert 'id="failure-log-line"' in section and "cannot import name &#x27;FlashAttention&#x27;" in section
    assert "<summary>Evidence</summary>" in section and "its container exited with an error" in section
    assert "condition:" not in section and "{}" not in section and "exited with code 1" not in section

    Preference.objects.update_or_create(user=users["alice"], defaults={"language": "zh-hans"})
    client.logout()
    client.login(username="alice", password="demo")  # her language comes with her sign-in
    chinese = _failure_section(client.get(f"/jobs/{job.pk}/").content.decode())
    message = chinese.split('id="failure-message">', 1)[1].split("</p>", 1)[0]
    advice = chinese.split('id="failure-advice">', 1)[1].split("</p>", 1)[0]
    assert CHINESE.search(message) and "FlashAttention" in message and "flash_attn" in message
    assert CHINESE.search(advice.split("</strong>", 1)[1]) and "pip 命令查看 flash_attn" in advice
