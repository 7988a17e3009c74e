"""Polling node agents and turning their snapshots into inventory, readings and health.

``poll_agents()`` fetches every agent's ``/v1/snapshot`` concurrently (``_PollLoop``: one thread, non-blocking
sockets on one selector, at most ``POLL_WORKERS`` at once), then applies all results in one transaction:
readings in bulk, inventory changes, health steps with a ``NodeEvent`` for each change, and hardware-fault
evidence on the running jobs that are hit.

One bad agent must not stall anyone, so each fetch has a *total* deadline (``POLL_TIMEOUT_SECONDS`` for
connecting, TLS, request and the whole answer: an agent dripping a byte a second is cut off like a silent
one) and a size cap (``MAX_SNAPSHOT_BYTES``); cycles never overlap (an advisory lock on PostgreSQL, a
process lock everywhere): a cycle that finds another one running returns at once with ``ran`` False. The
Celery task runs on its own queue (``agents``, see ``CELERY_TASK_ROUTES``).

Each poll resolves the agent's host once, checks every address as registration does (``fleet.agents.networks``:
inside ``AGENTS["NETWORKS"]``, never link-local) and connects only to an address it checked, so a host name
pointed elsewhere after registration is a failed poll with the reason, never a connection.

Nodes of the simulated cluster (no ``agent_url``) are read in-process through the agent's own code on a
simulated device of their model's vendor (NVML for NVIDIA, amdsmi for AMD, npu-smi for Ascend…), so the demo
exercises the same path. A node of a Slurm cluster without an agent is not polled at all: its cluster's own
inventory says what it holds and whether it is up, and the portal shows no readings it did not take (node agents
stay optional there; where one runs, its readings add utilisation and XID/ECC health).

Each device of a snapshot says its ``vendor`` and catalogue ``model`` (an agent from before vendors were
reported says neither: it read NVML, so its devices are NVIDIA's, of the node's model). A model the catalogue
lacks enters it (``catalogue.note_model``) with its vendor and memory the first time an agent reports it.
"""

from __future__ import annotations

import collections
import errno
import http.client
import io
import ipaddress
import json
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from fleet import catalogue, health, occupancy, signals
from fleet.agents import networks
from fleet.agents import tokens as agent_tokens
from fleet.models import GPU, AcceleratorModel, ExecutorKind, FaultKind, GpuReading, Node, NodeEvent, NodeReading
from fleet.vendors import DEFAULT_VENDOR, VENDORS, vendor_or_default
from gpuportal.observability import telemetry
from gpuportal.storage.db import bulk_insert, update_grouped
from gpuportal.text import phrases
from gpuportal.text.phrases import Clauses, Phrase
from nodeagent.agent import Agent
from nodeagent.backends import make_backend
from nodeagent.system import SimulatedHostSampler

logger = logging.getLogger(__name__)


class PollError(Exception):
    """The agent did not give a usable snapshot (refused, timed out, unauthorised, garbage)."""


@dataclass
class PollResult:
    node_id: int
    snapshot: dict | None = None
    error: str = ""
    seconds: float = 0.0


@dataclass
class PollReport:
    polled: int = 0
    answered: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    fetch_seconds: float = 0.0
    store_seconds: float = 0.0
    #: False when another cycle was running: this one returned at once and polled nothing.
    ran: bool = True


class _FakeSocket:
    """What ``http.client.HTTPResponse`` reads a complete answer from: the bytes already received."""

    def __init__(self, data: bytes):
        self._data = data

    def makefile(self, *args, **kwargs):
        return io.BytesIO(self._data)


@dataclass
class _Fetch:
    """One agent's fetch in the poll loop: where it stands, what is left to send, what has arrived."""

    node_id: int
    host: str
    port: int
    request: bytes
    tls: bool
    addresses: list
    started: float = 0.0
    deadline: float = 0.0
    sock: socket.socket | None = None
    stage: str = "connect"  # connect, handshake, send, receive
    error: OSError | None = None
    received: bytearray = field(default_factory=bytearray)
    header_end: int = -1
    head: http.client.HTTPResponse | None = None


class _Done(Exception):  # noqa: N818 - a signal inside the loop, not an error
    """Raised inside the loop when a fetch has ended, with its snapshot or its PollError."""

    def __init__(self, outcome):
        super().__init__()
        self.outcome = outcome


