"""A real Slurm cluster's inventory in the portal: ``connect_slurm`` and what it prints and refuses, nodes and GPUs
imported with their models, a node drained in Slurm draining in the portal with Slurm's reason and back, and a
job submitted to Slurm directly holding GPUs outside the portal (``/api/nodes/`` and the node's page)."""

import io
import json
from importlib import import_module

import pytest
from django.apps import apps as django_apps
from django.core.management import CommandError, call_command

from audit.models import AuditAction, AuditRecord
from fleet.models import AdminState, Cluster, Node, OutsideWork
from scheduling.executors.slurm import tokens
from scheduling.executors.slurm.inventory import holds_of, import_inventory, model_for
from scheduling.executors.slurm.script import comment_for
from scheduling.executors.slurm.shapes import SlurmJob
from tests.slurm.servers import NODES, free_port
from tests.slurm.world import wait_for

NAME = "hpc"


@pytest.fixture(autouse=True)
def _fresh_tokens():
    tokens.forget()
    yield
    tokens.forget()


def connect(slurm, *extra) -> dict:
    # the catalogue's models come from a data migration, which a transactional test before this one emptied
    import_module("fleet.migrations.0002_accelerator_catalogue").add_known_models(django_apps, None)
    out = io.StringIO()
    call_command("connect_slurm", NAME, "--url", slurm.url, "--jwt-key-file", str(slurm.jwt_key), "--user", "root",
                 *extra, stdout=out)
    return json.loads(out.getvalue())


def test_connect_slurm_imports_nodes_gpus_and_models(slurm, world):
    printed = connect(slurm, "--model", "h100=h100", "--output-dir", str(slurm.output_dir))
    assert printed["cluster"] == NAME and printed["api_version"] == "v0.0.38"
    assert printed["slurm_version"].startswith("22.05")
    assert (printed["nodes"], printed["gpus"]) == (len(NODES), sum(gpus for _n, _t, gpus, *_r in NODES))
    assert printed["models"] == {"H100": 16, "A100": 12}
    cluster = Cluster.objects.get(name=NAME)
    assert (cluster.executor, cluster.slurm_models, cluster.slurm_api_version) == ("slurm", {"h100": "H100"},
                                                                                   "v0.0.38")
    for name, kind, gpus, cpus, memory in NODES:
        node = Node.objects.get(name=name)
        assert (node.cluster, node.gpu_model, node.gpus.count(), node.cpu_milli, node.memory_mib) == (
            cluster, kind.upper(), gpus, cpus * 1000, memory)
        assert node.schedulable and node.external_state == "idle"
    assert AuditRecord.objects.filter(action=AuditAction.CLUSTER_CHANGE, object_id=str(cluster.pk),
                                      after__slurm_url=slurm.url).exists()
    again = connect(slurm)  # an update: same nodes, no duplicates
    assert again["nodes"] == len(NODES) and Node.objects.filter(cluster=cluster).count() == len(NODES)


@pytest.mark.parametrize(("arguments", "option"), [
    (["--jwt-key-file", "KEY", "--token-file", "KEY"], "--jwt-key-file / --token-file"),
    ([], "--jwt-key-file / --token-file"),
    (["--jwt-key-file", "/nonexistent/jwt.key"], "--jwt-key-file: cannot read"),
    (["--jwt-key-file", "KEY", "--model", "h100=NoSuchGPU"], "--model: 'NoSuchGPU' is not a model"),
    (["--jwt-key-file", "KEY", "--url", "http://127.0.0.1:PORT"], "--url: slurmrestd at"),
])
def test_connect_slurm_names_the_option_at_fault(slurm, db, arguments, option):
    arguments = [a.replace("KEY", str(slurm.jwt_key)).replace("PORT", str(free_port())) for a in arguments]
    url = [] if "--url" in arguments else ["--url", slurm.url]
    with pytest.raises(CommandError) as refused:
        call_command("connect_slurm", NAME, *url, *arguments, stdout=io.StringIO())
    assert option in str(refused.value) and "Traceback" not in str(refused.value)
    assert not Cluster.objects.filter(name=NAME).exists()


