"""The portal's side of what agents of every vendor report: inventory and readings from their snapshots, new
models entering the catalogue with their vendor, old agents read as NVIDIA, and vendor faults as GPU faults."""

import pytest

from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import PollResult, apply_results, poll_agents
from fleet.models import GPU, AcceleratorModel, Cluster, Node
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.server import serve
from nodeagent.system import SimulatedHostSampler
from tests.factories import make_node

#: Transactional: the agents answer from their own threads. The flush empties the catalogue the migrations
#: seed, so each test creates the models it relies on.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agents(settings):
    """Real agents on loopback for nodes of the given (backend, model), registered with real tokens."""
    settings.AGENTS = {**settings.AGENTS, "POLL_TIMEOUT_SECONDS": 3.0, "MISSED_POLLS_UNHEALTHY": 3,
                       "GOOD_POLLS_HEALTHY": 2, "NETWORKS": ["127.0.0.0/8"]}
    cluster = Cluster.objects.create(name="mixed")
    started = []

    def start(backend_name: str, model: str, gpus: int = 2):
        node = make_node(cluster, f"{backend_name}-{model.lower()}", model, gpus=gpus)
        token = agent_tokens.issue(node)
        backend = make_backend(backend_name, simulate=gpus, model=model, seed=node.pk)
        agent = Agent(backend, node=node.name, host=SimulatedHostSampler(seed=node.pk)).start()
        server = serve({"": (agent, token)}, "127.0.0.1", 0)
        node.agent_url = f"http://127.0.0.1:{server.server_address[1]}"
        node.save()
        started.append((agent, server))
        return node, backend

    yield start
    for agent, server in started:
        agent.backend.inject("clear")
        server.shutdown()
        agent.stop()


def poll(*nodes):
    return poll_agents(Node.objects.filter(pk__in=[n.pk for n in nodes]).prefetch_related("gpus"))


def test_each_vendors_agent_is_polled_into_inventory_and_readings(agents):
    nodes = [agents(*pair)[0] for pair in (("amd", "MI300X"), ("ascend", "Ascend910B"), ("cambricon", "MLU370-X8"),
                                           ("hygon", "K100"))]
    report = poll(*nodes)
    assert (report.answered, report.failed) == (4, {})
    for node in nodes:
        node.refresh_from_db()
        assert node.health == "healthy" and node.last_seen is not None
        gpus = list(node.gpus.order_by("index"))
        assert [g.model for g in gpus] == [node.gpu_model] * 2  # stored as the node's model, as before
        assert all(g.uuid.split("-")[0] in ("MLU", "DCU", "Ascend") or node.gpu_model == "MI300X" for g in gpus)
        assert all(g.readings.count() == 1 for g in gpus)
    mi300x = GPU.objects.filter(node=nodes[0]).first()
    assert mi300x.memory_mb == 196592  # what amdsmi reported replaced the factory's value


def test_a_new_model_enters_the_catalogue_with_its_vendor(agents):
    node, _backend = agents("amd", "MI325X")  # the simulation falls back to 64 GiB for a model it lacks
    assert not AcceleratorModel.objects.filter(name="MI325X").exists()
    poll(node)
    model = AcceleratorModel.objects.get(name="MI325X")
    assert (model.vendor, model.memory_gb) == ("amd", 64)
    poll(node)
    assert AcceleratorModel.objects.filter(name="MI325X").count() == 1
    known = AcceleratorModel.objects.create(name="MI300X", vendor="amd", memory_gb=192,
                                            interconnect="Infinity Fabric (XGMI)")
    before = (known.vendor, known.memory_gb, known.interconnect)
    other, _b = agents("amd", "MI300X")
    poll(other)
    known.refresh_from_db()
    assert (known.vendor, known.memory_gb, known.interconnect) == before  # the platform's description stays


def test_a_snapshot_without_vendor_is_an_nvidia_one(transactional_db):
    cluster = Cluster.objects.create(name="old")
    node = make_node(cluster, "old-agent", "B300", gpus=1, agent_url="http://10.0.0.9:9400")
    gpu = node.gpus.get()
    old_snapshot = {"agent_version": "0.0.9", "gpus": [{"index": 0, "uuid": gpu.uuid, "state": "ok",
                                                        "memory_total_mb": 275040, "utilization_gpu": 3}]}
    nodes = list(Node.objects.filter(pk=node.pk).prefetch_related("gpus"))
    apply_results([PollResult(node.pk, snapshot=old_snapshot)], nodes)
    model = AcceleratorModel.objects.get(name="B300")
    assert (model.vendor, model.memory_gb) == ("nvidia", 269)


def test_garbage_vendor_fields_are_a_missed_poll(transactional_db):
    from fleet.agents.polling import validate_snapshot

    with pytest.raises(ValueError, match="vendor must be a string"):
        validate_snapshot({"gpus": [], "vendor": 7})
    with pytest.raises(ValueError, match="model must be a string"):
        validate_snapshot({"gpus": [{"index": 0, "state": "ok", "model": ["x"]}]})


def test_a_failed_npu_makes_its_gpu_unhealthy_with_the_alarm_as_the_reason(agents):
    node, backend = agents("ascend", "Ascend910B")
    poll(node)
    backend.inject("offbus", 1)
    poll(node)
    gpu = GPU.objects.get(node=node, index=1)
    assert gpu.health == "unhealthy"
    event = node.events.filter(kind="health", gpu=gpu).latest("at")
    assert "stopped answering npu-smi" in event.reason and "80E18402" in event.reason
    assert GPU.objects.get(node=node, index=0).health == "healthy"


def test_simulated_cluster_nodes_read_through_their_vendors_simulation(transactional_db):
    from fleet.agents import polling

    AcceleratorModel.objects.create(name="Ascend910B", vendor="huawei", memory_gb=64, interconnect="HCCS")
    cluster = Cluster.objects.create(name="sim-mixed")
    node = make_node(cluster, "sim-ascend", "Ascend910B", gpus=2)
    try:
        report = poll_agents(list(Node.objects.filter(pk=node.pk).prefetch_related("gpus")))
        assert report.answered == 1
        agent = polling._SIMULATED[node.pk]
        assert agent.backend.vendor == "huawei"
        assert {g["model"] for g in agent.snapshot()["gpus"]} == {"Ascend910B"}
    finally:
        polling._SIMULATED.pop(node.pk, None)
