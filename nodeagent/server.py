"""The agent's HTTP API.

* ``GET /v1/snapshot`` — JSON; ``GET /metrics`` — Prometheus text. Both need ``Authorization: Bearer <token>``.
* ``GET /healthz`` — unauthenticated liveness.

One server can host several agents under path prefixes (``/agents/<name>/v1/snapshot``): the benchmark
and the demo run many simulated agents in one process that way. Responses go out in one ``sendall`` with
``TCP_NODELAY`` set (small separate writes meet delayed ACKs and cost ~40 ms a request).
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import metrics

logger = logging.getLogger(__name__)


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address, agents: dict, debug: bool = False):
        """``agents`` maps a path prefix ("" for a single agent, or "/agents/<name>") to (agent, token)."""
        self.agents = agents
        self.debug = debug
        super().__init__(address, AgentRequestHandler)

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().server_bind()

    def route(self, path: str):
        path = path.split("?", 1)[0]
        for prefix, entry in self.agents.items():
            if prefix and path.startswith(prefix + "/"):
                return entry, path[len(prefix):]
        return self.agents.get(""), path


class AgentRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpuportal-nodeagent"

    def log_message(self, fmt, *args):
        logger.debug("%s " + fmt, self.address_string(), *args)

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, status: int, body: bytes, content_type: str = "application/json"):
        head = (f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nServer: {self.server_version}\r\n\r\n").encode()
        self.wfile.write(head + body)
        self.wfile.flush()

    def _json(self, status: int, payload) -> None:
        self._send(status, json.dumps(payload).encode())

    def _authorised(self, token: str) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _sep, given = header.partition(" ")
        return scheme.lower() == "bearer" and bool(token) and hmac.compare_digest(given.strip(), token)

    def do_GET(self):  # noqa: N802 - http.server's naming
        entry, path = self.server.route(self.path)
        if entry is None:
            return self._json(404, {"detail": "no such agent"})
        agent, token = entry
        if path == "/healthz":
            return self._json(200, {"status": "ok", "node": agent.node})
        if path not in ("/v1/snapshot", "/metrics"):
            return self._json(404, {"detail": "not found"})
        if not self._authorised(token):
            return self._json(401, {"detail": "missing or wrong bearer token"})
        try:
            snapshot = agent.snapshot()
        except Exception as exc:  # the agent keeps serving whatever goes wrong in one read
            logger.exception("snapshot failed")
            return self._json(500, {"detail": f"snapshot failed: {exc}"})
        if path == "/metrics":
            return self._send(200, metrics.render(snapshot).encode(), "text/plain; version=0.0.4")
        return self._json(200, snapshot)

    def do_POST(self):  # noqa: N802
        """Fault injection, only on a debug server (bound to loopback by the CLI)."""
        if not self.server.debug:
            return self._json(404, {"detail": "not found"})
        entry, path = self.server.route(self.path)
        if entry is None or path != "/fault":
            return self._json(404, {"detail": "not found"})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            entry[0].backend.nvml.inject(body.get("kind", ""), int(body.get("gpu", 0)))
        except (ValueError, AttributeError, TypeError) as exc:
            return self._json(400, {"detail": str(exc)})
        return self._json(200, {"injected": body.get("kind"), "gpu": body.get("gpu", 0)})


def serve(agents: dict, host: str, port: int, debug: bool = False) -> AgentHTTPServer:
    """Start a server in a background thread and return it (``server.server_address`` has the port)."""
    server = AgentHTTPServer((host, port), agents, debug=debug)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"agent-http-{port}",
                     daemon=True).start()
    return server
