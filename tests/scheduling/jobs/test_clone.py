"""Clone and resubmit: a job's request as submit fields, the clone by the API and by the page, and
what is refused (a job one cannot see, a role that may not submit, a request that no longer passes)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from scheduling.jobs import cloning, submission
from scheduling.models import Job, JobGroup
from tenants.models import Quota
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)

#: The columns a clone must repeat.
SAME = ("tenant_id", "project_id", "name", "task_type_id", "gpu_model", "gpus_per_node", "node_count", "image",
        "command", "max_runtime_minutes", "topology", "gpu_milli", "cpu_milli", "memory_mib", "kind",
        "requeue_on_preemption", "template_version_id")


def same_request(first: Job, second: Job) -> None:
    assert {f: getattr(second, f) for f in SAME} == {f: getattr(first, f) for f in SAME}


def test_request_of_a_job_is_its_submit_fields(users):
    job = submission.submit_job(users["alice"], job_payload(
        name="tuned", gpus_per_node=1, gpu_share=0.5, cpus_per_node=6, memory_gb_per_node=48.5,
        topology="same_node", requeue_on_preemption=False))
    assert cloning.request_of(job) == {
        "kind": "batch", "project": "vision/detection", "name": "tuned", "task_type": "research", "gpu_model": "A100",
        "gpus_per_node": 1, "nodes": 1, "image": "registry.local/pytorch:2.4", "command": "python train.py",
        "max_runtime_minutes": 120, "topology": "same_node", "gpu_share": 0.5, "cpus_per_node": 6,
        "memory_gb_per_node": 48.5, "requeue_on_preemption": False}
    plain = submission.submit_job(users["alice"], job_payload())  # CPUs and memory follow the task type
    assert "cpus_per_node" not in cloning.request_of(plain) and "memory_gb_per_node" not in cloning.request_of(plain)


def test_api_clone_submits_the_same_request_again(users, api):
    first = submission.submit_job(users["alice"], job_payload(name="again", gpus_per_node=2, cpus_per_node=12))
    answer = api("alice").post(f"/api/jobs/{first.pk}/clone/")
    assert answer.status_code == 201, answer.content
    clone = Job.objects.get(pk=answer.json()["id"])
    assert clone.pk != first.pk and clone.owner == users["alice"] and answer.json()["name"] == "again"
    same_request(first, clone)
    # carol (same tenant) may clone alice's job: she sees it and submits in vision; the clone is hers
    by_carol = api("carol").post(f"/api/jobs/{first.pk}/clone/")
    assert by_carol.status_code == 201 and by_carol.json()["owner"] == "carol"

    assert api("bob").post(f"/api/jobs/{first.pk}/clone/").status_code == 404  # another tenant's job
    assert api("alice").post("/api/jobs/999999/clone/").status_code == 404
    manager = api("dave").post(f"/api/jobs/{first.pk}/clone/")  # sees every job, submits nowhere
    assert manager.status_code == 403 and "may not submit" in manager.json()["detail"]

    Quota.objects.filter(tenant__name="vision", gpu_model="A100").update(limit_gpus=0, guaranteed_gpus=0)
    refused = api("alice").post(f"/api/jobs/{first.pk}/clone/")
    assert refused.status_code == 422
    assert refused.json()["gpu_model"][0].startswith("Tenant vision has no quota for A100 GPUs")
    assert Job.objects.filter(name="again").count() == 3


def test_clone_of_an_array_task_clones_the_whole_array(users, api):
    task = submission.submit_job(users["alice"], job_payload(kind="array", array="0-6:2", array_parallelism=2,
                                                             gpus_per_node=1, name="sweep"))
    assert cloning.request_of(task)["array"] == "0-6:2"
    answer = api("alice").post(f"/api/jobs/{task.pk}/clone/")
    assert answer.status_code == 201, answer.content
    clone = Job.objects.get(pk=answer.json()["id"])
    assert clone.group_id not in (None, task.group_id)
    group = JobGroup.objects.get(pk=clone.group_id)
    assert (group.kind, group.indices, group.parallelism, group.size) == ("array", [0, 2, 4, 6], 2, 4)
    assert sorted(group.members.values_list("group_index", flat=True)) == [0, 2, 4, 6]


def _value(html: str, name: str) -> str:
    tag = re.search(rf'<(input|textarea|select)[^>]*name="{name}"[^>]*>(.*?)</(textarea|select)>|'
                    rf'<input[^>]*name="{name}"[^>]*>', html, re.S)
    assert tag, name
    text = tag.group(0)
    if text.startswith("<textarea"):
        return text.split(">", 1)[1].rsplit("</textarea>", 1)[0].strip()
    if text.startswith("<select"):
        selected = re.search(r'<option value="([^"]*)" selected>', text)
        return selected.group(1) if selected else ""
    value = re.search(r'value="([^"]*)"', text)
    return value.group(1) if value else ""


def test_clone_page_prefills_the_form_and_submits(users):
    first = submission.submit_job(users["alice"], job_payload(name="by-page", gpus_per_node=2, command="sim:minutes=5",
                                                              topology="same_rack"))
    client = Client()
    client.force_login(users["alice"])
    detail = client.get(f"/jobs/{first.pk}/").content.decode()
    assert f'href="/jobs/new/?clone={first.pk}"' in detail

    page = client.get(f"/jobs/new/?clone={first.pk}")
    html = page.content.decode()
    assert page.status_code == 200 and f"A copy of job #{first.pk}" in html
    prefilled = {name: _value(html, name) for name in ("project", "name", "task_type", "gpu_model", "gpus_per_node",
                                                       "nodes", "topology", "image", "command", "kind",
                                                       "max_runtime_minutes")}
    assert prefilled == {"project": "vision/detection", "name": "by-page", "task_type": "research",
                         "gpu_model": "A100", "gpus_per_node": "2", "nodes": "1", "topology": "same_rack",
                         "image": "registry.local/pytorch:2.4", "command": "sim:minutes=5", "kind": "batch",
                         "max_runtime_minutes": "120"}
    done = client.post("/jobs/new/", prefilled | {"gpu_share": "1"})
    assert done.status_code == 302
    clone = Job.objects.exclude(pk=first.pk).get(name="by-page")
    same_request(first, clone)

    other = Client()
    other.force_login(users["bob"])
    hidden = other.get(f"/jobs/new/?clone={first.pk}").content.decode()
    assert f"Job {first.pk} is not among those you may see" in hidden and "by-page" not in hidden
