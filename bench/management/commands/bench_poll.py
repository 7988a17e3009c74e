"""Benchmark one full polling cycle against many simulated agents over real HTTP.

Starts ``--processes`` node-agent processes serving ``--agents`` simulated agents between them (each agent
under its own path, each with its own token), registers them as nodes of a throw-away cluster, runs
``--cycles`` polling cycles through the same code the Celery task runs, prints one JSON line (with the machine's
load average before and after the timed cycles), and removes everything it created. Quote the PostgreSQL figure
(`DATABASE_URL=postgres://…`).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection
from django.test import override_settings

from fleet.agents import tokens as agent_tokens
from fleet.agents.polling import poll_agents
from fleet.models import GPU, Cluster, Node

CLUSTER = "bench-poll"


class Command(BaseCommand):
    help = "Time a polling cycle of N simulated agents (JSON: cycle_seconds, fetch_seconds, store_seconds)."

    def add_arguments(self, parser):
        parser.add_argument("--agents", type=int, default=1000)
        parser.add_argument("--gpus", type=int, default=8)
        parser.add_argument("--processes", type=int, default=4)
        parser.add_argument("--cycles", type=int, default=3)
        parser.add_argument("--workers", type=int, default=64)
        parser.add_argument("--timeout", type=float, default=5.0)

    def handle(self, *args, agents, gpus, processes, cycles, workers, timeout, **options):
        Cluster.objects.filter(name=CLUSTER).exists() and self._cleanup()
        cluster = Cluster.objects.create(name=CLUSTER, description="bench_poll (temporary)")
        nodes = Node.objects.bulk_create([
            Node(cluster=cluster, name=f"node-{i:04d}", gpu_model="BENCH", datacenter="dc-bench", rack=f"r{i // 40}",
                 network_domain=f"ib-{i // 200}", agent_token_version=1) for i in range(agents)])
        tokens = {n.name: agent_tokens.token_for(n) for n in nodes}
        for node in nodes:
            node.agent_token_hash = agent_tokens.hash_token(tokens[node.name])
        Node.objects.bulk_update(nodes, ["agent_token_hash"], batch_size=1000)
        GPU.objects.bulk_create([GPU(node=n, index=i, uuid=f"bench-{n.name}-{i}", model="BENCH", memory_mb=81920)
                                 for n in nodes for i in range(gpus)], batch_size=5000)
        token_file = tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False)  # noqa: SIM115
        token_file.write("\n".join(f"{name} {token}" for name, token in tokens.items()))
        token_file.close()
        fleets = []
        try:
            per_process = -(-agents // processes)
            for p in range(processes):
                offset = p * per_process
                count = min(per_process, agents - offset)
                if count <= 0:
                    break
                proc = subprocess.Popen(
                    [sys.executable, "-m", "nodeagent", "--host", "127.0.0.1", "--port", "0", "--token-file",
                     token_file.name, "--fleet", str(count), "--fleet-offset", str(offset), "--simulate", str(gpus)],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                port = int(proc.stdout.readline().strip().split("port=")[1])
                fleets.append(proc)
                for i in range(offset, offset + count):
                    nodes[i].agent_url = f"http://127.0.0.1:{port}/agents/node-{i:04d}"
            Node.objects.bulk_update(nodes, ["agent_url"], batch_size=1000)
            queryset = Node.objects.filter(cluster=cluster).prefetch_related("gpus")
            # the agents answer on loopback, which a poll reaches only when the agent networks include it
            loopback = {**settings.AGENTS, "NETWORKS": [*settings.AGENTS["NETWORKS"], "127.0.0.0/8"]}
            with override_settings(AGENTS=loopback):
                poll_agents(queryset, workers=workers, timeout=timeout)  # warm-up: connections, first counters
                load_before = os.getloadavg()[0]
                runs = []
                for _ in range(cycles):
                    started = time.monotonic()
                    report = poll_agents(queryset, workers=workers, timeout=timeout)
                    runs.append({"cycle_seconds": round(time.monotonic() - started, 3),
                                 "fetch_seconds": round(report.fetch_seconds, 3),
                                 "store_seconds": round(report.store_seconds, 3), "answered": report.answered})
            result = {
                "agents": agents, "gpus_per_agent": gpus, "agent_processes": len(fleets), "workers": workers,
                "database": connection.vendor,
                "cycle_seconds": statistics.median(r["cycle_seconds"] for r in runs),
                "fetch_seconds": statistics.median(r["fetch_seconds"] for r in runs),
                "store_seconds": statistics.median(r["store_seconds"] for r in runs),
                "answered": min(r["answered"] for r in runs), "cycles": runs,
                # other work on the machine shares its cores with the agents and the poller: quote it with the figures
                "load_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
            }
        finally:
            for proc in fleets:
                proc.terminate()
            for proc in fleets:
                proc.wait(timeout=30)
            self._cleanup()
        self.stdout.write(json.dumps(result))

    def _cleanup(self):
        nodes = Node.objects.filter(cluster__name=CLUSTER)
        GPU.objects.filter(node__in=nodes).delete()
        nodes.delete()
        Cluster.objects.filter(name=CLUSTER).delete()
