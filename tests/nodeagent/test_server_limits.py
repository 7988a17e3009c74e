"""The agent's HTTP server under hostile clients: garbled tokens, silent and dripping clients, too many
connections, TLS; and the CLI's safe defaults."""

import json
import socket
import ssl
import time
import urllib.request

import pytest

from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.cli import build_parser, main
from nodeagent.server import serve, tls_context
from tests.nodeagent.tls import self_signed_cert

TOKEN = "gpa_right-token"


@pytest.fixture
def agent():
    agent = Agent(make_backend("simulated", count=2, model="A100", seed=5), node="edge-1").start()
    servers = []

    def start(**options):
        server = serve({"": (agent, TOKEN)}, "127.0.0.1", 0, **options)
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
    agent.stop()


def exchange(port: int, raw: bytes, timeout: float = 5) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        return sock.recv(65536)


def snapshot_status(port: int, scheme: str = "http", context=None) -> int:
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}/v1/snapshot",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=5, context=context) as response:  # noqa: S310 - loopback
        json.loads(response.read())
        return response.status


@pytest.mark.parametrize("header", [
    b"Bearer \xff\xfe\xe9t\xc3\x28",  # not ASCII, not even UTF-8
    b"Bearer gpa_right-token\xe9",
    b"Bearer",
    b"Basic gpa_right-token",
    b"bearer  gpa_wrong \t",
])
def test_any_malformed_token_gets_401_and_the_agent_keeps_serving(agent, header):
    port = agent()
    answer = exchange(port, b"GET /v1/snapshot HTTP/1.1\r\nHost: x\r\nAuthorization: " + header + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 401"), answer[:80]
    assert b"missing or wrong bearer token" in answer
    assert snapshot_status(port) == 200


def test_silent_and_dripping_clients_are_dropped_after_the_read_timeout(agent):
    port = agent(read_timeout=0.5)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as silent:
        started = time.monotonic()
        assert silent.recv(100) == b""  # the agent closed the half-open connection
        assert time.monotonic() - started < 3

    with socket.create_connection(("127.0.0.1", port), timeout=5) as drip:
        started = time.monotonic()
        dropped = False
        for byte in b"GET /v1/snapshot HTTP/1.1\r\nHost: x\r\n":  # one byte every 0.1 s: each read is quick
            try:
                drip.sendall(bytes([byte]))
            except OSError:
                dropped = True
                break
            time.sleep(0.1)
            if time.monotonic() - started > 1.5:
                break
        if not dropped:
            drip.settimeout(3)
            try:
                dropped = drip.recv(100) == b""
            except ConnectionResetError:
                dropped = True
        assert dropped  # the request did not arrive within 0.5 s in all
    assert snapshot_status(port) == 200


def test_connections_over_the_cap_get_503_and_slots_come_back(agent):
    port = agent(max_connections=2, read_timeout=5)
    holders = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        answer = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503") and b"too many open connections" in answer
    finally:
        for sock in holders:
            sock.close()
    for _ in range(50):  # the holders' threads see the close and give their slots back
        answer = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        if answer.startswith(b"HTTP/1.1 200"):
            break
        time.sleep(0.05)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:80]


def test_tls_with_a_self_signed_certificate(agent, tmp_path):
    cert, key = self_signed_cert(tmp_path)
    port = agent(ssl_context=tls_context(cert, key), read_timeout=1)
    trusting = ssl.create_default_context(cafile=cert)
    assert snapshot_status(port, "https", trusting) == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        snapshot_status(port, "https", ssl.create_default_context())
    try:
        plain = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    except ConnectionResetError:
        plain = b""
    assert b"HTTP/1.1 200" not in plain  # no plain HTTP on a TLS agent
    assert snapshot_status(port, "https", trusting) == 200  # still serving


def test_cli_binds_to_loopback_unless_told_and_wants_both_tls_files(tmp_path, capsys):
    assert build_parser().parse_args(["--token-file", "t"]).bind == "127.0.0.1"
    assert build_parser().parse_args(["--token-file", "t", "--bind", "10.0.0.5"]).bind == "10.0.0.5"
    assert build_parser().parse_args(["--token-file", "t", "--host", "0.0.0.0"]).bind == "0.0.0.0"  # noqa: S104
    token = tmp_path / "token"
    token.write_text("tok")
    assert main(["--token-file", str(token), "--tls-cert", str(tmp_path / "cert.pem"), "--simulate", "1"]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert main(["--token-file", str(token), "--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"]) == 2
    assert "cannot load the TLS certificate" in capsys.readouterr().err
