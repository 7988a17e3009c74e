"""The Slurm client against a real slurmrestd: versions, nodes and their flags, submits judged by the job id,
tokens the portal signs, a refused token, and slurmdb's record of a job."""


import pytest

from fleet.models import Cluster, ExecutorKind
from scheduling.executors.slurm import tokens
from scheduling.executors.slurm.client import SlurmClient, SlurmError
from tests.slurm.servers import NODES
from tests.slurm.world import wait_for

ENV = {"PATH": "/usr/bin:/bin"}


def cluster_of(slurm, **fields) -> Cluster:
    """An unsaved Cluster row pointing at the test cluster: the client needs no database."""
    return Cluster(**{"name": "slurm-test", "executor": ExecutorKind.SLURM, "slurm_url": slurm.url,
                      "slurm_jwt_key_file": str(slurm.jwt_key), "slurm_user": "root", **fields})


@pytest.fixture(autouse=True)
def _fresh_tokens():
    tokens.forget()
    yield
    tokens.forget()


def test_versions_newest_chosen_and_release(slurm):
    client = SlurmClient(cluster_of(slurm))
    assert set(client.versions()) >= {"v0.0.36", "v0.0.37", "v0.0.38"}
    assert client.api_version == "v0.0.38"
    assert client.slurm_version.startswith("22.05")
    assert client.ping() is True


def test_nodes_and_partitions_parsed(slurm):
    client = SlurmClient(cluster_of(slurm))
    nodes = {node.name: node for node in client.nodes()}
    assert set(nodes) == {name for name, *_rest in NODES}
    for name, kind, gpus, cpus, memory in NODES:
        assert (nodes[name].gpu_type, nodes[name].gpus, nodes[name].cpus, nodes[name].real_memory_mib) == (
            kind, gpus, cpus, memory)
        assert nodes[name].partitions == ("gpu",)
    (partition,) = client.partitions()
    assert set(partition.nodes) == set(nodes)


def test_drain_flag_and_reason_then_resume(slurm_clean):
    client = SlurmClient(cluster_of(slurm_clean))
    slurm_clean.scontrol("update", "nodename=sx-a100-2", "state=drain", "reason=fan replaced")
    try:
        node = next(node for node in client.nodes() if node.name == "sx-a100-2")
        assert "DRAIN" in node.flags
        assert node.reason == "fan replaced"
    finally:
        slurm_clean.scontrol("update", "nodename=sx-a100-2", "state=resume")
    node = next(node for node in client.nodes() if node.name == "sx-a100-2")
    assert "DRAIN" not in node.flags


def test_submit_runs_as_token_user_and_gpus_are_listed(slurm_clean):
    client = SlurmClient(cluster_of(slurm_clean))
    result = client.submit("#!/bin/bash\nsleep 3\n", {
        "name": "client-run", "nodes": 1, "nodelist": "sx-h100-2", "gres": "gpu:h100:2", "environment": ENV,
        "current_working_directory": "/tmp", "comment": "client test"}, user="daemon")
    assert result.job_id is not None, result.errors
    job = wait_for(lambda: client.job(result.job_id), lambda job: job.state == "RUNNING")
    assert (job.state, job.user, job.nodes, job.comment) == ("RUNNING", "daemon", ("sx-h100-2",), "client test")
    assert len(job.gpus_by_node["sx-h100-2"]) == 2
    node = next(node for node in client.nodes() if node.name == "sx-h100-2")
    assert len(node.gres_used["h100"]) == 2
    assert result.job_id in {job.job_id for job in client.jobs()}
    assert client.cancel(result.job_id, "daemon") is True
    cancelled = wait_for(lambda: client.job(result.job_id), lambda job: job.state == "CANCELLED")
    assert cancelled.state == "CANCELLED" and cancelled.signal == 15


def test_impossible_request_has_no_job_id_and_says_why(slurm_clean):
    result = SlurmClient(cluster_of(slurm_clean)).submit("#!/bin/bash\ntrue\n", {
        "name": "too-big", "nodelist": "sx-a100-2", "gres": "gpu:a100:8", "environment": ENV}, user="daemon")
    assert result.job_id is None
    assert [problem.number for problem in result.errors] == [2014]
    assert "node configuration is not available" in result.message


def test_exit_code_decoded_and_slurmdb_record(slurm_clean):
    client = SlurmClient(cluster_of(slurm_clean))
    result = client.submit("#!/bin/bash\nexit 3\n", {"name": "exit-three", "environment": ENV,
                                                    "current_working_directory": "/tmp"}, user="nobody")
    job = wait_for(lambda: client.job(result.job_id), lambda job: job.state == "FAILED")
    assert (job.state, job.raw_exit_code, job.exit_status, job.signal) == ("FAILED", 768, 3, None)
    assert client.has_accounting() is True
    record = wait_for(lambda: client.db_job(result.job_id), lambda record: record is not None)
    assert (record.job_id, record.user, record.account, record.state) == (result.job_id, "nobody", "nlp", "FAILED")
    assert client.db_job(999_999) is None
    assert client.job(999_999) is None
    assert client.cancel(999_999, "nobody") is False


def test_a_refused_token_is_an_error_without_the_token(slurm, tmp_path):
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"not the cluster's key at all, 32b")
    client = SlurmClient(cluster_of(slurm, slurm_jwt_key_file=str(wrong)), user="daemon")
    with pytest.raises(SlurmError) as raised:
        client.call("GET", "/slurm/v0.0.38/nodes")
    assert raised.value.http_status == 500
    assert tokens.token_for(client.cluster, "daemon") not in str(raised.value)
    assert "Unspecified error" in str(raised.value)


def test_token_file_serves_only_its_user(slurm, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(slurm.token("daemon") + "\n")
    cluster = cluster_of(slurm, slurm_jwt_key_file="", slurm_token_file=str(token_file))
    assert SlurmClient(cluster, user="daemon").nodes()
    with pytest.raises(SlurmError, match="is for daemon, not nobody"):
        SlurmClient(cluster, user="nobody").nodes()