_HEADER_LIMIT = 64 * 1024  # as http.client's own limit on a header line


class _PollLoop:
    """Every agent's fetch in one thread, over one selector.

    Each fetch has its own *total* deadline, counted from the moment it gets one of the ``workers`` slots, for
    connecting, TLS, request and the whole answer: an agent dripping a byte a second is cut off like a silent one.
    The loop keeps the deadlines itself: it waits in ``select`` until the earliest one and ends every fetch whose
    deadline has passed. Sockets stay non-blocking, so no read or write ever waits; the thread pool the poller had
    before spent more on a timeout per read, a thread switch per answer and the interpreter lock among 64 threads
    than on the answers themselves (see docs/accelerators.md, "Benchmark").

    The answer is read until ``Content-Length`` bytes of body or the end of the connection (the request says
    ``Connection: close``), then parsed by ``http.client`` as it would have parsed it from the socket."""

    def __init__(self, timeout: float, max_bytes: int, workers: int, context: ssl.SSLContext | None):
        self.timeout, self.max_bytes, self.workers, self.context = timeout, max_bytes, workers, context
        self.selector = selectors.DefaultSelector()
        self.active: dict[int, _Fetch] = {}  # by id()
        self.outcomes: dict[int, tuple[dict | PollError, float]] = {}

    def run(self, fetches: list[_Fetch]) -> dict[int, tuple[dict | PollError, float]]:
        waiting = collections.deque(fetches)
        try:
            while waiting or self.active:
                while waiting and len(self.active) < self.workers:
                    self._start(waiting.popleft())
                if not self.active:
                    continue
                now = time.monotonic()
                wait = max(min(f.deadline for f in self.active.values()) - now, 0)
                for key, _events in self.selector.select(wait):
                    fetch = key.data
                    if id(fetch) in self.active:
                        self._guarded(fetch, self._advance)
                now = time.monotonic()
                for fetch in [f for f in self.active.values() if f.deadline <= now]:
                    self._end(fetch, PollError(f"no answer within {self.timeout:g} s"))
        finally:
            for fetch in list(self.active.values()):
                self._end(fetch, PollError("the poll cycle ended"))
            self.selector.close()
        return self.outcomes

    # -- the steps of one fetch ------------------------------------------------------------------------
    def _start(self, fetch: _Fetch) -> None:
        fetch.started = time.monotonic()
        fetch.deadline = fetch.started + self.timeout
        self.active[id(fetch)] = fetch
        self._guarded(fetch, self._connect_next)

    def _guarded(self, fetch: _Fetch, step) -> None:
        """Run one step of ``fetch``; any way it ends is recorded as its outcome."""
        try:
            step(fetch)
        except _Done as done:
            self._end(fetch, done.outcome)
        except ssl.SSLError as exc:  # before OSError: an SSLError is one
            self._end(fetch, PollError(f"cannot reach the agent: {exc}"))
        except OSError as exc:
            self._end(fetch, PollError(f"cannot reach the agent: {exc}"))

    def _connect_next(self, fetch: _Fetch) -> None:
        """Connect to the next of the addresses checked for this poll (as ``socket.create_connection`` tries
        every address of a name)."""
        while fetch.addresses:
            address = fetch.addresses.pop(0)
            sock = socket.socket(socket.AF_INET6 if address.version == 6 else socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            code = sock.connect_ex((str(address), fetch.port))
            if code in (0, errno.EINPROGRESS):
                fetch.sock, fetch.stage = sock, "connect"
                self.selector.register(sock, selectors.EVENT_WRITE, fetch)
                return
            sock.close()
            fetch.error = OSError(code, os.strerror(code))
        raise fetch.error or OSError("no address to connect to")

    def _advance(self, fetch: _Fetch) -> None:
        if fetch.stage == "connect":
            code = fetch.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                fetch.error = OSError(code, os.strerror(code))
                self._close(fetch)
                return self._connect_next(fetch)
            fetch.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if fetch.tls:
                self.selector.unregister(fetch.sock)  # wrapping takes the descriptor over
                fetch.sock = self.context.wrap_socket(fetch.sock, server_hostname=fetch.host,
                                                      do_handshake_on_connect=False)
                self.selector.register(fetch.sock, selectors.EVENT_WRITE, fetch)
                fetch.stage = "handshake"
            else:
                fetch.stage = "send"
        if fetch.stage == "handshake":
            try:
                fetch.sock.do_handshake()
            except ssl.SSLWantReadError:
                return self.selector.modify(fetch.sock, selectors.EVENT_READ, fetch)
            except ssl.SSLWantWriteError:
                return self.selector.modify(fetch.sock, selectors.EVENT_WRITE, fetch)
            fetch.stage = "send"
        if fetch.stage == "send":
            try:
                sent = fetch.sock.send(fetch.request)
            except (BlockingIOError, ssl.SSLWantWriteError):
                return self.selector.modify(fetch.sock, selectors.EVENT_WRITE, fetch)
            fetch.request = fetch.request[sent:]
            if fetch.request:
                return self.selector.modify(fetch.sock, selectors.EVENT_WRITE, fetch)
            fetch.stage = "receive"
            return self.selector.modify(fetch.sock, selectors.EVENT_READ, fetch)
        self._receive(fetch)

    def _receive(self, fetch: _Fetch) -> None:
        while True:
            try:
                chunk = fetch.sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError):
                # back to waiting for data: a TLS read that wanted to write (a renegotiation, a key update)
                # switched to writable, which is always ready and would spin until the deadline
                return self.selector.modify(fetch.sock, selectors.EVENT_READ, fetch)
            except ssl.SSLWantWriteError:
                return self.selector.modify(fetch.sock, selectors.EVENT_WRITE, fetch)
            if not chunk:
                raise _Done(self._parse(fetch))
            fetch.received += chunk
            self._check_size(fetch)
            if fetch.head and fetch.head.length is not None and \
                    len(fetch.received) - fetch.header_end >= fetch.head.length:
                raise _Done(self._parse(fetch))
            if not (fetch.tls and fetch.sock.pending()):
                return

    def _check_size(self, fetch: _Fetch) -> None:
        """Refuse an answer over ``max_bytes`` as soon as it says so or grows past it."""
        if fetch.header_end < 0:
            end = fetch.received.find(b"\r\n\r\n")
            if end < 0:
                if len(fetch.received) > _HEADER_LIMIT:
                    raise _Done(PollError("bad HTTP answer: headers longer than 64 KiB"))
                return
            fetch.header_end = end + 4
            head = http.client.HTTPResponse(_FakeSocket(bytes(fetch.received[:fetch.header_end])))
            try:
                head.begin()
            except (http.client.HTTPException, ValueError) as exc:
                raise _Done(PollError(f"bad HTTP answer: {exc!r}")) from exc
            fetch.head = head
            if head.length is not None and head.length > self.max_bytes:
                raise _Done(PollError(self._too_big()))
        framing = 0 if fetch.head.length is not None else 1024  # a chunked answer's framing may add a little
        if len(fetch.received) - fetch.header_end > self.max_bytes + framing:
            raise _Done(PollError(self._too_big()))

    def _too_big(self) -> str:
        return f"the answer is larger than the limit of {self.max_bytes} bytes (AGENTS['MAX_SNAPSHOT_BYTES'])"

    def _parse(self, fetch: _Fetch) -> dict | PollError:
        """The snapshot in the answer received so far, or why there is none. An answer with a length whose
        head was parsed already is cut from the bytes; any other goes through ``http.client`` whole."""
        head = fetch.head
        if head is not None and head.length is not None and len(fetch.received) - fetch.header_end >= head.length:
            response, body = head, bytes(fetch.received[fetch.header_end:fetch.header_end + head.length])
        else:
            response = http.client.HTTPResponse(_FakeSocket(bytes(fetch.received)))
            try:
                response.begin()
                body = response.read()
            except http.client.HTTPException as exc:
                return PollError(f"bad HTTP answer: {exc!r}")
            except OSError as exc:  # http.client's RemoteDisconnected: the agent hung up without an answer
                return PollError(f"cannot reach the agent: {exc}")
        if len(body) > self.max_bytes:
            return PollError(self._too_big())
        if response.status == 401:
            return PollError("the agent refused the token (401); issue a new token and restart the agent")
        if response.status != 200:
            return PollError(f"HTTP {response.status}: {body[:200].decode(errors='replace')}")
        try:
            return validate_snapshot(json.loads(body))
        except (ValueError, UnicodeDecodeError) as exc:
            return PollError(f"invalid snapshot: {exc}")
        except RecursionError:  # nested deeper than the parser goes: one agent's answer, not the cycle's end
            return PollError("invalid snapshot: nested too deeply")

    def _close(self, fetch: _Fetch) -> None:
        if fetch.sock is not None:
            with suppress(KeyError, ValueError):
                self.selector.unregister(fetch.sock)
            fetch.sock.close()
            fetch.sock = None

    def _end(self, fetch: _Fetch, outcome) -> None:
        self._close(fetch)
        del self.active[id(fetch)]
        self.outcomes[fetch.node_id] = (outcome, time.monotonic() - fetch.started)


