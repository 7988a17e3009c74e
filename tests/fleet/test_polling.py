"""Polling real agents started on loopback ports: healthy ones, one hanging, one talking garbage."""

import time
from http.server import BaseHTTPRequestHandler

import pytest

from fleet import services
from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import poll_agents
from fleet.models import GPU, Cluster, Node, NodeEvent
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.server import AgentHTTPServer, serve
from nodeagent.system import SimulatedHostSampler
from scheduling.jobs import submission
from scheduling.models import FailureCategory, Job, JobStatus
from scheduling.tasks import sync_job_status
from tenants.models import Quota, Tenant
from tests.conftest import job_payload, long_run

pytestmark = pytest.mark.django_db(transaction=True)


class Lab:
    """H200 nodes with real agents on loopback, registered with real tokens."""

    def __init__(self, count=3, gpus=4):
        self.cluster = Cluster.objects.create(name="lab")
        self.nodes, self.agents, self.servers = [], [], []
        for i in range(count):
            node = Node.objects.create(cluster=self.cluster, name=f"lab-n{i}", gpu_model="H200", datacenter="dc9",
                                       rack=f"r{i // 2}", network_domain="ib-lab")
            for index in range(gpus):
                GPU.objects.create(node=node, index=index, uuid=f"seed-{i}-{index}", model="H200", memory_mb=1)
            token = agent_tokens.issue(node)
            agent = Agent(make_backend("simulated", count=gpus, model="H200", seed=100 + i), node=node.name,
                          host=SimulatedHostSampler(seed=i)).start()
            server = serve({"": (agent, token)}, "127.0.0.1", 0)
            node.agent_url = f"http://127.0.0.1:{server.server_address[1]}"
            node.save()
            self.nodes.append(node)
            self.agents.append(agent)
            self.servers.append(server)

    def nvml(self, i):
        return self.agents[i].backend.nvml

    def node(self, i):
        return Node.objects.get(pk=self.nodes[i].pk)

    def close(self):
        for agent in self.agents:
            agent.backend.nvml.inject("clear")
        for server in self.servers:
            server.shutdown()
        for agent in self.agents:
            agent.stop()


#: Long enough for a healthy agent's first answer on a busy 2-core machine (0.5 s was not, once), short enough
#: that the hanging agent's three missed polls cost seconds.
TIMEOUT = 2.0


@pytest.fixture
def lab(world, settings):
    settings.AGENTS = {**settings.AGENTS, "POLL_TIMEOUT_SECONDS": TIMEOUT, "MISSED_POLLS_UNHEALTHY": 3,
                       "GOOD_POLLS_HEALTHY": 2, "NETWORKS": ["10.0.0.0/8", "127.0.0.0/8"]}
    lab = Lab()
    yield lab
    lab.close()


def lab_poll():
    return poll_agents(Node.objects.filter(cluster__name="lab").prefetch_related("gpus"))


def test_poll_stores_inventory_readings_and_versions(lab):
    report = lab_poll()
    assert (report.polled, report.answered, report.failed) == (3, 3, {})
    node = lab.node(0)
    assert node.health == "healthy" and node.last_seen and node.driver_version == "550.90.07"
    assert node.cuda_version == "12.4" and node.agent_version
    gpu = node.gpus.get(index=0)
    assert gpu.uuid == lab.nvml(0).nvmlDeviceGetUUID(lab.nvml(0).handles[0])  # inventory follows the agent
    assert gpu.memory_mb == 143771
    assert gpu.readings.count() == 1 and node.readings.count() == 1
    assert node.readings.get().ib_rx_bytes_per_s is None or node.readings.get().ib_rx_bytes_per_s >= 0


