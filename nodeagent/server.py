"""The agent's HTTP API.

* ``GET /v1/snapshot`` — JSON; ``GET /metrics`` — Prometheus text. Both need ``Authorization: Bearer <token>``.
* ``GET /healthz`` — unauthenticated liveness.

One server can host several agents under path prefixes (``/agents/<name>/v1/snapshot``): the benchmark
and the demo run many simulated agents in one process that way. Responses go out in one ``sendall`` with
``TCP_NODELAY`` set (small separate writes meet delayed ACKs and cost ~40 ms a request).

A slow or hostile client must not tie the agent up: each request (line, headers, body) must arrive within
``read_timeout`` seconds in all, an idle keep-alive connection is closed after the same time, at most
``max_connections`` connections are served at once (the next ones get a 503 and are closed), and any
malformed ``Authorization`` header (non-ASCII bytes included) gets a 401. With an ``ssl_context`` the
server speaks TLS; the handshake happens in the connection's own thread, bounded by ``read_timeout``.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import logging
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import metrics

logger = logging.getLogger(__name__)


class _DeadlineReader(io.RawIOBase):
    """Reads that all end by the handler's current deadline (a per-read timeout alone lets a client that
    sends one byte a second keep a thread for ever)."""

    def __init__(self, handler):
        super().__init__()
        self._handler, self._raw = handler, handler.connection.makefile("rb", buffering=0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self._handler.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("read deadline passed")
        self._handler.connection.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


_BUSY_BODY = json.dumps({"detail": "too many open connections"}).encode()
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(_BUSY_BODY)).encode() + b"\r\nConnection: close\r\n\r\n" + _BUSY_BODY)


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address, agents: dict, debug: bool = False, *, read_timeout: float = 10.0,
                 max_connections: int = 64, ssl_context: ssl.SSLContext | None = None):
        """``agents`` maps a path prefix ("" for a single agent, or "/agents/<name>") to (agent, token)."""
        self.agents = agents
        self.debug = debug
        self.read_timeout = read_timeout
        self.ssl_context = ssl_context
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, AgentRequestHandler)

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().server_bind()

    def process_request(self, request, client_address):
        """Refuse a connection over the cap at once, from the accept loop, without a thread."""
        if not self._slots.acquire(blocking=False):
            logger.warning("refusing %s: %s", client_address[0], "too many open connections")
            with contextlib.suppress(OSError):
                request.setblocking(False)
                request.send(BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request, client_address):
        if self.ssl_context is None:
            return super().finish_request(request, client_address)
        request.settimeout(self.read_timeout)  # bounds the whole handshake (CPython uses it as a deadline)
        try:
            tls = self.ssl_context.wrap_socket(request, server_side=True)
        except OSError as exc:  # ssl.SSLError and timeouts are OSErrors
            logger.debug("TLS handshake with %s failed: %s", client_address[0], exc)
            return None
        try:
            return super().finish_request(tls, client_address)
        finally:
            with contextlib.suppress(OSError):
                tls.shutdown(socket.SHUT_WR)
            tls.close()

    def handle_error(self, request, client_address):
        """A client that vanishes or talks garbage is routine for an agent: log it, keep serving."""
        logger.debug("connection from %s ended with an error", client_address[0], exc_info=True)

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
        self.deadline = time.monotonic() + self.server.read_timeout
        super().setup()
        self.rfile.close()  # the plain file object from StreamRequestHandler; reads go through the deadline
        self.rfile = io.BufferedReader(_DeadlineReader(self))
        with contextlib.suppress(OSError):  # a TLS socket on some platforms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self):
        """Each request has ``read_timeout`` seconds in all to arrive (an idle keep-alive wait too)."""
        self.deadline = time.monotonic() + self.server.read_timeout
        super().handle_one_request()

    def _send(self, status: int, body: bytes, content_type: str = "application/json"):
        head = (f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nServer: {self.server_version}\r\n\r\n").encode()
        self.connection.settimeout(self.server.read_timeout)  # a client that never reads is dropped too
        self.wfile.write(head + body)
        self.wfile.flush()

    def _json(self, status: int, payload) -> None:
        self._send(status, json.dumps(payload).encode())

    def _authorised(self, token: str) -> bool:
        """Compare bytes, never text: ``compare_digest`` raises on non-ASCII text, and a malformed header
        of any kind must be a 401, not a dropped connection."""
        header = self.headers.get("Authorization", "")
        if not isinstance(header, str):  # a header object for undecodable values
            return False
        scheme, _sep, given = header.partition(" ")
        given_bytes = given.strip().encode("utf-8", "surrogateescape")
        return scheme.lower() == "bearer" and bool(token) and hmac.compare_digest(given_bytes, token.encode())

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
            return self._send(200, metrics.render(snapshot).encode(), "text/plain; version=0.0.4; charset=utf-8")
        return self._json(200, snapshot)

    def do_POST(self):  # noqa: N802
        """Fault injection, only on a debug server (bound to loopback by the CLI)."""
        if not self.server.debug:
            return self._json(404, {"detail": "not found"})
        entry, path = self.server.route(self.path)
        if entry is None or path != "/fault":
            return self._json(404, {"detail": "not found"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            entry[0].backend.inject(body.get("kind", ""), int(body.get("gpu", 0)))
        except (ValueError, AttributeError, TypeError) as exc:
            return self._json(400, {"detail": str(exc)})
        return self._json(200, {"injected": body.get("kind"), "gpu": body.get("gpu", 0)})


def serve(agents: dict, host: str, port: int, debug: bool = False, *, read_timeout: float = 10.0,
          max_connections: int = 64, ssl_context: ssl.SSLContext | None = None) -> AgentHTTPServer:
    """Start a server in a background thread and return it (``server.server_address`` has the port)."""
    server = AgentHTTPServer((host, port), agents, debug=debug, read_timeout=read_timeout,
                             max_connections=max_connections, ssl_context=ssl_context)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"agent-http-{port}",
                     daemon=True).start()
    return server


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context for ``--tls-cert`` / ``--tls-key`` (TLS 1.2 at least)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context