@lru_cache(maxsize=4)
def _tls_context(ca_file: str) -> ssl.SSLContext:
    """One context per CA bundle: loading the certificates for every poll of every agent would cost more
    than the poll."""
    return ssl.create_default_context(cafile=ca_file or None)


def _prepare(node: Node, addresses: dict) -> _Fetch:
    """The fetch of ``node``'s snapshot, to the addresses checked for its host in this cycle; PollError when the
    URL or its host may not be polled.

    ``http.client`` would resolve the host name again as it connects, and could be told another address than
    the one just checked (DNS rebinding); the loop connects to the checked addresses only, while the Host header
    and the TLS server name (and so the certificate check) still come from the URL's host."""
    parts = urlsplit(node.agent_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PollError(f"agent URL {node.agent_url!r} is not http(s)")
    checked = addresses[parts.hostname]
    if isinstance(checked, PollError):
        raise checked
    try:  # a URL this cannot send (a bad port, a path outside Latin-1) fails its own node, never the cycle
        port = parts.port or (443 if parts.scheme == "https" else 80)
        netloc = parts.netloc.rpartition("@")[2]
        if not netloc.isascii():  # a name outside ASCII travels as IDNA, as http.client sends it
            netloc = parts.hostname.encode("idna").decode("ascii") + (f":{parts.port}" if parts.port else "")
        request = (f"GET {parts.path.rstrip('/')}/v1/snapshot HTTP/1.1\r\nHost: {netloc}\r\n"
                   f"Authorization: Bearer {agent_tokens.token_for(node)}\r\nAccept: application/json\r\n"
                   "Accept-Encoding: identity\r\nConnection: close\r\n\r\n").encode("latin-1")
    except (ValueError, UnicodeError) as exc:
        raise PollError(f"agent URL {node.agent_url!r} cannot be requested: {exc}") from exc
    return _Fetch(node.pk, parts.hostname, port, request, parts.scheme == "https", list(checked))


def fetch_snapshots(nodes: list[Node], timeout: float, workers: int,
                    max_bytes: int | None = None) -> list[PollResult]:
    """GET every node's snapshot, each within ``timeout`` seconds in all and at most ``max_bytes`` of body,
    at most ``workers`` at once.

    Both limits exist so that one broken or hostile agent costs one slot for ``timeout`` seconds and a bounded
    amount of memory, never a worker process: the cycle's length stays predictable. Each distinct host is
    resolved once for the cycle, names in a small thread pool (a resolver may be slow), literals at once; a name
    still unresolved after ``timeout`` fails its agents, so a cycle lasts at most two timeouts."""
    max_bytes = max_bytes or settings.AGENTS["MAX_SNAPSHOT_BYTES"]
    hosts = {urlsplit(n.agent_url).hostname or "" for n in nodes}
    allowed = networks.agent_networks()

    def check(host: str) -> tuple | PollError:
        try:
            return checked_addresses(host, allowed)
        except PollError as exc:
            return exc

    names = [h for h in hosts if not _is_literal(h)]
    addresses = {h: check(h) for h in hosts if _is_literal(h)}
    if names:  # a resolver that does not answer within ``timeout`` fails its hosts' agents, not the cycle
        pool = ThreadPoolExecutor(max_workers=min(workers, len(names)))
        lookups = {pool.submit(check, name): name for name in names}
        done, _late = wait(lookups, timeout=timeout)
        pool.shutdown(wait=False, cancel_futures=True)
        for future, name in lookups.items():
            addresses[name] = future.result() if future in done else PollError(
                f"the agent's host {name} did not resolve within {timeout:g} s")
    results, fetches = [], []
    for node in nodes:
        try:
            fetches.append(_prepare(node, addresses))
        except PollError as exc:
            results.append(PollResult(node.pk, error=str(exc)))
    context = _tls_context(settings.AGENTS.get("CA_FILE", "")) if any(f.tls for f in fetches) else None
    outcomes = _PollLoop(timeout, max_bytes, workers, context).run(fetches)
    for node_id, (outcome, seconds) in outcomes.items():
        if isinstance(outcome, PollError):
            results.append(PollResult(node_id, error=str(outcome), seconds=seconds))
        else:
            results.append(PollResult(node_id, snapshot=outcome, seconds=seconds))
    return results


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def checked_addresses(host: str, allowed: list | None = None) -> tuple:
    """The addresses of the agent's host, resolved once for this poll, each checked as registration checks
    them (``networks.address_problem``); PollError, before anything is contacted, when one may not be.

    Registration checked the name once, but its owner may point it elsewhere since (the metadata service, the
    portal's own host): a poll connects only to what it checked now."""
    addresses = networks.resolve(host)
    if not addresses:
        raise PollError(f"the agent's host {host} does not resolve")
    allowed = networks.agent_networks() if allowed is None else allowed
    for address in addresses:
        if problem := networks.address_problem(address, allowed):
            raise PollError(f"not polled: the agent's host {host} resolves to {address}. {problem}")
    return tuple(addresses)


def validate_snapshot(data) -> dict:
    """Accept only the shape the agent documents; anything else is garbage, reported as a missed poll."""
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise ValueError("expected an object with a list of gpus")
    for gpu in data["gpus"]:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("index"), int):
            raise ValueError("every gpu needs an integer index")
        if gpu.get("state") not in ("ok", "lost"):
            raise ValueError(f"gpu {gpu.get('index')}: unknown state {gpu.get('state')!r}")
        for key in ("vendor", "model"):
            if gpu.get(key) is not None and not isinstance(gpu[key], str):
                raise ValueError(f"gpu {gpu.get('index')}: {key} must be a string")
    if not isinstance(data.get("errors", []), list) or not isinstance(data.get("host", {}), dict):
        raise ValueError("errors must be a list and host an object")
    if data.get("vendor") is not None and not isinstance(data["vendor"], str):
        raise ValueError("vendor must be a string")
    return data


