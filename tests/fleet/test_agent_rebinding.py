"""DNS rebinding: an agent registers under a host name that resolves inside the agent networks, then points the
name elsewhere. Every poll resolves the name once, checks what it got as registration does and connects only
there: a name now outside the networks is a failed poll with the reason, and the address it points to is never
contacted (a listening socket there proves it). The Host header and the TLS server name stay the URL's.

The resolver is ``socket.getaddrinfo`` answering for one made-up name as the test says (DNS itself is not what
is under test); the agents, the registration API and the poller are the real ones."""

import shutil
import socket
import subprocess
from types import SimpleNamespace

import pytest

from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import poll_agents
from fleet.models import Cluster, Node
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.server import serve, tls_context
from tests.fleet.raw_agent import RawAgent

pytestmark = pytest.mark.django_db(transaction=True)

HOST = "agent.rebinding.test"
#: The agent networks are 127.0.0.1 alone; 127.0.0.2 is loopback too (so a test can listen there) but outside.
INSIDE, OUTSIDE = "127.0.0.1", "127.0.0.2"
SNAPSHOT = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"gpus": []}'


class Resolver:
    """``socket.getaddrinfo`` answering ``address`` for ``HOST`` (counting the questions), the truth otherwise."""

    def __init__(self, monkeypatch):
        self.address, self.asked = INSIDE, 0
        real = socket.getaddrinfo

        def getaddrinfo(host, port, *args, **kwargs):
            if host != HOST:
                return real(host, port, *args, **kwargs)
            self.asked += 1
            return real(self.address, port, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def edge(settings, monkeypatch, client):
    """A node whose agent registers through the API as ``{scheme}://HOST:{port}``, and the resolver."""
    settings.AGENTS = {**settings.AGENTS, "POLL_TIMEOUT_SECONDS": 2.0, "NETWORKS": [f"{INSIDE}/32"]}
    node = Node.objects.create(cluster=Cluster.objects.create(name="edge"), name="edge-n1", gpu_model="H200")
    token = agent_tokens.issue(node)
    resolver = Resolver(monkeypatch)

    def register(url):
        response = client.post("/api/agents/register/", {"node": node.name, "url": url},
                               content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 200, response.content

    return SimpleNamespace(node=node, token=token, resolver=resolver, register=register)


def poll(node):
    return poll_agents(Node.objects.filter(pk=node.pk).prefetch_related("gpus"))


def outside_listener(port):
    """A would-be agent at the address the name is pointed to, on the same port, answering a valid snapshot:
    were the poller to connect, its poll would even succeed."""
    return RawAgent(lambda sock: sock.sendall(SNAPSHOT), host=OUTSIDE, port=port)


def assert_refused_and_not_contacted(report, node, outside):
    reason = report.failed[node.name]
    assert "outside the agent networks" in reason and OUTSIDE in reason and HOST in reason, reason
    assert report.answered == 0
    assert Node.objects.get(pk=node.pk).last_poll_error == reason
    assert not outside.accepted.wait(0.5) and outside.requests == []  # no connection ever reached it


def test_a_name_pointed_outside_the_agent_networks_fails_the_poll_and_is_never_contacted(edge):
    inside = RawAgent(lambda sock: sock.sendall(SNAPSHOT), host=INSIDE)
    outside = outside_listener(inside.port)
    try:
        edge.register(f"http://{HOST}:{inside.port}")
        report = poll(edge.node)
        assert (report.answered, report.failed) == (1, {})
        assert f"Host: {HOST}:{inside.port}\r\n".encode() in inside.requests[0]  # the URL's host, not the address

        edge.resolver.address = OUTSIDE  # the name's owner points it elsewhere after registration
        asked = edge.resolver.asked
        assert_refused_and_not_contacted(poll(edge.node), edge.node, outside)
        assert edge.resolver.asked == asked + 1  # resolved once for the poll: checked and connected alike
        assert len(inside.requests) == 1
    finally:
        inside.close()
        outside.close()


def name_cert(directory) -> tuple[str, str]:
    """A self-signed certificate for ``HOST`` only (no IP address in it), made by ``openssl``."""
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.fail("the openssl command is needed to make a test certificate")
    cert, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", f"/CN={HOST}",
                    "-addext", f"subjectAltName=DNS:{HOST}"], check=True, capture_output=True, timeout=30)
    return cert, key


def test_tls_keeps_the_server_name_of_the_url_and_a_rebound_name_is_refused(edge, settings, tmp_path):
    cert, key = name_cert(tmp_path)
    settings.AGENTS = {**settings.AGENTS, "CA_FILE": cert}
    agent = Agent(make_backend("simulated", count=2, model="H200", seed=11), node=edge.node.name).start()
    server = serve({"": (agent, edge.token)}, INSIDE, 0, ssl_context=tls_context(cert, key))
    port = server.server_address[1]
    outside = outside_listener(port)
    try:
        edge.register(f"https://{HOST}:{port}")
        report = poll(edge.node)  # the certificate names HOST only: it verifies only if that is the server name
        assert (report.answered, report.failed) == (1, {})
        assert Node.objects.get(pk=edge.node.pk).gpus.count() == 2

        edge.resolver.address = OUTSIDE
        assert_refused_and_not_contacted(poll(edge.node), edge.node, outside)
    finally:
        server.shutdown()
        server.server_close()
        agent.stop()
        outside.close()
