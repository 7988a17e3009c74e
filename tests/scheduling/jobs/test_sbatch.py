"""Batch scripts in: each ``#SBATCH`` directive the portal takes, each refusal with its line, the body as the
command, and the same script submitted to the simulated cluster stored with the fields it asked for."""

import re

import pytest
from django.core.exceptions import ValidationError

from scheduling.jobs import submission
from scheduling.jobs.sbatch import parse_sbatch
from scheduling.models import Job, JobStatus
from tests.scheduling.test_lifecycle import _run_until_done

MODELS, CLUSTERS = ["A100", "H100"], ["sim", "slurm-a"]


def fields_of(*lines: str) -> dict:
    return dict(parse_sbatch("\n".join(lines), MODELS, CLUSTERS).fields)


def refusals_of(*lines: str) -> list[str]:
    with pytest.raises(ValidationError) as refused:
        parse_sbatch("\n".join(lines), MODELS, CLUSTERS)
    return refused.value.message_dict["sbatch"]


@pytest.mark.parametrize(("directive", "expected"), [
    ("--job-name=train", {"name": "train"}),
    ("-J train", {"name": "train"}),
    ("-Jtrain", {"name": "train"}),
    ("--gres=gpu:h100:4", {"gpu_model": "H100", "gpus_per_node": 4}),
    ("--gres=gpu:2", {"gpus_per_node": 2}),
    ("--gres=gpu:A100", {"gpu_model": "A100", "gpus_per_node": 1}),
    ("--gpus-per-node=a100:8", {"gpu_model": "A100", "gpus_per_node": 8}),
    ("--gpus-per-node 3", {"gpus_per_node": 3}),
    ("--gpus=h100:4", {"gpu_model": "H100", "gpus_per_node": 4, "nodes": 1}),
    ("--gpus=16 --nodes=2", {"gpus_per_node": 8, "nodes": 2}),
    ("-G 16 -N 2", {"gpus_per_node": 8, "nodes": 2}),
    ("--nodes=3", {"nodes": 3}),
    ("--time=90", {"max_runtime_minutes": 90}),
    ("-t 10:30", {"max_runtime_minutes": 11}),  # MM:SS, rounded up
    ("--time=02:00:00", {"max_runtime_minutes": 120}),
    ("--time=1-02", {"max_runtime_minutes": 26 * 60}),
    ("--time=1-02:30", {"max_runtime_minutes": 26 * 60 + 30}),
    ("--time=0-00:00:01", {"max_runtime_minutes": 1}),
    ("-c 16", {"cpus_per_node": 16.0}),
    ("--mem=64G", {"memory_gb_per_node": 64.0}),
    ("--mem=512", {"memory_gb_per_node": 0.5}),  # no suffix: megabytes
    ("--mem=1T", {"memory_gb_per_node": 1024.0}),
    ("--mem=2097152K", {"memory_gb_per_node": 2.0}),
    ("--array=0-15%4", {"kind": "array", "array": "0-15", "array_parallelism": 4}),
    ("-a 1,3,5", {"kind": "array", "array": "1,3,5"}),
    ("--partition=slurm-a", {}),
    ("--time=10   # a comment after the options", {"max_runtime_minutes": 10}),
])
def test_each_directive_sets_its_submit_field(directive, expected):
    assert fields_of("#!/bin/bash", f"#SBATCH {directive}", "run.sh") == {**expected, "command": "#!/bin/bash\nrun.sh"}


def test_partition_names_the_cluster_and_the_body_keeps_the_shebang_and_what_follows_the_directives():
    script = parse_sbatch("#!/bin/bash\n#SBATCH -p slurm-a\n# a comment among directives\n#SBATCH -N 1\n\n"
                          "echo start\n#SBATCH --mem=1G\npython train.py\n", MODELS, CLUSTERS)
    assert script.cluster == "slurm-a"
    # a directive after the first command is a comment to sbatch, and part of the body here
    assert script.body == "#!/bin/bash\necho start\n#SBATCH --mem=1G\npython train.py"
    assert "memory_gb_per_node" not in script.fields
    assert script.sources["nodes"].line == 4 and script.sources["nodes"].written == "-N 1"


def test_a_script_without_directives_is_all_command():
    assert parse_sbatch("python a.py\npython b.py", MODELS, CLUSTERS).fields == {"command": "python a.py\npython b.py"}


@pytest.mark.parametrize(("line", "words"), [
    ("--gres=gpu:v100:2", ["line 2", "--gres=gpu:v100:2", "'v100'", "A100, H100"]),
    ("--gres=shard:2", ["line 2", "only GPUs"]),
    ("--nodes=2-4", ["line 2", "not the range 2-4"]),
    ("--gpus=3 --nodes=2", ["line 2", "3 GPUs do not divide evenly over 2 nodes"]),
    ("--time=UNLIMITED", ["line 2", "not a time limit"]),
    ("--time=0", ["line 2", "at least one minute"]),
    ("--mem=lots", ["line 2", "not a memory size"]),
    ("--array=a-b", ["line 2", "not an array"]),
    ("--partition=gpu", ["line 2", "no cluster of the portal is called 'gpu'", "sim, slurm-a"]),
    ("--cpus-per-task=0", ["line 2", "not a whole number of at least 1"]),
    ("--job-name", ["line 2", "needs a value"]),
    ("--gres=gpu:h100:4 --gpus-per-node=2", ["line 2", "disagrees with #SBATCH --gres=gpu:h100:4 (line 2)"]),
])
def test_each_refusal_names_its_directive_and_line(line, words):
    (message,) = refusals_of("#!/bin/bash", f"#SBATCH {line}", "run.sh")
    for word in words:
        assert word in message, (word, message)