# -- the simulated cluster's agents, in-process ---------------------------------------------------------
_SIMULATED: dict[int, object] = {}


def _simulated_snapshot(node: Node, busy: set[int]) -> dict:
    agent = _SIMULATED.get(node.pk)
    if agent is None:
        count = max(len(node.gpus.all()), 1)
        # the agent backend that simulates the vendor's devices (``Vendor.agent_backend``)
        backend = make_backend(vendor_or_default(catalogue.vendor_of(node.gpu_model)).agent_backend,
                               simulate=count, model=node.gpu_model, seed=node.pk)
        # InfiniBand counters only where the node's network is InfiniBand (the simulated fleet names its network
        # domains "ib-…"); elsewhere the agent reports none, as a real one does on a node without IB ports
        host = SimulatedHostSampler(seed=node.pk, infiniband=node.network_domain.startswith("ib"))
        agent = Agent(backend, node=node.name, host=host).start()
        _SIMULATED[node.pk] = agent
    devices = agent.backend.simulation
    for index in range(devices.count):
        devices.set_load(index, 88 if index in busy else 0)
    agent.host.busy = len(busy) / max(devices.count, 1)
    return agent.snapshot()


def collect(nodes: list[Node], workers: int | None = None, timeout: float | None = None) -> list[PollResult]:
    workers = workers or settings.AGENTS["POLL_WORKERS"]
    timeout = timeout or settings.AGENTS["POLL_TIMEOUT_SECONDS"]
    simulated = [n for n in nodes if not n.agent_url]
    busy = occupancy.held_gpus() if simulated else {}
    results = []
    for node in simulated:
        started = time.monotonic()
        snapshot = _simulated_snapshot(node, busy.get(node.pk, set()))
        results.append(PollResult(node.pk, snapshot=snapshot, seconds=time.monotonic() - started))
    remote = [n for n in nodes if n.agent_url]
    if remote:
        results += fetch_snapshots(remote, timeout, workers)
    return results


