"""Job templates: the built-in ones, tenant templates and who manages them, immutable versions and
their audit records, the API, and a submission from a template by the API and by the page."""

from __future__ import annotations

import re
from importlib import import_module

import pytest
from django.apps import apps
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from audit.models import AuditAction, AuditRecord
from scheduling.models import Job, JobTemplate, JobTemplateVersion, WorkloadKind
from scheduling.templates import services as job_templates
from tenants.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)

BUILTIN = import_module("scheduling.migrations.0010_builtin_templates")
EPOCHS = [{"name": "epochs", "type": "int", "default": 10, "min": 1, "label": "Epochs"},
          {"name": "precision", "type": "choice", "default": "bf16", "choices": ["bf16", "fp32"]}]
DEFAULTS = {"task_type": "research", "gpu_model": "A100", "gpus_per_node": 1, "image": "registry.local/pytorch:2.4",
            "command": "python train.py --epochs {epochs} --precision {precision}"}


@pytest.fixture
def builtins(world):
    """The built-in templates as the data migration makes them (a transactional test empties the tables)."""
    BUILTIN.install(apps)
    return {t.name: t for t in JobTemplate.objects.filter(builtin=True)}


def nlp_template(users, name="nlp-train", **overrides):
    fields = {"tenant": Tenant.objects.get(name="nlp"), "name": name, "kind": WorkloadKind.BATCH,
              "description": "NLP training", "parameters": EPOCHS, "defaults": DEFAULTS, "note": "first"}
    return job_templates.create_template(users["frank"], **(fields | overrides))


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_builtin_templates_are_offered_to_everyone_with_typed_parameters(builtins, api):
    assert set(builtins) == {t["name"] for t in BUILTIN.BUILTIN_TEMPLATES}
    answer = api("alice").get("/api/templates/")
    assert answer.status_code == 200
    by_name = {t["name"]: t for t in answer.json()["results"]}
    assert set(by_name) == set(builtins)
    for template in by_name.values():
        assert template["version"] == 1 and template["builtin"] and template["tenant"] is None
        assert template["parameters"] and all(p["type"] in job_templates.PARAMETER_TYPES
                                              for p in template["parameters"])
        assert not job_templates.check_parameters(template["parameters"])
        assert not job_templates.check_defaults(template["defaults"])
    assert by_name["Jupyter notebook"]["kind"] == "notebook"
    vllm = by_name["vLLM inference service"]
    assert vllm["kind"] == "service" and vllm["defaults"]["port"] == 8000
    assert {p["name"]: p["default"] for p in vllm["parameters"]}["replicas"] == 1
    ddp = by_name["PyTorch DDP, several nodes"]
    assert "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT" in ddp["defaults"]["command"]
    assert "--nnodes=$NNODES" in ddp["defaults"]["command"]
    one = api("alice").get(f"/api/templates/{vllm['id']}/")
    assert one.status_code == 200 and one.json()["version_id"] == vllm["version_id"]
    assert [t["name"] for t in api("alice").get("/api/templates/", {"name": "DeepSpeed"}).json()["results"]] == [
        "DeepSpeed"]


def test_tenant_templates_are_seen_by_their_tenant_and_managed_by_its_admins(users, api):
    template = nlp_template(users)
    assert template.tenant.name == "nlp" and template.versions.get().version == 1
    assert "nlp-train" in [t["name"] for t in api("bob").get("/api/templates/").json()["results"]]
    assert "nlp-train" not in [t["name"] for t in api("alice").get("/api/templates/").json()["results"]]
    assert api("alice").get(f"/api/templates/{template.pk}/").status_code == 404

    with pytest.raises(PermissionDenied):  # a researcher of the tenant
        job_templates.create_template(users["bob"], tenant=template.tenant, name="bobs", kind="batch")
    with pytest.raises(PermissionDenied):  # a tenant admin, for the platform
        job_templates.create_template(users["frank"], tenant=None, name="everyone", kind="batch")
    with pytest.raises(PermissionDenied):
        job_templates.add_version(users["alice"], template, parameters=[], defaults={})
    platform = job_templates.create_template(users["admin"], tenant=None, name="everyone", kind="batch")
    assert "everyone" in [t["name"] for t in api("alice").get("/api/templates/").json()["results"]]

    created = AuditRecord.objects.filter(action=AuditAction.TEMPLATE_CREATE).order_by("seq")
    assert [(r.object_id, r.actor, r.tenant) for r in created] == [
        (str(template.pk), users["frank"], template.tenant), (str(platform.pk), users["admin"], None)]
    assert created[0].after["parameters"] == EPOCHS and created[0].after["defaults"] == DEFAULTS


