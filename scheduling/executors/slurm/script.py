"""The batch script the executor submits: the job's command, run on the node, in Apptainer or through pyxis,
and across every node of the allocation with ``srun`` when the job spans several.

Pure text (no database): what the script says is what the job page and the tests can read."""

from __future__ import annotations

import shlex

#: Every line the portal submits begins so; ``portal_job_of`` reads the comment it sets with the same words.
COMMENT_PREFIX = "gpuportal job"


def comment_for(job_id: int, attempt: int) -> str:
    return f"{COMMENT_PREFIX} {job_id} attempt {attempt}"


def portal_job_of(comment: str) -> tuple[int, int] | None:
    """(job id, attempt) of a Slurm job the portal submitted, from its comment; None for any other job."""
    words = (comment or "").split()
    if len(words) != 5 or " ".join(words[:2]) != COMMENT_PREFIX or words[3] != "attempt":
        return None
    try:
        return int(words[2]), int(words[4])
    except ValueError:
        return None


class ScriptError(ValueError):
    """The job cannot be made into a batch script for this cluster (said in the job's failure)."""


def batch_script(*, job_id: int, attempt: int, command: str, image: str, container: str, node_count: int,
                 gpus_per_node: int) -> str:
    """The script: ``container`` is the cluster's runtime ("none", "apptainer", "pyxis"). With "none" the image
    is not used (the command runs on the node as the job's user); a job without a command needs an image."""
    command = (command or "").strip()
    if not command and container == "none":
        raise ScriptError("the job has no command, and this cluster runs commands on its nodes without an image")
    spread = (f"srun --nodes={node_count} --ntasks={node_count} --ntasks-per-node=1 "
              if node_count > 1 else "")
    shell = f"bash -c {shlex.quote(command)}" if command else ""
    if container == "apptainer":
        verb = "exec" if command else "run"
        line = f"{spread}apptainer {verb} --nv {shlex.quote('docker://' + image)} {shell}".rstrip()
    elif container == "pyxis":
        launcher = spread or "srun --ntasks=1 "
        line = f"{launcher}--container-image={shlex.quote(image)} {shell}".rstrip()
    else:
        line = f"{spread}{shell}" if spread else command
    return "\n".join([
        "#!/bin/bash",
        f"# {comment_for(job_id, attempt)}: {gpus_per_node} GPU(s) on each of {node_count} node(s)",
        line,
        "",
    ])