def test_a_node_drained_in_slurm_drains_in_the_portal_and_back(slurm_clean, world, client):
    connect(slurm_clean)
    cluster = Cluster.objects.get(name=NAME)
    try:
        slurm_clean.scontrol("update", "nodename=sx-a100-2", "state=drain", "reason=bad fan")
        change = import_inventory(cluster).change
        node = Node.objects.get(name="sx-a100-2")
        assert change.admin_changes == ["sx-a100-2: active -> draining"]
        assert (node.admin_state, node.external_state, node.external_reason) == ("draining", "drained", "bad fan")
        client.login(username="bob", password="demo")
        page = client.get(f"/inventory/nodes/{node.name}/").content.decode()
        assert "Slurm: drained — reason: bad fan" in page
    finally:
        slurm_clean.scontrol("update", "nodename=sx-a100-2", "state=resume")
    import_inventory(cluster)
    node.refresh_from_db()
    assert (node.admin_state, node.external_reason) == (AdminState.ACTIVE, "")


def test_a_job_submitted_to_slurm_directly_holds_gpus_outside_the_portal(slurm_clean, api, client):
    connect(slurm_clean)
    cluster = Cluster.objects.get(name=NAME)
    job_id = slurm_clean.sbatch("--gres=gpu:h100:2", "-w", "sx-h100-1", "-o", "/dev/null", "--chdir=/tmp",
                                "-J", "direct", "--wrap", "sleep 3", user="daemon")
    state = wait_for(lambda: slurm_clean.scontrol("show", "job", job_id), lambda text: "JobState=RUNNING" in text,
                     seconds=10)
    assert "JobState=RUNNING" in state
    assert import_inventory(cluster).change.outside_work == 1
    work = OutsideWork.objects.get(cluster=cluster)
    assert (work.node.name, work.external_id, work.user_name, work.account, len(work.gpu_indices)) == (
        "sx-h100-1", job_id, "daemon", "vision", 2)
    node = api("bob").get("/api/nodes/sx-h100-1/").json()
    assert node["gpus_free"] == 6
    assert sorted(g["index"] for g in node["gpus"] if g["held_outside"]) == sorted(work.gpu_indices)
    assert not any(g["held"] for g in node["gpus"])
    listed = {n["name"]: n for n in api("bob").get("/api/nodes/?page_size=100").json()["results"]}
    assert listed["sx-h100-1"]["gpus_free"] == 6 and listed["sx-h100-2"]["gpus_free"] == 8
    client.login(username="bob", password="demo")
    page = client.get("/inventory/nodes/sx-h100-1/").content.decode()
    assert "held by work submitted to Slurm directly" in page and "daemon" not in page
    client.login(username="admin", password="demo")
    page = client.get("/inventory/nodes/sx-h100-1/").content.decode()
    assert f"Slurm job {job_id} of daemon" in page


def test_only_running_jobs_the_portal_did_not_submit_hold_gpus_outside_it():
    def job(**fields) -> SlurmJob:
        return SlurmJob(**{"job_id": 7, "name": "x", "state": "RUNNING", "reason": "None", "raw_exit_code": None,
                           "user": "daemon", "account": "vision", "partition": "gpu", "nodes": ("n1", "n2"),
                           "gpus_by_node": {"n1": (0, 1), "n2": (3,)}, "comment": "", "submit_time": None,
                           "start_time": None, "end_time": None, "time_limit_minutes": 10, "standard_output": "",
                           **fields})
    holds = holds_of(job())
    assert [(h.node, h.gpu_indices, h.time_limit_seconds) for h in holds] == [("n1", (0, 1), 600), ("n2", (3,), 600)]
    assert len(holds_of(job(comment=comment_for(12, 1)))) == 2  # a comment alone is no proof: outside work
    assert holds_of(job(comment=comment_for(12, 1)), portal={7}) == []  # an id the portal stored: its own
    assert holds_of(job(state="PENDING")) == [] and holds_of(job(gpus_by_node={})) == []
    assert model_for("h100", {}, {"h100": "H100"}) == "H100" and model_for("h100", {"h100": "H100-SXM"}, {}) == (
        "H100-SXM")
    assert model_for("mi300x", {}, {}) == "MI300X"