def test_a_change_is_a_new_version_and_every_change_is_audited(users, api):
    template = nlp_template(users)
    first = template.versions.get()
    changed = [{**EPOCHS[0], "default": 20}, EPOCHS[1]]
    second = job_templates.add_version(users["frank"], template, parameters=changed, defaults=DEFAULTS,
                                       note="more epochs")
    assert second.version == 2
    first.refresh_from_db()
    assert first.parameters == EPOCHS  # version 1 is untouched
    listed = api("bob").get(f"/api/templates/{template.pk}/").json()
    assert listed["version"] == 2 and listed["version_id"] == second.pk and listed["note"] == "more epochs"
    record = AuditRecord.objects.get(action=AuditAction.TEMPLATE_VERSION)
    assert record.before["version"] == 1 and record.after["version"] == 2 and record.reason == "more epochs"
    assert record.after["parameters"][0]["default"] == 20 and record.tenant == template.tenant

    job_templates.archive_template(users["frank"], template, "replaced")
    assert AuditRecord.objects.get(action=AuditAction.TEMPLATE_ARCHIVE).reason == "replaced"
    assert "nlp-train" not in [t["name"] for t in api("bob").get("/api/templates/").json()["results"]]
    with pytest.raises(ValidationError) as refused:
        job_templates.add_version(users["frank"], template, parameters=[], defaults={})
    assert "archived" in refused.value.message_dict["template"][0]


def test_bad_declarations_are_refused_naming_what_is_wrong(users):
    with pytest.raises(ValidationError) as refused:
        nlp_template(users, parameters=[{"name": "epochs", "type": "integer", "default": 1},
                                        {"name": "lr", "type": "float", "default": "fast"},
                                        {"name": "mode", "type": "choice"}],
                     defaults={"gpu_modle": "A100", "nodes": [1]})
    errors = refused.value.message_dict
    assert "Parameter epochs: type 'integer' must be one of int, float, text, choice, bool." in errors["parameters"]
    assert any("Parameter lr: its default is wrong" in e and "'fast'" in e for e in errors["parameters"])
    assert any("Parameter mode: a choice needs" in e for e in errors["parameters"])
    assert any("'gpu_modle' is not a submit field" in e for e in errors["defaults"])
    assert "Defaults: nodes must be text, a number or true/false." in errors["defaults"]
    nlp_template(users)
    with pytest.raises(ValidationError) as twice:
        nlp_template(users)
    assert twice.value.message_dict["name"] == ["nlp already has a template named 'nlp-train'."]
    assert not JobTemplate.objects.filter(name="nlp-train").exclude(versions__version=1).exists()


