"""Named ports at submission: the rule (names as Kubernetes port names, numbers in range and not the portal's, no
duplicates, a bounded count), the same refusals from the API, the form and a template, and the field carried by
the job's JSON, a clone and a template's defaults."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from scheduling.executors.kubernetes.manifests import MASTER_PORT, NOTEBOOK_PORT
from scheduling.jobs import cloning, submission
from scheduling.jobs.limits import MAX_PORT_NAME, MAX_PORTS
from scheduling.jobs.ports import RESERVED_NAMES, parse_ports
from scheduling.models import Job
from scheduling.templates import services as job_templates
from tests.conftest import job_payload
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def _refusal(raw, kind="batch") -> str:
    with pytest.raises(ValidationError) as refused:
        parse_ports(raw, kind)
    assert list(refused.value.message_dict) == ["ports"]
    return refused.value.message_dict["ports"][0]


def test_ports_are_parsed_from_a_list_or_from_text():
    wanted = [{"name": "tensorboard", "port": 6006}, {"name": "ui", "port": 8080}]
    assert parse_ports(["tensorboard:6006", "ui:8080"]) == wanted
    assert parse_ports("tensorboard:6006, ui:8080") == wanted
    assert parse_ports("tensorboard:6006 ui:8080") == wanted
    assert parse_ports(" ") == parse_ports(None) == parse_ports([]) == []
    assert parse_ports(["a1:1", "web-ui:65535"], "notebook") == [{"name": "a1", "port": 1},
                                                                 {"name": "web-ui", "port": 65535}]


@pytest.mark.parametrize(("raw", "words"), [
    ("TensorBoard:6006", "lowercase"),
    ("-ui:8080", "begins and ends"),
    ("ui-:8080", "begins and ends"),
    ("web--ui:8080", "single hyphens"),
    ("6006:6006", "at least one letter"),
    ("a" * (MAX_PORT_NAME + 1) + ":80", f"at most {MAX_PORT_NAME}"),
    ("tensorboard", "name:port"),
    ("ui:0", "from 1 to 65535"),
    ("ui:65536", "from 1 to 65535"),
    ("ui:80a", "from 1 to 65535"),
    ("ui:-1", "from 1 to 65535"),
    (f"ui:{NOTEBOOK_PORT}", "the notebook server"),
    (f"ui:{MASTER_PORT}", "rendezvous"),
    ("ui:80,ui:81", "ui is given twice"),
    ("ui:80,web:80", "Port 80 is given twice"),
    ([6006], "name:port"),
    ({"tensorboard": 6006}, "a list of name:port"),
])
def test_each_bad_port_is_refused_naming_the_limit(raw, words):
    assert words in _refusal(raw)


def test_reserved_names_count_and_kind_are_refused():
    for name in RESERVED_NAMES:
        assert "the portal's own" in _refusal(f"{name}:9000")
    too_many = [f"p{i}:{9000 + i}" for i in range(MAX_PORTS + 1)]
    assert f"at most {MAX_PORTS} ports; {MAX_PORTS + 1} were given" in _refusal(too_many)
    assert len(parse_ports(too_many[:MAX_PORTS])) == MAX_PORTS
    assert "A service serves its own port" in _refusal("ui:8080", "service")


def test_the_api_takes_a_list_and_returns_each_port(users, api):
    created = api("alice").post("/api/jobs/", job_payload(ports=["tensorboard:6006", "ui:8080"]), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["ports"] == [{"name": "tensorboard", "port": 6006, "url": None},
                                       {"name": "ui", "port": 8080, "url": None}]  # not running yet
    job = Job.objects.get(pk=created.json()["id"])
    assert job.ports == [{"name": "tensorboard", "port": 6006}, {"name": "ui", "port": 8080}]
    plain = api("alice").post("/api/jobs/", job_payload(), format="json")
    assert plain.status_code == 201 and plain.json()["ports"] == []


def test_the_api_refuses_bad_ports_naming_the_field(users, api):
    client = api("alice")
    as_text = client.post("/api/jobs/", job_payload(ports="tensorboard:6006"), format="json")
    assert as_text.status_code == 400 and "ports" in as_text.json(), as_text.content
    too_many = client.post("/api/jobs/", job_payload(ports=[f"p{i}:{9000 + i}" for i in range(MAX_PORTS + 1)]),
                           format="json")
    assert too_many.status_code == 400 and f"At most {MAX_PORTS} entries" in str(too_many.json()["ports"])
    bad = client.post("/api/jobs/", job_payload(ports=[f"ui:{NOTEBOOK_PORT}", "x:1"]), format="json")
    assert bad.status_code == 422, bad.content
    assert "the notebook server" in str(bad.json()["ports"])
    assert Job.objects.count() == 0
    schema = client.get("/api/schema/", {"format": "json"}).json()
    ports = schema["components"]["schemas"]["JobSubmitRequest"]["properties"]["ports"]
    assert ports["type"] == "array" and ports["maxItems"] == MAX_PORTS


def test_the_form_keeps_what_was_typed_and_says_what_is_wrong(users):
    client = Client()
    assert client.login(username="alice", password=PASSWORD)
    form = {**job_payload(project="vision/detection"), "kind": "batch", "topology": "any", "gpu_share": "1",
            "ports": "tensorboard:6006, Web:8080"}
    del form["tenant"]
    refused = client.post("/jobs/new/", form)
    assert refused.status_code == 400 and Job.objects.count() == 0
    page = refused.content.decode()
    assert 'value="tensorboard:6006, Web:8080"' in page and "lowercase letters" in page
    accepted = client.post("/jobs/new/", {**form, "ports": "tensorboard:6006, web:8080"})
    assert accepted.status_code == 302, accepted.content.decode()[:2000]
    assert Job.objects.get().ports == [{"name": "tensorboard", "port": 6006}, {"name": "web", "port": 8080}]


def test_a_clone_and_a_template_carry_the_ports(users, api):
    job = submission.submit_job(users["alice"], job_payload(ports=["tensorboard:6006"]))
    assert cloning.request_of(job)["ports"] == ["tensorboard:6006"]
    clone = cloning.clone_job(users["alice"], job)
    assert clone.ports == job.ports == [{"name": "tensorboard", "port": 6006}]
    form = Client()
    assert form.login(username="alice", password=PASSWORD)
    assert 'value="tensorboard:6006"' in form.get(f"/jobs/new/?clone={job.pk}").content.decode()

    array = submission.submit_job(users["alice"], job_payload(kind="array", array="0-1", gpus_per_node=1,
                                                              ports="ui:8080"))
    assert [m.ports for m in array.group.members.all()] == [[{"name": "ui", "port": 8080}]] * 2  # every task
    assert cloning.request_of(array)["ports"] == "ui:8080"  # the array's request as it was submitted

    assert job_templates.check_defaults({"ports": ["tensorboard:6006"]}) == []
    assert job_templates.check_defaults({"ports": "tensorboard:6006"}) == []
    assert "list of text entries" in job_templates.check_defaults({"ports": [6006]})[0]
    template = job_templates.create_template(
        users["admin"], tenant=None, name="tb", kind="batch", parameters=[],
        defaults={"task_type": "research", "gpu_model": "A100", "gpus_per_node": 1, "image": "registry.local/tb:1",
                  "command": "tensorboard --logdir runs", "ports": ["tensorboard:6006"]})
    answer = api("alice").post(f"/api/templates/{template.pk}/submit/", {"project": "vision/detection"}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["ports"] == [{"name": "tensorboard", "port": 6006, "url": None}]
    overridden = api("alice").post(f"/api/templates/{template.pk}/submit/",
                                   {"project": "vision/detection", "ports": ["ui:8080"]}, format="json")
    assert [p["name"] for p in overridden.json()["ports"]] == ["ui"]
