"""One bad agent stalls nobody: a total deadline per poll, a size cap, no overlapping cycles, its own queue,
TLS agents. Real HTTP on loopback, as in test_polling.py."""

import threading
import time

import psycopg
import pytest
from django.db import connection

from fleet import tasks as fleet_tasks
from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import POLL_LOCK_KEY, poll_agents
from fleet.models import Cluster, Node
from gpuportal.celery import app
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.server import serve, tls_context
from tests.fleet.raw_agent import RawAgent
from tests.nodeagent.tls import self_signed_cert


def drip(sock):
    """A valid answer, one byte every 0.2 s from the status line on: no single read ever times out."""
    for byte in b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"gpus": []}':
        sock.sendall(bytes([byte]))
        time.sleep(0.2)


def flood_with_length(sock):
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\n" + b" " * 100_000)


def flood_until_close(sock):
    sock.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
    for _ in range(20):
        sock.sendall(b" " * 10_000)


@pytest.fixture
def limits(settings, transactional_db):
    settings.AGENTS = {**settings.AGENTS, "POLL_TIMEOUT_SECONDS": 1.0, "MAX_SNAPSHOT_BYTES": 64 * 1024,
                       "NETWORKS": ["127.0.0.0/8"]}  # the agents here answer on loopback
    cluster = Cluster.objects.create(name="edge")
    fakes = []

    def node(name, respond=None, url=None):
        fake = RawAgent(respond) if respond else None
        if fake:
            fakes.append(fake)
        node = Node.objects.create(cluster=cluster, name=name, gpu_model="H200", agent_url=url or fake.url)
        agent_tokens.issue(node)
        return node, fake

    yield node
    for fake in fakes:
        fake.close()


def edge_poll():
    return poll_agents(Node.objects.filter(cluster__name="edge").prefetch_related("gpus"))


def test_a_dripping_agent_is_cut_off_at_the_total_deadline(limits):
    limits("drip", drip)
    started = time.monotonic()
    report = edge_poll()
    elapsed = time.monotonic() - started
    assert report.ran and report.answered == 0
    assert report.failed["drip"] == "no answer within 1 s"
    assert elapsed < 2.5  # about the deadline; the drip alone would take 10 s
    assert Node.objects.get(name="drip").health == "suspect"


def test_answers_over_the_size_cap_are_refused(limits):
    limits("declared", flood_with_length)
    limits("undeclared", flood_until_close)
    report = edge_poll()
    assert report.answered == 0
    for name in ("declared", "undeclared"):
        assert report.failed[name] == ("the answer is larger than the limit of 65536 bytes "
                                       "(AGENTS['MAX_SNAPSHOT_BYTES'])")
    assert Node.objects.get(name="declared").last_poll_error.startswith("the answer is larger")


def test_a_second_cycle_returns_at_once_while_one_runs(limits):
    _node, fake = limits("drip", drip)
    first = {}

    def run_first():
        try:
            first["report"] = edge_poll()
        finally:
            connection.close()  # this thread's own database connection

    thread = threading.Thread(target=run_first)
    thread.start()
    assert fake.accepted.wait(5)  # the first cycle is waiting for the dripping agent
    started = time.monotonic()
    second = edge_poll()
    assert not second.ran and second.polled == 0
    assert time.monotonic() - started < 0.5
    thread.join(10)
    assert first["report"].ran and "drip" in first["report"].failed


def test_a_cycle_in_another_process_holds_off_this_one(limits):
    limits("drip", drip)
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"],
                         autocommit=True) as other:  # as another worker would
        other.execute("SELECT pg_advisory_lock(%s)", [POLL_LOCK_KEY])
        assert fleet_tasks.poll_agents.apply().get() == {"ran": False, "detail": "another poll cycle is running"}
        other.execute("SELECT pg_advisory_unlock(%s)", [POLL_LOCK_KEY])
    assert edge_poll().ran


def test_polling_has_its_own_queue():
    route = app.amqp.router.route({}, "fleet.tasks.poll_agents")
    assert route["queue"].name == "agents"
    assert app.amqp.router.route({}, "scheduling.tasks.run_scheduling_pass")["queue"].name == "celery"


def test_tls_agent_is_polled_with_the_configured_ca(limits, settings, tmp_path):
    cert, key = self_signed_cert(tmp_path)
    agent = Agent(make_backend("simulated", count=2, model="H200", seed=7), node="secure").start()
    node, _fake = limits("secure", url="https://placeholder")
    server = serve({"": (agent, agent_tokens.token_for(node))}, "127.0.0.1", 0, ssl_context=tls_context(cert, key))
    try:
        Node.objects.filter(pk=node.pk).update(agent_url=f"https://127.0.0.1:{server.server_address[1]}")
        untrusted = edge_poll()
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.failed["secure"]
        settings.AGENTS = {**settings.AGENTS, "CA_FILE": cert}
        report = edge_poll()
        assert report.answered == 1 and report.failed == {}
        assert Node.objects.get(pk=node.pk).gpus.count() == 2
    finally:
        server.shutdown()
        server.server_close()
        agent.stop()


def answer(sock):
    body = b'{"gpus": []}'
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def test_stalled_agents_hold_their_own_slot_only_until_their_deadline(limits):
    """Two slots for five agents: a dripping one, a TLS one that never finishes its handshake, and three that
    answer. The stalled two are cut off at the deadline each, side by side (the second was reached while the
    first still held its slot: one deadline for both, never two); the others answer in the slots left."""
    dripping = threading.Event()
    cut_off = threading.Event()
    reached_while_dripping = []

    def drip_until_cut_off(sock):
        dripping.set()
        try:
            drip(sock)
        except OSError:
            pass
        finally:
            cut_off.set()

    def stall(sock):
        reached_while_dripping.append(dripping.is_set() and not cut_off.is_set())
        time.sleep(5)

    limits("drip", drip_until_cut_off)
    _node, silent = limits("handshake", stall)
    Node.objects.filter(name="handshake").update(agent_url=silent.url.replace("http://", "https://"))
    for i in range(3):
        limits(f"good-{i}", answer)
    report = poll_agents(Node.objects.filter(cluster__name="edge").prefetch_related("gpus"), workers=2)
    assert report.failed == {"drip": "no answer within 1 s", "handshake": "no answer within 1 s"}
    assert report.answered == 3
    assert reached_while_dripping == [True]


def test_an_agent_url_that_cannot_be_requested_fails_its_node_only(limits):
    """A port out of range or a path outside Latin-1 (stored before registration checked it, or by hand) is that
    node's poll error; the other agents of the cycle are polled."""
    limits("good", answer)
    node, fake = limits("bad-port", answer)
    Node.objects.filter(pk=node.pk).update(agent_url="http://127.0.0.1:99999")
    node, _fake = limits("bad-path", answer)
    Node.objects.filter(pk=node.pk).update(agent_url=f"{fake.url}/агент")
    report = edge_poll()
    assert report.answered == 1
    assert set(report.failed) == {"bad-port", "bad-path"}
    assert all("cannot be requested" in error for error in report.failed.values())