# -- applying results ---------------------------------------------------------------------------------
def _vendor(snapshot: dict, device: dict | None = None) -> str:
    """The device's vendor; an agent that does not say is the default vendor's (it predates the others)."""
    return str((device or {}).get("vendor") or snapshot.get("vendor") or DEFAULT_VENDOR)


def _gpu_observation(gpu: GPU, reported: dict | None, new_errors: list[dict],
                     vendor: str = DEFAULT_VENDOR) -> health.Observation:
    critical = [e["message"] for e in new_errors if e.get("critical")]  # the agent's words, as it wrote them
    if reported is None:
        return health.Observation(critical=Phrase(gettext_noop("GPU %(i)d is missing from the agent's inventory."),
                                                  {"i": gpu.index}))
    if reported.get("state") == "lost":
        detail = reported.get("error") or Phrase(gettext_noop("no answer"))
        xid = Phrase(gettext_noop(" after XID %(x)s"), {"x": reported["last_xid"]}) if reported.get("last_xid") else ""
        through = (VENDORS[vendor].agent_reads_through if vendor in VENDORS
                   else Phrase(gettext_noop("its vendor's tool")))
        lost = Phrase(gettext_noop("GPU %(i)d stopped answering %(through)s%(xid)s (%(detail)s)."), {
            "i": gpu.index, "through": through, "xid": xid, "detail": detail})
        return health.Observation(critical=Clauses([lost, *(f"{m}." for m in critical)], sentences=True))
    dbe = reported.get("ecc_volatile_dbe") or 0
    if dbe > gpu.ecc_dbe:
        critical.append(Phrase(gettext_noop("Double-bit ECC error on GPU %(i)d (volatile count %(a)d -> %(b)d)."), {
            "i": gpu.index, "a": gpu.ecc_dbe, "b": dbe}))
    if critical:
        return health.Observation(critical=Phrase(gettext_noop("GPU %(i)d: %(what)s"), {
            "i": gpu.index, "what": Clauses(critical, sentences=True)}))
    soft = []
    if (reported.get("ecc_volatile_sbe") or 0) > gpu.ecc_sbe:
        soft.append(Phrase(gettext_noop("single-bit ECC errors rose to %(n)s"), {"n": reported["ecc_volatile_sbe"]}))
    if reported.get("remapped_rows_pending"):
        soft.append(Phrase(gettext_noop("row remapping pending (reset the GPU when idle)")))
    return health.Observation(soft=Phrase(gettext_noop("GPU %(i)d: %(what)s."), {
        "i": gpu.index, "what": Clauses(soft)}) if soft else "")


