"""``POST /api/jobs/`` with a batch script: its directives fill what the body leaves out (a default counts as
left out), and what the script gets wrong is a 400 naming the directive and its line."""

import pytest

from scheduling.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"project": "vision/detection", "task_type": "research", "image": "registry.local/x:1"}


def test_a_script_sets_the_model_and_size_the_body_leaves_out(api):
    script = "#!/bin/bash\n#SBATCH --gres=gpu:a100:4 --nodes=1 --time=2:00:00\n#SBATCH -J from-script\npython t.py\n"
    response = api("alice").post("/api/jobs/", {**BODY, "sbatch": script}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["gpu_model"], body["gpus_per_node"], body["nodes"]) == ("A100", 4, 1)
    assert (body["name"], body["max_runtime_minutes"]) == ("from-script", 120)
    assert body["command"] == "#!/bin/bash\npython t.py"


def test_an_unknown_directive_and_a_field_set_both_ways_are_400s_naming_them(api):
    unknown = api("alice").post("/api/jobs/", {**BODY, "gpu_model": "A100", "sbatch": (
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --exclusive --qos=high\nrun\n")}, format="json")
    assert unknown.status_code == 400
    assert "--exclusive (line 3), --qos (line 3)" in unknown.content.decode()
    both = api("alice").post("/api/jobs/", {**BODY, "gpu_model": "H100", "sbatch": "#SBATCH --gres=gpu:a100:2\nrun"},
                             format="json")
    assert both.status_code == 400
    message = both.content.decode()
    assert "gpu_model" in message and "'H100'" in message and "#SBATCH --gres=gpu:a100:2 (line 1)" in message
    dependency = api("alice").post("/api/jobs/", {**BODY, "sbatch": "#SBATCH --gres=gpu:a100:1\n#SBATCH -d after:7\n"},
                                   format="json")
    assert dependency.status_code == 422 and list(dependency.json()) == ["depends_on"]  # read as the field, then
    assert "#SBATCH -d after:7 (line 2)" in dependency.json()["depends_on"][0]  # refused naming its line
    assert Job.objects.count() == 0


def test_the_schema_documents_the_script_field(api):
    schema = api("alice").get("/api/schema/?format=json").json()
    field = schema["components"]["schemas"]["JobSubmitRequest"]["properties"]["sbatch"]
    assert field["oneOf"][0]["maxLength"] == 64 * 1024 and "#SBATCH" in field["description"]