def test_hanging_agent_costs_one_timeout_and_walks_the_health_states(lab):
    lab.nvml(1).inject("hang")
    started = time.monotonic()
    report = lab_poll()
    assert time.monotonic() - started < 2 * TIMEOUT  # the others were not held up by the hanging one
    assert report.answered == 2 and f"no answer within {TIMEOUT:g} s" in report.failed["lab-n1"]
    assert lab.node(1).health == "suspect" and lab.node(0).health == "healthy"
    lab_poll()
    lab_poll()
    node = lab.node(1)
    assert node.health == "unhealthy" and node.missed_polls == 3
    reasons = list(node.events.filter(kind="health").order_by("at", "id").values_list("to_state", "reason"))
    assert reasons[0] == ("suspect", f"Missed a poll: no answer within {TIMEOUT:g} s")
    assert reasons[1] == ("unhealthy", f"3 polls in a row missed (limit 3): no answer within {TIMEOUT:g} s")

    lab.nvml(1).inject("clear")
    lab_poll()
    assert lab.node(1).health == "unhealthy"  # one good poll is not enough
    lab_poll()
    assert lab.node(1).health == "healthy"
    assert node.events.filter(to_state="healthy").get().reason == "2 good polls in a row (needed 2)."


def test_garbage_and_wrong_token_are_missed_polls_with_the_cause(lab):
    class Garbage(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b'{"gpus": "many"}' if self.path.startswith("/shape") else b"<html>proxy error</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    import threading

    junk = AgentHTTPServer(("127.0.0.1", 0), {})
    junk.RequestHandlerClass = Garbage
    threading.Thread(target=junk.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        Node.objects.filter(pk=lab.nodes[0].pk).update(agent_url=f"http://127.0.0.1:{junk.server_address[1]}")
        Node.objects.filter(pk=lab.nodes[1].pk).update(agent_url=f"http://127.0.0.1:{junk.server_address[1]}/shape")
        Node.objects.filter(pk=lab.nodes[2].pk).update(agent_token_version=99)  # the portal now sends another token
        report = lab_poll()
    finally:
        junk.shutdown()
    assert report.answered == 0
    assert report.failed["lab-n0"].startswith("invalid snapshot")
    assert "expected an object with a list of gpus" in report.failed["lab-n1"]
    assert "refused the token (401)" in report.failed["lab-n2"]
    assert lab.node(0).last_poll_error.startswith("invalid snapshot")


def test_xid79_marks_gpu_unhealthy_fails_its_job_and_is_never_placed_on(lab, users):
    Quota.objects.create(tenant=Tenant.objects.get(name="vision"), gpu_model="H200", guaranteed_gpus=8, limit_gpus=8)
    lab_poll()
    job = submission.submit_job(users["alice"], job_payload(gpu_model="H200", gpus_per_node=4,
                                                            command=long_run(900)))
    gpu = job.allocations.first().gpu
    node_index = [n.pk for n in lab.nodes].index(gpu.node_id)
    lab.nvml(node_index).inject("xid79", gpu.index)
    time.sleep(0.7)  # the agent's event thread picks the XID up
    report = lab_poll()
    assert f"{gpu.node.name}/gpu{gpu.index}: healthy -> unhealthy" in report.changes
    gpu.refresh_from_db()
    assert gpu.health == "unhealthy" and gpu.last_xid == 79
    event = NodeEvent.objects.get(gpu=gpu, to_state="unhealthy")
    assert "XID 79" in event.reason and "fallen off the bus" in event.reason

    fault = job.events.get(kind="fault")
    assert fault.data["category"] == FailureCategory.GPU_FAULT and "XID 79" in fault.reason
    sync_job_status()
    job.refresh_from_db()
    # An infrastructure failure: the attempt fails with the fault as its diagnosis and the job is retried
    # away from the faulty GPU (lifecycle.fail_or_retry).
    attempt = job.executor_state["attempts"][-1]
    assert job.retry_count == 1 and attempt["category"] == FailureCategory.GPU_FAULT
    assert "XID 79" in attempt["message"]
    assert gpu.pk not in set(job.allocations.filter(released_at__isnull=True).values_list("gpu_id", flat=True))

    again = submission.submit_job(users["alice"], job_payload(gpu_model="H200", gpus_per_node=4))
    assert again.status != JobStatus.QUEUED
    assert gpu.pk not in set(again.allocations.values_list("gpu_id", flat=True))


def test_double_bit_ecc_error_is_critical(lab):
    lab_poll()
    lab.nvml(2).inject("dbe", 3)
    lab_poll()
    gpu = lab.node(2).gpus.get(index=3)
    assert gpu.health == "unhealthy" and gpu.ecc_dbe == 1
    assert "Double-bit ECC error on GPU 3 (volatile count 0 -> 1)" in gpu.events.get().reason


def test_unhealthy_node_marks_running_jobs_with_node_fault(lab, users):
    Quota.objects.create(tenant=Tenant.objects.get(name="vision"), gpu_model="H200", guaranteed_gpus=8, limit_gpus=8)
    job = submission.submit_job(users["alice"], job_payload(gpu_model="H200", gpus_per_node=2,
                                                            command=long_run(900)))
    node_index = [n.pk for n in lab.nodes].index(job.allocations.first().gpu.node_id)
    lab.nvml(node_index).inject("hang")
    for _ in range(3):
        lab_poll()
    assert job.events.get(kind="fault").data["category"] == FailureCategory.NODE_FAULT
    sync_job_status()
    job = Job.objects.get(pk=job.pk)  # the attempt failed with a node fault; the job is retried elsewhere
    assert job.retry_count == 1 and job.executor_state["attempts"][-1]["category"] == FailureCategory.NODE_FAULT


def test_cordoned_and_draining_nodes_take_no_new_work(lab, users):
    Quota.objects.create(tenant=Tenant.objects.get(name="vision"), gpu_model="H200", guaranteed_gpus=12,
                         limit_gpus=12)
    services.set_node_admin_state(users["admin"], lab.node(0), "cordoned", "firmware update")
    services.set_node_admin_state(users["admin"], lab.node(1), "draining", "rack move")
    job = submission.submit_job(users["alice"], job_payload(gpu_model="H200", gpus_per_node=4))
    assert {a.gpu.node.name for a in job.allocations.all()} == {"lab-n2"}
    blocked = submission.submit_job(users["alice"], job_payload(gpu_model="H200", gpus_per_node=4))
    assert blocked.status == JobStatus.QUEUED and blocked.wait_reason == "insufficient_gpus"
    event = lab.node(0).events.get(kind="admin")
    assert event.actor == users["admin"] and event.reason == "admin set the node cordoned. firmware update"
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.set_node_admin_state(users["alice"], lab.node(2), "cordoned")


def test_agent_registration_with_the_node_token(lab, client):
    import json

    node = lab.node(0)
    token = agent_tokens.issue(node)
    assert token not in json.dumps(list(Node.objects.values()), default=str)  # only the hash is stored
    Node.objects.filter(pk=node.pk).update(rack="", network_domain="")  # an agent may fill in empty labels
    body = {"node": "lab-n0", "url": "http://10.1.2.3:9400", "labels": {"rack": "r7", "network": "ib-z"}}
    wrong = client.post("/api/agents/register/", body, content_type="application/json",
                        HTTP_AUTHORIZATION="Bearer gpa_wrong")
    assert wrong.status_code == 401
    unknown = client.post("/api/agents/register/", {**body, "node": "nope"}, content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {token}")
    assert unknown.status_code == 401
    ok = client.post("/api/agents/register/", body, content_type="application/json",
                     HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ok.status_code == 200, ok.content
    node.refresh_from_db()
    assert (node.agent_url, node.rack, node.network_domain) == ("http://10.1.2.3:9400", "r7", "ib-z")
    assert node.events.filter(kind="registration").exists()
    old = token
    agent_tokens.issue(lab.node(0))  # revokes
    assert client.post("/api/agents/register/", body, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {old}").status_code == 401


def test_simulated_cluster_is_polled_in_process(world):
    from fleet.models import GpuReading

    report = poll_agents()
    assert report.polled == 12 and report.answered == 12
    assert GpuReading.objects.count() == 96
