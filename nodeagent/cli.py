"""``python -m nodeagent --port 9400 --token-file PATH [--labels datacenter=dc1,rack=r3,network=ib-a]``.

``--backend nvidia|amd|ascend|cambricon|hygon`` chooses how devices are read (default ``detect``: by the
vendor tool or library the node has, see ``backends.detect``). ``--simulate N`` runs the same code on a
simulated device of that backend with N devices (NVIDIA when no backend is named); ``--fault xid79:3`` injects
a fault at start and ``--debug-port P`` accepts ``POST /fault {"kind": "dbe", "gpu": 2}`` on 127.0.0.1:P.
``--fleet N`` serves N simulated agents from this one process under ``/agents/node-XXXX`` (benchmarks).
``--register URL`` announces the agent to the portal (``POST URL/api/agents/register/``) with its token.

``--bind ADDRESS`` (default 127.0.0.1; ``--host`` is the old name) chooses the listening address: an agent
reachable from everywhere is an invitation, so serving the portal's network needs an explicit address.
``--tls-cert FILE --tls-key FILE`` serve HTTPS; ``--read-timeout`` and ``--max-connections`` keep slow or
half-open clients from tying the agent up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import socket
import sys
import threading
import urllib.error
import urllib.request
import zlib

from .agent import Agent
from .backends import BACKENDS, DEFAULT_BACKEND, NoBackendFound, detect, make_backend
from .server import serve, tls_context
from .system import SimulatedHostSampler


def parse_labels(text: str) -> dict:
    labels = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"label {item!r} is not key=value")
        labels[key.strip()] = value.strip()
    return labels


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nodeagent", description="gpuportal node agent")
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument("--bind", "--host", dest="bind", default="127.0.0.1",
                        help="Address to listen on (default 127.0.0.1; the portal's network needs it set).")
    parser.add_argument("--tls-cert", default="", help="PEM certificate (chain) file: serve HTTPS.")
    parser.add_argument("--tls-key", default="", help="PEM private key file of --tls-cert.")
    parser.add_argument("--read-timeout", type=float, default=10.0,
                        help="Seconds a request may take to arrive in all; idle connections close after it.")
    parser.add_argument("--max-connections", type=int, default=0,
                        help="Connections served at once (default 64, plus one per agent of a --fleet).")
    parser.add_argument("--token-file", required=True, help="File holding the bearer token issued by the portal.")
    parser.add_argument("--labels", type=parse_labels, default={}, help="datacenter=dc1,rack=r3,network=ib-a")
    parser.add_argument("--node-name", default=None, help="Defaults to the host name.")
    parser.add_argument("--backend", choices=[*BACKENDS, "detect"], default="detect",
                        help="How to read the devices (default: detect what the node has).")
    parser.add_argument("--simulate", type=int, metavar="N", default=0,
                        help="Simulated devices of the backend, N of them (NVIDIA unless --backend says otherwise).")
    parser.add_argument("--model", default=None,
                        help="Model of the simulated devices (default: H100, MI300X, Ascend910B, MLU370-X8, K100).")
    parser.add_argument("--fault", action="append", default=[], metavar="KIND:GPU",
                        help="Inject a fault at start (xid79/offbus, dbe, alarm, lost, hang).")
    parser.add_argument("--debug-port", type=int, default=0, help="Fault-injection port on 127.0.0.1.")
    parser.add_argument("--fleet", type=int, default=0, metavar="N", help="Serve N simulated agents (benchmarks).")
    parser.add_argument("--fleet-offset", type=int, default=0, help="First agent number of the fleet.")
    parser.add_argument("--register", default="", metavar="PORTAL_URL", help="Announce this agent to the portal.")
    parser.add_argument("--advertise-url", default="", help="URL the portal should poll (default http://host:port).")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def register(portal: str, token: str, node: str, url: str, labels: dict) -> dict:
    body = json.dumps({"node": node, "url": url, "labels": labels}).encode()
    if not portal.startswith(("http://", "https://")):
        raise ValueError("--register must be an http(s) URL")
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        portal.rstrip("/") + "/api/agents/register/", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the operator's portal URL
        return json.loads(response.read())


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s nodeagent %(levelname)s %(message)s")
    try:
        with open(args.token_file) as handle:
            token = handle.read().strip()
    except OSError as exc:
        print(f"nodeagent: cannot read --token-file: {exc}", file=sys.stderr)
        return 2
    if not token:
        print("nodeagent: the token file is empty", file=sys.stderr)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        print("nodeagent: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    try:
        context = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    except (OSError, ValueError) as exc:
        print(f"nodeagent: cannot load the TLS certificate or key: {exc}", file=sys.stderr)
        return 2
    name = args.backend
    if name == "detect":
        try:
            name = DEFAULT_BACKEND if args.simulate or args.fleet else detect()
        except NoBackendFound as exc:
            print(f"nodeagent: {exc}", file=sys.stderr)
            return 2
    agents = {}
    if args.fleet:
        # a fleet's token file may hold one "name token" line per agent, or one token for all
        per_agent = dict(line.split(None, 1) for line in token.splitlines() if len(line.split()) == 2)
        for i in range(args.fleet_offset, args.fleet_offset + args.fleet):
            node = f"node-{i:04d}"
            backend = make_backend(name, simulate=args.simulate or 8, model=args.model, seed=i)
            agents[f"/agents/{node}"] = (Agent(backend, node=node, labels=args.labels,
                                               host=SimulatedHostSampler(seed=i)).start(),
                                         per_agent.get(node, token).strip())
    else:
        # Simulated GPUs get UUIDs seeded by the node's name: two simulated nodes never report the same GPU.
        seed = zlib.crc32((args.node_name or socket.gethostname()).encode())
        try:
            backend = (make_backend(name, simulate=args.simulate, model=args.model, seed=seed) if args.simulate
                       else make_backend(name))
        except ImportError as exc:  # the vendor's Python library (pynvml, amdsmi) is missing
            print(f"nodeagent: the {name} backend needs its vendor's Python library: {exc}", file=sys.stderr)
            return 2
        host = SimulatedHostSampler(seed=seed) if args.simulate else None
        agent = Agent(backend, node=args.node_name, labels=args.labels, host=host).start()
        for fault in args.fault:
            kind, _sep, gpu = fault.partition(":")
            backend.inject(kind, int(gpu or 0))
        agents[""] = (agent, token)
    server = serve(agents, args.bind, args.port, read_timeout=args.read_timeout,
                   max_connections=args.max_connections or 64 + args.fleet, ssl_context=context)
    logging.info("serving %d agent(s) on %s://%s:%d", len(agents), "https" if context else "http", args.bind,
                 server.server_address[1])
    print(f"READY port={server.server_address[1]}", flush=True)
    if args.debug_port:
        serve(agents, "127.0.0.1", args.debug_port, debug=True)
        logging.info("fault injection on 127.0.0.1:%d (POST /fault)", args.debug_port)
    if args.register and "" in agents:
        scheme = "https" if context else "http"
        url = args.advertise_url or f"{scheme}://{agents[''][0].node}:{server.server_address[1]}"
        try:
            logging.info("registered with the portal: %s", register(args.register, token, agents[""][0].node, url,
                                                                     args.labels))
        except urllib.error.HTTPError as exc:  # e.g. a URL outside the agent networks, a label move: keep serving
            logging.error("the portal refused the registration (%s): %s", exc.code,
                          exc.read()[:500].decode(errors="replace"))
        except (OSError, ValueError) as exc:
            logging.error("cannot register with the portal: %s", exc)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_a: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    server.shutdown()
    for agent, _token in agents.values():
        agent.stop()
    return 0
