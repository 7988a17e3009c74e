"""``gpuportal submit --sbatch job.sh``: the script goes to the portal as it is, other flags still apply, and
the portal's refusal of a directive comes back naming it."""

import pytest

from scheduling.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_submit_sends_the_script_with_the_other_flags(cli, tmp_path):
    cli.login("alice")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=cli-script --gres=gpu:a100:2 -t 15\nsrun python t.py\n")
    submitted = cli("submit", "--sbatch", script, "--project", "vision/detection", "--task-type", "research",
                    "--image", "registry.local/x:1", "--json")
    assert submitted.code == 0, submitted.err
    job = Job.objects.get(pk=submitted.json["id"])
    assert (job.name, job.gpu_model, job.gpus_per_node, job.max_runtime_minutes) == ("cli-script", "A100", 2, 15)
    assert job.command == "#!/bin/bash\nsrun python t.py"
    script.write_text("#SBATCH --gres=gpu:a100:1\n#SBATCH --mail-user=me@example.org\nrun\n")
    refused = cli("submit", "--sbatch", script, "--project", "vision/detection", "--task-type", "research",
                  "--image", "registry.local/x:1")
    assert refused.code == 1 and "--mail-user (line 2)" in refused.err
    missing = cli("submit", "--sbatch", tmp_path / "nope.sh")
    assert missing.code == 2 and "Cannot read the batch script" in missing.err