def test_every_unknown_directive_is_named_at_once_with_its_line():
    messages = refusals_of("#SBATCH --exclusive", "#SBATCH -o out.log --qos=high", "#SBATCH -N 1", "run")
    assert messages[0].startswith("The portal does not take these directives: --exclusive (line 1), -o (line 2), "
                                  "--qos (line 2). It takes: --job-name, --gres")
    assert len(messages) == 1


@pytest.mark.django_db(transaction=True)
def test_directives_fill_the_fields_left_empty_and_a_field_set_both_ways_is_refused_naming_both(world):
    alice = world["users"]["alice"]
    base = {"project": "vision/detection", "task_type": "research", "image": "registry.local/x:1"}
    script = "#!/bin/bash\n#SBATCH --gres=gpu:a100:2 --time=30\npython train.py\n"
    request = submission.validate_job_request(alice, {**base, "sbatch": script})
    assert (request.gpu_model, request.gpus_per_node, request.max_runtime_minutes) == ("A100", 2, 30)
    assert request.command == "#!/bin/bash\npython train.py"
    with pytest.raises(ValidationError) as refused:
        submission.validate_job_request(alice, {**base, "sbatch": script, "gpus_per_node": "4"})
    message = refused.value.message_dict["gpus_per_node"][0]
    assert "'4'" in message and "#SBATCH --gres=gpu:a100:2 (line 2)" in message
    # a rule's refusal of a field the script set names the directive it came from
    with pytest.raises(ValidationError) as too_big:
        submission.validate_job_request(alice, {**base, "sbatch": "#SBATCH --gres=gpu:a100:64\nrun"})
    assert "(from #SBATCH --gres=gpu:a100:64 (line 1))" in too_big.value.message_dict["gpus_per_node"][0]


@pytest.mark.django_db(transaction=True)
def test_the_same_script_runs_on_the_simulated_cluster_with_the_fields_it_asked_for(world, settings):
    alice = world["users"]["alice"]
    script = ("#!/bin/bash\n#SBATCH --job-name=sbatch-sim\n#SBATCH --gres=gpu:a100:2 -t 0:45:00\n"
              "#SBATCH --cpus-per-task=6 --mem=48G\n#SBATCH --partition=sim\n"
              "# sim:outcome=succeeded sim:minutes=1\nsleep 1\n")
    job = submission.submit_job(alice, {"project": "vision/detection", "task_type": "research",
                                        "image": "registry.local/x:1", "sbatch": script})
    stored = Job.objects.get(pk=job.pk)
    assert (stored.name, stored.gpu_model, stored.gpus_per_node, stored.node_count) == ("sbatch-sim", "A100", 2, 1)
    assert (stored.max_runtime_minutes, stored.cpu_milli, stored.memory_mib) == (45, 6000, 48 * 1024)
    assert stored.command == "#!/bin/bash\n# sim:outcome=succeeded sim:minutes=1\nsleep 1"
    assert stored.asked_cluster.name == "sim"
    done = _run_until_done(stored, settings)
    assert done.status == JobStatus.SUCCEEDED and done.cluster.name == "sim"


@pytest.mark.django_db(transaction=True)
def test_the_form_takes_a_script_and_keeps_it_as_typed_when_refused(client, world):
    assert client.login(username="alice", password="demo")
    page = client.get("/jobs/new/").content.decode()
    assert "Batch script (#SBATCH)" in page and 'name="sbatch"' in page
    # the page's own presets (1 GPU, the model it offers) yield to the script; only what was typed can disagree
    offered = re.search(r'<option value="(\w+)" selected>', page[page.index('name="gpu_model"'):])[1]
    posted = {"project": "vision/detection", "task_type": "research", "gpu_model": offered, "gpus_per_node": "1",
              "nodes": "1", "kind": "batch", "topology": "any", "gpu_share": "1", "replicas": "1", "port": "8000",
              "image": "registry.local/x:1"}
    refused_script = "#!/bin/bash\n#SBATCH --gres=gpu:a100:2\n#SBATCH --exclusive\nrun\n"
    refused = client.post("/jobs/new/", {**posted, "sbatch": refused_script})
    html = refused.content.decode()
    assert refused.status_code == 400 and "--exclusive (line 3)" in html
    assert "#SBATCH --exclusive\nrun\n</textarea>" in html  # kept as typed
    done = client.post("/jobs/new/", {**posted, "sbatch": "#!/bin/bash\n#SBATCH --gres=gpu:a100:2\nrun\n"})
    assert done.status_code == 302, done.content.decode()[:2000]
    job = Job.objects.get()
    typed = client.post("/jobs/new/", {**posted, "gpus_per_node": "4", "sbatch": "#SBATCH --gres=gpu:a100:2\nrun"})
    assert typed.status_code == 400 and "#SBATCH --gres=gpu:a100:2 (line 1)" in typed.content.decode()
    assert (job.gpu_model, job.gpus_per_node, job.command) == ("A100", 2, "#!/bin/bash\nrun")
