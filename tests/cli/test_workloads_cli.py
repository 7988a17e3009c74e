"""The client's commands for templates, clones, arrays and services against the live test server."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps

from scheduling.models import Job, JobGroup, JobTemplate

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT = ("--project", "vision/detection")
SUBMIT = (*PROJECT, "--task-type", "research", "--gpu-model", "A100", "--image", "registry.local/pytorch:2.4")


@pytest.fixture
def builtins(world):
    import_module("scheduling.migrations.0010_builtin_templates").install(apps)


def test_templates_and_a_submission_from_one(cli, builtins):
    cli.login("alice")
    listed = cli("templates")
    assert listed.code == 0, listed.err
    assert "PyTorch, one GPU" in listed.out and "script=train.py epochs=10" in listed.out
    assert "checkpoint=?" in listed.out  # a parameter without a default must be given
    assert {t["name"] for t in cli("templates", "--json").json["results"]} >= {"DeepSpeed", "Jupyter notebook"}

    made = cli("submit", "--template", "PyTorch, one GPU", *PROJECT, "--param", "epochs=5", "--param",
               "script=ft.py", "--max-runtime-minutes", "30", "--json")
    assert made.code == 0, made.err
    job = Job.objects.get(pk=made.json["id"])
    assert job.command == "python ft.py --epochs 5" and job.max_runtime_minutes == 30
    assert job.template_version.template.name == "PyTorch, one GPU" and made.json["template_version"] == (
        job.template_version_id)

    wrong = cli("submit", "--template", "PyTorch, one GPU", *PROJECT, "--param", "epochs=lots")
    assert wrong.code == 1 and "parameters.epochs: Parameter epochs must be a whole number, not 'lots'." in wrong.err
    assert cli("submit", "--template", "No such", *PROJECT).code == 4
    assert cli("submit", *SUBMIT, "--param", "epochs=1").code == 2
    assert cli("submit", "--template", "DeepSpeed", *PROJECT, "--param", "epochs").code == 2
    by_id = cli("submit", "--template", JobTemplate.objects.get(name="Evaluation run").pk, *PROJECT,
                "--param", "checkpoint=/data/c.pt")
    assert by_id.code == 0 and "Submitted job" in by_id.out


def test_clone(cli):
    cli.login("alice")
    first = cli("submit", *SUBMIT, "--gpus-per-node", "2", "--name", "twice", "--json").json
    cloned = cli("clone", first["id"])
    assert cloned.code == 0, cloned.err
    assert cloned.out.startswith(f"Cloned job {first['id']} as job ")
    jobs = Job.objects.filter(name="twice").order_by("pk")
    assert jobs.count() == 2 and jobs[1].gpus_per_node == 2
    cli.login("bob")
    hidden = cli("clone", first["id"], user="bob")
    assert hidden.code == 4 and f"Job {first['id']} was not found" in hidden.err


def test_array_and_service_from_the_command_line(cli):
    cli.login("alice")
    array = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--kind", "array", "--array", "0-99:25",
                "--array-parallelism", "2", "--name", "sweep")
    assert array.code == 0, array.err
    group = JobGroup.objects.get(name="sweep")
    assert f"Array {group.pk}: `gpuportal array show {group.pk}`." in array.out
    assert (group.indices, group.parallelism) == ([0, 25, 50, 75], 2)
    shown = cli("array", "show", group.pk, "--json")
    assert shown.code == 0, shown.err
    assert sorted(t["index"] for t in shown.json["tasks"]) == [0, 25, 50, 75]
    assert "INDEX" in cli("array", "show", group.pk).out
    bad = cli("submit", *SUBMIT, "--gpus-per-node", "1", "--kind", "array", "--array", "9-1")
    assert bad.code == 1 and "array: Array indices look like 0-99" in bad.err
    cancelled = cli("array", "cancel", group.pk)
    assert cancelled.code == 0, cancelled.err
    assert set(group.members.values_list("status", flat=True)) == {"cancelled"}

    service = cli("submit", *SUBMIT, "--task-type", "inference", "--gpus-per-node", "1", "--kind", "service",
                  "--replicas", "2", "--port", "9000", "--name", "serve", "--json")
    assert service.code == 0, service.err
    service_id = service.json["group"]
    assert JobGroup.objects.get(pk=service_id).port == 9000
    assert cli("service", "show", service_id, "--json").json["replicas"] == 2
    scaled = cli("service", "scale", service_id, "3", "--json")
    assert scaled.code == 0, scaled.err
    assert scaled.json["replicas"] == 3
    assert cli("service", "scale", service_id, "0").code == 2  # argparse: at least 1
    assert cli("service", "show", 999999).code == 4
