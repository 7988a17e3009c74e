"""Task types read in the reader's language with their priority: the names a site starts with are translated
("研究实验（优先级 50）"), a name the site entered itself reads as entered; one pattern for "name (priority N)"."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import translation

from scheduling.jobs import submission
from scheduling.models import STARTING_TASK_TYPE_NAMES, task_type_label
from tests.conftest import job_payload
from tests.factories import PASSWORD, make_task_type

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-Hans"}


def test_starting_names_are_translated_and_site_names_read_as_entered(world):
    research = make_task_type("research", 50, name="Research experiment")
    burn_in = make_task_type("burnin", 20, name="GPU burn-in")
    assert "Research experiment" in STARTING_TASK_TYPE_NAMES and "GPU burn-in" not in STARTING_TASK_TYPE_NAMES
    with translation.override("en"):
        assert research.label == "Research experiment (priority 50)" == task_type_label("Research experiment", 50)
    with translation.override("zh-hans"):
        assert research.display_name == "研究实验" and research.label == "研究实验（优先级 50）"
        assert burn_in.display_name == "GPU burn-in" and burn_in.label == "GPU burn-in（优先级 20）"
    assert str(research) == "Research experiment"  # what the audit log and the admin keep: the stored name


def test_pages_show_the_translated_name_with_its_priority(world, users):
    make_task_type("research", 50, name="Research experiment")
    make_task_type("burnin", 20, name="GPU burn-in")
    job = submission.submit_job(users["alice"], job_payload(task_type="research"))
    client = Client()
    assert client.login(username="alice", password=PASSWORD)
    form = client.get("/jobs/new/", **ZH).content.decode()
    assert "研究实验（优先级 50）" in form and "GPU burn-in（优先级 20）" in form and "Research experiment" not in form
    page = client.get(f"/jobs/{job.pk}/", **ZH).content.decode()
    assert "研究实验" in page and "Research experiment" not in page
    request_form = client.get("/requests/new/", **ZH).content.decode()
    assert "研究实验（优先级 50）" in request_form