def test_api_submission_from_a_template_records_its_version(builtins, api, users):
    one_gpu = builtins["PyTorch, one GPU"]
    version = one_gpu.versions.get()
    answer = api("alice").post(f"/api/templates/{one_gpu.pk}/submit/", {
        "project": "vision/detection", "parameters": {"epochs": "3", "script": "finetune.py"}})
    assert answer.status_code == 201, answer.content
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.template_version == version and answer.json()["template_version"] == version.pk
    assert job.command == "python finetune.py --epochs 3" and job.gpu_model == "A100" and job.gpus_per_node == 1
    assert job.task_type.code == "research" and job.max_runtime_minutes == 240

    overridden = api("alice").post(f"/api/templates/{one_gpu.pk}/submit/", {
        "project": "vision/detection", "parameters": {"gpu_model": "L40S"}, "max_runtime_minutes": 60})
    assert overridden.status_code == 201, overridden.content
    assert (overridden.json()["gpu_model"], overridden.json()["max_runtime_minutes"]) == ("L40S", 60)

    bad = api("alice").post(f"/api/templates/{one_gpu.pk}/submit/", {
        "project": "vision/detection", "parameters": {"epochs": "many", "seed": "1"}})
    assert bad.status_code == 422
    assert bad.json()["parameters.epochs"] == ["Parameter epochs must be a whole number, not 'many'."]
    assert bad.json()["parameters.seed"][0].startswith("Unknown parameter 'seed'; this template has: script")
    below = api("alice").post(f"/api/templates/{one_gpu.pk}/submit/", {
        "project": "vision/detection", "parameters": {"epochs": "0"}})
    assert below.json() == {"parameters.epochs": ["Parameter epochs must be at least 1 (got 0)."]}
    evaluation = builtins["Evaluation run"]
    missing = api("alice").post(f"/api/templates/{evaluation.pk}/submit/", {"project": "vision/detection"})
    assert missing.json() == {"parameters.checkpoint": ["Parameter checkpoint is required."]}

    service = builtins["vLLM inference service"]
    served = api("bob").post(f"/api/templates/{service.pk}/submit/", {
        "project": "nlp/chat-eval", "parameters": {"replicas": "2", "model": "org/m"}})
    assert served.status_code == 201, served.content
    replicas = Job.objects.filter(group_id=served.json()["group"]).order_by("group_index")
    assert [j.kind for j in replicas] == ["service", "service"] and replicas[0].group.port == 8000
    assert "vllm serve org/m" in replicas[0].command and replicas[1].template_version.template == service

    direct = api("alice").post("/api/jobs/", {"project": "vision/detection", "task_type": "research",
                                              "gpu_model": "A100", "gpus_per_node": 1, "image": "x/y:1",
                                              "template_version": version.pk})
    assert direct.status_code == 201 and Job.objects.get(pk=direct.json()["id"]).template_version == version
    nlp_only = nlp_template(users)
    theirs = api("alice").post("/api/jobs/", {"project": "vision/detection", "task_type": "research",
                                              "gpu_model": "A100", "gpus_per_node": 1, "image": "x/y:1",
                                              "template_version": nlp_only.versions.get().pk})
    assert theirs.status_code == 422 and "template_version" in theirs.json()
    assert api("alice").post(f"/api/templates/{nlp_only.pk}/submit/", {}).status_code == 404


def _field(html: str, name: str) -> str:
    """The tag of form field ``name`` (input, select or textarea)."""
    match = re.search(rf'<(input|select|textarea)[^>]*name="{name}"[^>]*>(.*?</select>)?', html, re.S)
    assert match, name
    return match.group(0)


