"""Time what-if runs and print JSON: a month of the demo's history, and the openb trace scaled to a month.

``--demo``: the demo's last closed month (seeded here when the database has no job) replayed as it was and with one
more H100 node, through the same service as the page (``metering.whatif.services.run_month``). ``--openb``: the
Alibaba trace's GPU pods (``../shared/traces/openb/``) arriving over ``--days`` days on ``--gpus`` GPUs of its
nodes (each model's share kept), replayed as they were and with ``--add`` GPUs of the trace's largest model,
through the same replay (``metering.whatif.replay.run``), so the timing is that of a site of that size."""

from __future__ import annotations

import json
import math
import time
from datetime import timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from bench.trace import QOS_CLASSES, _waiting_job, load_nodes, load_pods, never_fits
from demo.world import history_start, seed_history, seed_structure
from metering.reports import monthly as reports
from metering.whatif import replay, services
from metering.whatif.change import Change
from scheduling.engine import Policy
from scheduling.engine.simulation import SimJob, SimNode, World
from scheduling.models import Job
from scheduling.passes.history import Actual, DemandJob, History

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces" / "openb"
DAY = 86400.0


class Command(BaseCommand):
    help = "Time what-if runs (a demo month, the openb trace scaled to a month) and print JSON."

    def add_arguments(self, parser):
        parser.add_argument("--demo", action="store_true", help="Time the demo's last closed month (+8 H100).")
        parser.add_argument("--openb", action="store_true", help="Time the openb trace scaled to a month.")
        parser.add_argument("--nodes", default=str(TRACES / "openb_node_list_gpu_node.csv"))
        parser.add_argument("--pods", default=str(TRACES / "openb_pod_list_default.csv"))
        parser.add_argument("--gpus", type=int, default=1000, help="GPUs of the trace's nodes kept (by model share).")
        parser.add_argument("--days", type=float, default=30.0, help="The trace's arrivals spread over this many days.")
        parser.add_argument("--limit", type=int, default=0, help="Only the first N GPU pods (0: all).")
        parser.add_argument("--add", type=int, default=64, help="GPUs of the largest model the change adds.")
        parser.add_argument("--history-days", type=int, default=0,
                            help="--demo on a database without jobs: seed this many days of history (0: the demo's "
                                 "two closed months and this one).")

    def handle(self, *args, **options):
        if not options["demo"] and not options["openb"]:
            raise CommandError("--demo, --openb or both.")
        figures = {}
        if options["demo"]:
            figures["demo"] = self.demo(options["history_days"])
        if options["openb"]:
            figures["openb"] = self.openb(options)
        self.stdout.write(json.dumps(figures, indent=2))

    def demo(self, days: int) -> dict:
        if not Job.objects.exists():
            world = seed_structure()
            seed_history(world["users"], timezone.now() - timedelta(days=days) if days else history_start())
        month = reports.last_closed_month()
        started = time.perf_counter()
        result = services.run_month(month, Change(add={"H100": 8}))
        return {"month": result["month"], "jobs": result["jobs"], "passes": result["passes"],
                "seconds": round(time.perf_counter() - started, 2), "engine_seconds": result["engine_seconds"],
                "baseline_p95_error_seconds": result["baseline_error"]["total"]["p95_wait_seconds"]["error"]}

    def openb(self, options) -> dict:
        if not Path(options["nodes"]).exists() or not Path(options["pods"]).exists():
            raise CommandError(f"--nodes/--pods: {options['nodes']} or {options['pods']} is missing.")
        everything = load_nodes(options["nodes"])
        fraction = min(1.0, options["gpus"] / max(1, sum(len(n.gpu_indices) for n in everything)))
        nodes = load_nodes(options["nodes"], fraction)
        pods = load_pods(options["pods"])
        if options["limit"]:
            pods = pods[:options["limit"]]
        span = max((p.arrival for p in pods), default=0.0) - min((p.arrival for p in pods), default=0.0)
        scale = options["days"] * DAY / span if span else 1.0
        jobs = []
        for pod in pods:
            if never_fits(pod, nodes):
                continue
            arrival = pod.arrival * scale
            waiting = _waiting_job(pod, None)
            waiting = type(waiting)(**{**waiting.__dict__, "submitted_at": arrival})
            jobs.append(DemandJob(SimJob(waiting, pod.duration), Actual(None, "", 0, 0.0)))
        gpus_by_model: dict[str, int] = {}
        for node in nodes:
            gpus_by_model[node.gpu_model] = gpus_by_model.get(node.gpu_model, 0) + len(node.gpu_indices)
        largest = max(gpus_by_model, key=gpus_by_model.get)
        shapes = {m: max(len(n.gpu_indices) for n in nodes if n.gpu_model == m) for m in gpus_by_model}
        history = History(0.0, math.ceil(options["days"] * DAY), World(
            nodes=tuple(SimNode(n) for n in nodes), policy=Policy(enforce_quotas=False)), tuple(jobs))
        started = time.perf_counter()
        result = replay.run(history, Change(add={largest: options["add"]}), shapes=shapes)
        seconds = time.perf_counter() - started
        base, changed = result["baseline"]["total"], result["changed"]["total"]
        return {"jobs": len(jobs), "gpus": sum(gpus_by_model.values()), "nodes": len(nodes), "days": options["days"],
                "classes": sorted(QOS_CLASSES), "added": {largest: options["add"]}, "passes": result["passes"],
                "seconds": round(seconds, 2), "engine_seconds": result["engine_seconds"],
                "baseline_median_wait_seconds": base["median_wait_seconds"],
                "baseline_p95_wait_seconds": base["p95_wait_seconds"], "baseline_never_started": base["never_started"],
                "changed_p95_wait_seconds": changed["p95_wait_seconds"],
                "changed_never_started": changed["never_started"]}
