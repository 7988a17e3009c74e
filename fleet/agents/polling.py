"""Polling node agents and turning their snapshots into inventory, readings and health.

``poll_agents()`` fetches every agent's ``/v1/snapshot`` concurrently (a bounded thread pool), then
applies all results in one transaction: readings in bulk, inventory changes, health steps with a
``NodeEvent`` for each change, and hardware-fault evidence on the running jobs that are hit.

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

import http.client
import io
import json
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
from gpuportal.storage.db import update_grouped
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


class _DeadlineReader(io.RawIOBase):
    """Socket reads that all end by one deadline: each read waits at most for the time left, so an agent
    dripping one byte every second cannot stretch a poll past ``POLL_TIMEOUT_SECONDS`` (a per-read timeout
    alone would let it run for ever)."""

    def __init__(self, sock, deadline: float):
        super().__init__()
        # a socket file keeps the descriptor open after http.client closes the connection (HTTP/1.0 answers)
        self._sock, self._raw, self._deadline = sock, sock.makefile("rb", buffering=0), deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("poll deadline passed")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineSocket:
    """Wraps the connected (and, for https, handshaken) socket so that ``http.client`` reads and writes
    through the deadline; everything else goes to the socket itself."""

    def __init__(self, sock, deadline: float):
        self._sock, self._deadline = sock, deadline

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def sendall(self, data) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("poll deadline passed")
        self._sock.settimeout(left)  # sendall's timeout bounds the whole call
        self._sock.sendall(data)

    def makefile(self, mode="rb", *args, **kwargs):
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))


class _DeadlineMixin:
    """Connect with the time left, to the addresses checked for this poll only; the TLS handshake is bounded as
    a whole by the socket timeout.

    ``http.client`` would resolve the host name again as it connects, and could be told another address than
    the one just checked (DNS rebinding); here it connects to ``addresses`` instead, while the Host header and
    the TLS server name (and so the certificate check) still come from the URL's host."""

    deadline: float = 0.0
    addresses: tuple = ()

    def connect(self):
        self.timeout = max(self.deadline - time.monotonic(), 0.001)
        self._create_connection = self._connect_checked
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self.deadline)

    def _connect_checked(self, host_port, timeout=None, source_address=None):
        """The first of ``addresses`` that accepts, each tried with the time left (as ``socket.create_connection``
        tries every address of a name)."""
        port, error = host_port[1], None
        for address in self.addresses:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("poll deadline passed")
            sock = socket.socket(socket.AF_INET6 if address.version == 6 else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.settimeout(left)
                sock.connect((str(address), port))
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        raise error or OSError("no address to connect to")


class _HTTPConnection(_DeadlineMixin, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_DeadlineMixin, http.client.HTTPSConnection):
    pass


@lru_cache(maxsize=4)
def _tls_context(ca_file: str) -> ssl.SSLContext:
    """One context per CA bundle: loading the certificates for every poll of every agent would cost more
    than the poll."""
    return ssl.create_default_context(cafile=ca_file or None)


def fetch_snapshot(url: str, token: str, timeout: float, max_bytes: int | None = None) -> dict:
    """GET the agent's snapshot within ``timeout`` seconds in all and at most ``max_bytes`` of body.

    Both limits exist so that one broken or hostile agent costs one pool thread for ``timeout`` seconds
    and a bounded amount of memory, never a worker process: the cycle's length stays predictable."""
    max_bytes = max_bytes or settings.AGENTS["MAX_SNAPSHOT_BYTES"]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PollError(f"agent URL {url!r} is not http(s)")
    deadline = time.monotonic() + timeout
    addresses = checked_addresses(parts.hostname)
    if parts.scheme == "https":
        context = _tls_context(settings.AGENTS.get("CA_FILE", ""))
        connection = _HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=context)
    else:
        connection = _HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    connection.deadline, connection.addresses = deadline, addresses
    too_big = f"the answer is larger than the limit of {max_bytes} bytes (AGENTS['MAX_SNAPSHOT_BYTES'])"
    try:
        connection.request("GET", parts.path.rstrip("/") + "/v1/snapshot",
                           headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        response = connection.getresponse()
        if response.length is not None and response.length > max_bytes:
            raise PollError(too_big)
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise PollError(too_big)
    except TimeoutError as exc:
        raise PollError(f"no answer within {timeout:g} s") from exc
    except OSError as exc:
        if time.monotonic() >= deadline:
            raise PollError(f"no answer within {timeout:g} s") from exc
        raise PollError(f"cannot reach the agent: {exc}") from exc
    except http.client.HTTPException as exc:
        raise PollError(f"bad HTTP answer: {exc!r}") from exc
    finally:
        connection.close()
    if response.status == 401:
        raise PollError("the agent refused the token (401); issue a new token and restart the agent")
    if response.status != 200:
        raise PollError(f"HTTP {response.status}: {body[:200].decode(errors='replace')}")
    try:
        return validate_snapshot(json.loads(body))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PollError(f"invalid snapshot: {exc}") from exc


def checked_addresses(host: str) -> tuple:
    """The addresses of the agent's host, resolved once for this poll, each checked as registration checks
    them (``networks.address_problem``); PollError, before anything is contacted, when one may not be.

    Registration checked the name once, but its owner may point it elsewhere since (the metadata service, the
    portal's own host): a poll connects only to what it checked now."""
    addresses = networks.resolve(host)
    if not addresses:
        raise PollError(f"the agent's host {host} does not resolve")
    allowed = networks.agent_networks()
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

    def one(node: Node) -> PollResult:
        started = time.monotonic()
        try:
            if node.agent_url:
                snapshot = fetch_snapshot(node.agent_url, agent_tokens.token_for(node), timeout)
            else:
                snapshot = _simulated_snapshot(node, busy.get(node.pk, set()))
            return PollResult(node.pk, snapshot=snapshot, seconds=time.monotonic() - started)
        except PollError as exc:
            return PollResult(node.pk, error=str(exc), seconds=time.monotonic() - started)

    remote = [n for n in nodes if n.agent_url]
    results = [one(n) for n in simulated]
    if remote:
        with ThreadPoolExecutor(max_workers=min(workers, len(remote))) as pool:
            results += list(pool.map(one, remote))
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
        GpuReading.objects.bulk_create(gpu_readings, batch_size=5000)
        NodeReading.objects.bulk_create(node_readings, batch_size=5000)
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
