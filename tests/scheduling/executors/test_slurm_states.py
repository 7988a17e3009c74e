"""What Slurm's states, pending reasons and batch scripts mean for portal jobs, without Slurm."""

import base64
import hashlib
import hmac
import json

import pytest

from scheduling.executors.slurm import states, tokens
from scheduling.executors.slurm.script import ScriptError, batch_script, comment_for, portal_job_of


@pytest.mark.parametrize(("state", "outcome", "category"), [
    ("COMPLETED", "succeeded", ""), ("FAILED", "failed", "exit_code"), ("TIMEOUT", "failed", "timeout"),
    ("NODE_FAIL", "failed", "node_fault"), ("OUT_OF_MEMORY", "failed", "out_of_memory"),
    ("PREEMPTED", "requeue", "preempted"), ("CANCELLED", "cancelled", ""), ("RUNNING", "", ""),
])
def test_each_final_state_has_its_meaning(state, outcome, category):
    meaning = states.ending(state, None, None, ("n1",))
    assert (meaning.outcome, meaning.category) == (outcome, category)


def test_timeout_says_the_max_runtime_and_node_fail_names_the_node():
    assert "max runtime" in states.ending("TIMEOUT", None, 15).message
    assert "Node n1 failed" in states.ending("NODE_FAIL", None, None, ("n1",)).message


def test_pending_reasons_in_our_words_and_the_unknown_named():
    assert "GPUs of its nodes are busy" in states.pending_phrase("Resources")
    assert "(Resources)" in states.pending_phrase("Resources")
    assert "gives the reason Licenses" in states.pending_phrase("Licenses")


def test_the_comment_ties_a_slurm_job_to_a_portal_job():
    assert portal_job_of(comment_for(41, 2)) == (41, 2)
    assert portal_job_of("my own job") is None and portal_job_of("gpuportal job x attempt 1") is None


def test_scripts_per_container_runtime_and_across_nodes():
    one = batch_script(job_id=1, attempt=1, command="python train.py", image="img:1", container="none", node_count=1,
                       gpus_per_node=2)
    assert one.startswith("#!/bin/bash\n") and one.splitlines()[-1] == "python train.py"
    many = batch_script(job_id=1, attempt=1, command="python train.py", image="img:1", container="apptainer",
                        node_count=2, gpus_per_node=8)
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 apptainer exec --nv docker://img:1 bash -c " in many
    pyxis = batch_script(job_id=1, attempt=1, command="echo hi", image="nvcr.io/x:1", container="pyxis",
                         node_count=1, gpus_per_node=1)
    assert "srun --ntasks=1 --container-image=nvcr.io/x:1 bash -c 'echo hi'" in pyxis
    with pytest.raises(ScriptError):
        batch_script(job_id=1, attempt=1, command="", image="img", container="none", node_count=1, gpus_per_node=1)


def test_the_token_is_an_hs256_jwt_of_the_user():
    token = tokens.sign(b"k" * 32, "daemon", 1000, 600)
    header, claims, signature = token.split(".")
    expected = hmac.new(b"k" * 32, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)) == expected
    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {"sun": "daemon", "iat": 1000, "exp": 1600}
