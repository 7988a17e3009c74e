"""The ``mail_type`` submit field, as Slurm's ``--mail-type``: from the API, the form and ``#SBATCH``, stored in one
form, refused by name when it asks for what the portal does not mail."""

import pytest
from django.core.exceptions import ValidationError

from scheduling.jobs.mailtypes import parse_mail_type
from scheduling.models import Job
from tests.conftest import job_payload


@pytest.mark.parametrize(("given", "stored"), [
    ("", ""), (None, ""), ("END", "END"), ("fail, end", "END,FAIL"), ("ALL", "BEGIN,END,FAIL,REQUEUE"),
    ("requeue,BEGIN,begin", "BEGIN,REQUEUE"), ("none", "NONE"),
])
def test_mail_types_are_stored_in_one_form(given, stored):
    assert parse_mail_type(given) == stored


@pytest.mark.parametrize(("given", "words"), [
    ("END,TIME_LIMIT_90", "Unknown mail type TIME_LIMIT_90"), ("NONE,END", "NONE cannot be combined"),
    (["END"], "as text"),
])
def test_other_mail_types_are_refused_by_name(given, words):
    with pytest.raises(ValidationError) as refused:
        parse_mail_type(given)
    assert words in refused.value.message_dict["mail_type"][0]


@pytest.mark.django_db(transaction=True)
def test_the_api_and_a_batch_script_set_the_mail_types(api, users):
    answer = api("alice").post("/api/jobs/", job_payload(gpus_per_node=1, mail_type="end,fail"), format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["mail_type"] == "END,FAIL" and Job.objects.get(pk=answer.json()["id"]).mail_type == "END,FAIL"
    refused = api("alice").post("/api/jobs/", job_payload(mail_type="END,ARRAY_TASKS"), format="json")
    assert refused.status_code in (400, 422) and "mail_type" in str(refused.json())
    script = "#!/bin/bash\n#SBATCH --gres=gpu:a100:1 --mail-type=ALL\npython train.py\n"
    scripted = api("alice").post("/api/jobs/", {"project": "vision/detection", "task_type": "research",
                                                "image": "registry.local/x:1", "sbatch": script}, format="json")
    assert scripted.status_code == 201, scripted.content
    assert scripted.json()["mail_type"] == "BEGIN,END,FAIL,REQUEUE"
    bad_script = script.replace("ALL", "BOGUS")
    refused = api("alice").post("/api/jobs/", {"project": "vision/detection", "task_type": "research",
                                               "image": "registry.local/x:1", "sbatch": bad_script}, format="json")
    assert refused.status_code in (400, 422) and "#SBATCH --mail-type=BOGUS (line 2)" in str(refused.json())


@pytest.mark.django_db(transaction=True)
def test_the_form_offers_the_mail_types_and_keeps_what_was_typed(client, users):
    client.login(username="alice", password="demo")
    page = client.get("/jobs/new/").content.decode()
    assert 'name="mail_type"' in page
    refused = client.post("/jobs/new/", {**job_payload(gpus_per_node=1), "mail_type": "END,WHATEVER"})
    assert refused.status_code == 400  # the form again, saying what is wrong
    html = refused.content.decode()
    assert 'value="END,WHATEVER"' in html and "Unknown mail type WHATEVER" in html