def test_submit_page_starts_from_a_template_and_submits_it(builtins, users):
    service = builtins["vLLM inference service"]
    version = service.versions.get()
    client = browser(users["bob"])
    page = client.get(f"/jobs/new/?template={version.pk}")
    html = page.content.decode()
    assert page.status_code == 200 and "Started from template <strong>vLLM inference service</strong>" in html
    assert f'value="{version.pk}"' in _field(html, "template_version")
    assert '<option value="service" selected>' in _field(html, "kind")
    assert 'value="8000"' in _field(html, "port") and 'data-kinds="service"' in _field(html, "port")
    assert 'value="meta-llama/Llama-3.1-8B-Instruct"' in _field(html, "param_model")
    assert 'value="1"' in _field(html, "replicas")  # a parameter named like a submit field prefills it
    assert "js/fields_by_kind.js" in html

    form = {"use_template": version.pk, "template_version": version.pk, "kind": "service",
            "project": "nlp/chat-eval", "task_type": "inference", "gpu_model": "A100", "gpus_per_node": "1",
            "nodes": "1", "topology": "any", "gpu_share": "1", "image": version.defaults["image"],
            "command": version.defaults["command"], "replicas": "2", "port": "8000",
            "param_model": "org/small", "param_max_model_len": "lots"}
    refused = client.post("/jobs/new/", form)
    text = refused.content.decode()
    assert refused.status_code == 400
    assert "Parameter max_model_len must be a whole number, not &#x27;lots&#x27;." in text
    assert 'value="lots"' in _field(text, "param_max_model_len")  # kept as typed

    done = client.post("/jobs/new/", form | {"param_max_model_len": "4096"})
    assert done.status_code == 302, done.content.decode()[:2000]
    job = Job.objects.get(pk=int(done["Location"].rstrip("/").split("/")[-1]))
    assert job.template_version == version and job.kind == "service" and job.group.size == 2
    assert "vllm serve org/small" in job.command and "--max-model-len 4096" in job.command


def test_templates_pages_list_create_version_and_archive(builtins, users):
    listing = browser(users["alice"]).get("/templates/").content.decode()
    one_gpu = builtins["PyTorch, one GPU"]
    assert "PyTorch, one GPU" in listing and f"/jobs/new/?template={one_gpu.versions.get().pk}" in listing
    assert "New template" not in listing and "New version" not in listing
    assert browser(users["alice"]).get("/templates/new/").status_code == 403

    frank = browser(users["frank"])
    form = frank.get("/templates/new/").content.decode()
    assert 'value="nlp"' in form and "__platform__" not in form  # tenant admins: their tenant only
    bad = frank.post("/templates/new/", {"tenant": "nlp", "name": "eval-nlp", "kind": "batch",
                                         "parameters": '[{"name": "epochs", "type": "int",}]', "defaults": "{}"})
    text = bad.content.decode()
    assert bad.status_code == 400 and "Not valid JSON: Expecting property name enclosed in double quotes" in text
    assert "[{&quot;name&quot;: &quot;epochs&quot;, &quot;type&quot;: &quot;int&quot;,}]" in text  # as typed
    bad = frank.post("/templates/new/", {"tenant": "vision", "name": "x", "kind": "batch"})
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()

    made = frank.post("/templates/new/", {"tenant": "nlp", "name": "eval-nlp", "kind": "batch",
                                          "parameters": '[{"name": "epochs", "type": "int", "default": 1}]',
                                          "defaults": '{"command": "run --epochs {epochs}"}', "note": "v1"})
    assert made.status_code == 302
    template = JobTemplate.objects.get(name="eval-nlp")
    assert template.tenant.name == "nlp" and template.versions.get().parameters[0]["name"] == "epochs"
    again = frank.get(f"/templates/{template.pk}/versions/new/").content.decode()
    assert "Prefilled with version 1" in again and "run --epochs {epochs}" in again
    frank.post(f"/templates/{template.pk}/versions/new/", {
        "parameters": '[{"name": "epochs", "type": "int", "default": 5}]', "defaults": "{}", "note": "five"})
    assert list(template.versions.order_by("version").values_list("version", "note")) == [(1, "v1"), (2, "five")]
    assert browser(users["alice"]).get(f"/templates/{template.pk}/").status_code == 404
    assert browser(users["bob"]).post(f"/templates/{template.pk}/archive/").status_code == 403
    frank.post(f"/templates/{template.pk}/archive/", {"reason": "done"})
    template.refresh_from_db()
    assert template.archived
    assert [r.action for r in AuditRecord.objects.filter(object_id=str(template.pk)).order_by("seq")] == [
        AuditAction.TEMPLATE_CREATE, AuditAction.TEMPLATE_VERSION, AuditAction.TEMPLATE_ARCHIVE]
    assert JobTemplateVersion.objects.filter(template=template).count() == 2