def apply_results(results: list[PollResult], nodes: list[Node], now=None) -> PollReport:
    now = now or timezone.now()
    k_missed = settings.AGENTS["MISSED_POLLS_UNHEALTHY"]
    m_good = settings.AGENTS["GOOD_POLLS_HEALTHY"]
    by_id = {n.pk: n for n in nodes}
    report = PollReport(polled=len(results))
    gpu_readings, node_readings, node_events = [], [], []
    changed_gpus: list[GPU] = []  # health or error counters changed
    moved_gpus: list[GPU] = []  # inventory changed (uuid, memory): rare
    new_gpus: list[GPU] = []
    faults: list[tuple[str, str, int, int | None, str]] = []  # (category, message, node id, gpu id, evidence)
    reported_models: dict[str, tuple[str, int]] = {}  # model -> (vendor, memory MiB), for the catalogue

    for result in results:
        node = by_id[result.node_id]
        snapshot = result.snapshot
        if snapshot is None:
            report.failed[node.name] = result.error
            node.last_poll_error = result.error
            obs = health.Observation(answered=False, error=result.error)
        else:
            report.answered += 1
            node.last_seen, node.last_poll_error = now, ""
            node.agent_version = str(snapshot.get("agent_version") or "")[:32]
            node.driver_version = str(snapshot.get("driver_version") or "")[:32]
            node.cuda_version = str(snapshot.get("cuda_version") or "")[:16]
            obs = health.Observation()
            host = snapshot.get("host") or {}
            if isinstance(host.get("cpu_count"), int) and isinstance(host.get("memory_total_mb"), int):
                node.cpu_milli, node.memory_mib = host["cpu_count"] * 1000, host["memory_total_mb"]
            node_readings.append(NodeReading(node=node, at=now, **{k: host.get(k) for k in (
                "cpu_percent", "memory_percent", "net_rx_bytes_per_s", "net_tx_bytes_per_s", "ib_rx_bytes_per_s",
                "ib_tx_bytes_per_s", "disk_read_bytes_per_s")}))
            new_errors = [e for e in snapshot.get("errors", []) if isinstance(e, dict)
                          and float(e.get("time") or 0) > node.last_error_time]
            if new_errors:
                node.last_error_time = max(float(e.get("time") or 0) for e in new_errors)
            reported = {g["index"]: g for g in snapshot["gpus"]}
            for info in reported.values():
                if info.get("state") == "ok":
                    model = str(info.get("model") or node.gpu_model)
                    reported_models.setdefault(model, (_vendor(snapshot, info), info.get("memory_total_mb") or 0))
            existing = {g.index: g for g in node.gpus.all()}
            for index, info in reported.items():
                if index not in existing and info.get("state") == "ok" and info.get("uuid"):
                    new_gpus.append(GPU(node=node, index=index, uuid=info["uuid"], model=node.gpu_model,
                                        memory_mb=info.get("memory_total_mb") or 0))
            for gpu in existing.values():
                info = reported.get(gpu.index)
                gpu_obs = _gpu_observation(gpu, info, [e for e in new_errors if e.get("gpu_index") == gpu.index],
                                           _vendor(snapshot, info))
                before = (gpu.health, gpu.good_polls, gpu.ecc_dbe, gpu.ecc_sbe, gpu.retired_pages, gpu.last_xid)
                identity = (gpu.uuid, gpu.memory_mb)
                stepped = health.step(gpu.health, 0, gpu.good_polls, gpu_obs, k_missed, m_good)
                if stepped.changed:
                    node_events.append(NodeEvent(node=node, gpu=gpu, at=now, kind=NodeEvent.Kind.HEALTH,
                                                 from_state=gpu.health, to_state=stepped.state, reason=stepped.reason,
                                                 data={"gpu": gpu.index, "reading": info,
                                                       **phrases.data_of(stepped.reason)}))
                    report.changes.append(f"{node.name}/gpu{gpu.index}: {gpu.health} -> {stepped.state}")
                    if stepped.state == health.UNHEALTHY:
                        faults.append((FaultKind.GPU_FAULT, stepped.reason, node.pk, gpu.pk, gpu.uuid))
                gpu.health, gpu.good_polls = stepped.state, stepped.good
                if info and info.get("state") == "ok":
                    gpu.ecc_dbe = info.get("ecc_volatile_dbe") or 0
                    gpu.ecc_sbe = info.get("ecc_volatile_sbe") or 0
                    gpu.retired_pages = info.get("retired_pages_dbe") or 0
                    gpu.memory_mb = info.get("memory_total_mb") or gpu.memory_mb
                    gpu.uuid = info.get("uuid") or gpu.uuid
                    gpu_readings.append(GpuReading(
                        gpu=gpu, at=now, utilization_pct=info.get("utilization_gpu"),
                        memory_used_mb=info.get("memory_used_mb"), temperature_c=info.get("temperature_c"),
                        power_w=info.get("power_w")))
                if info and info.get("last_xid"):
                    gpu.last_xid = info["last_xid"]
                if (gpu.health, gpu.good_polls, gpu.ecc_dbe, gpu.ecc_sbe, gpu.retired_pages, gpu.last_xid) != before:
                    changed_gpus.append(gpu)
                if (gpu.uuid, gpu.memory_mb) != identity:
                    moved_gpus.append(gpu)
        stepped = health.step(node.health, node.missed_polls, node.good_polls, obs, k_missed, m_good)
        if stepped.changed:
            node_events.append(NodeEvent(node=node, at=now, kind=NodeEvent.Kind.HEALTH, from_state=node.health,
                                         to_state=stepped.state, reason=stepped.reason,
                                         data={**({"error": result.error} if result.error else {}),
                                               **phrases.data_of(stepped.reason)}))
            report.changes.append(f"{node.name}: {node.health} -> {stepped.state}")
            if stepped.state == health.UNHEALTHY:
                faults.append((FaultKind.NODE_FAULT, stepped.reason, node.pk, None, result.error))
        node.health, node.missed_polls, node.good_polls = stepped.state, stepped.missed, stepped.good

    with transaction.atomic():
        update_grouped(Node, nodes, ["health", "missed_polls", "good_polls", "last_seen", "last_poll_error",
                                     "agent_version", "driver_version", "cuda_version", "last_error_time",
                                     "cpu_milli", "memory_mib"])
        GPU.objects.bulk_create(new_gpus)
        update_grouped(GPU, changed_gpus, ["health", "good_polls", "ecc_dbe", "ecc_sbe", "retired_pages", "last_xid"])
        GPU.objects.bulk_update(moved_gpus, ["uuid", "memory_mb"], batch_size=500)
        bulk_insert(GpuReading, gpu_readings, batch_size=5000)  # COPY on PostgreSQL: nobody needs their ids
        bulk_insert(NodeReading, node_readings, batch_size=5000)
        NodeEvent.objects.bulk_create(node_events)
        _note_models(reported_models)
        for category, reason, node_id, gpu_id, evidence in faults:
            signals.hardware_fault.send(sender=Node, category=category, reason=reason, node=by_id[node_id],
                                          gpu_id=gpu_id, at=now, evidence=evidence)
    return report


def _note_models(reported: dict[str, tuple[str, int]]) -> None:
    """Enter the models the agents reported that the catalogue lacks (one query when it has them all)."""
    if not reported:
        return
    known = set(AcceleratorModel.objects.filter(name__in=list(reported)).values_list("name", flat=True))
    for model, (vendor, memory_mb) in reported.items():
        if model not in known:
            catalogue.note_model(model[:64], vendor, int(memory_mb) if isinstance(memory_mb, int) else 0)


#: Key of the PostgreSQL advisory lock that keeps poll cycles from overlapping ("GPUPOLL").
POLL_LOCK_KEY = 0x4750504F4C4C
#: The same within one process (the embedded demo on SQLite has no advisory locks).
_CYCLE_LOCK = threading.Lock()


@contextmanager
def _cycle_lock():
    """Yield whether this cycle may run. Overlapping cycles would each wait out the same slow agents and
    pile up on the workers, so a cycle that finds another one running gives up at once."""
    if not _CYCLE_LOCK.acquire(blocking=False):
        yield False
        return
    try:
        if connection.vendor != "postgresql":
            yield True
            return
        with connection.cursor() as cursor:  # a session lock: no transaction stays open while agents answer
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [POLL_LOCK_KEY])
            held = bool(cursor.fetchone()[0])
        try:
            yield held
        finally:
            if held:
                with suppress(DatabaseError), connection.cursor() as cursor:  # a lost session freed it already
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [POLL_LOCK_KEY])
    finally:
        _CYCLE_LOCK.release()


def poll_agents(nodes=None, workers: int | None = None, timeout: float | None = None) -> PollReport:
    """One poll cycle over ``nodes`` (all by default), unless another cycle is running (``ran`` False)."""
    with _cycle_lock() as may_run:
        if not may_run:
            logger.info("Another agent poll cycle is running; skipping this one.")
            telemetry.increment("gpuportal_agent_poll_cycles_skipped_total")
            return PollReport(ran=False)
        return _poll_cycle(nodes, workers, timeout)


def _poll_cycle(nodes, workers: int | None, timeout: float | None) -> PollReport:
    nodes = list(nodes if nodes is not None else Node.objects.prefetch_related("gpus").exclude(
        cluster__executor=ExecutorKind.SLURM, agent_url=""))
    started = time.monotonic()
    results = collect(nodes, workers=workers, timeout=timeout)
    fetched = time.monotonic()
    report = apply_results(results, nodes)
    report.fetch_seconds, report.store_seconds = fetched - started, time.monotonic() - fetched
    for name, error in report.failed.items():
        logger.warning("agent of %s: %s", name, error)
    if report.failed:
        telemetry.increment("gpuportal_agent_poll_failures_total", len(report.failed))
    return report
