"""Replay a GPU cluster trace through the scheduling engine and print JSON.

``--mode time`` (the default): the time-based replay of bench/trace.py, one JSON object with waits and
utilisation. ``--mode inflation``: the workload-inflation experiment of bench/inflation.py (Weng et al., ATC '23)
— one JSON object for one ``--policy``, a list for ``--policy all`` (every policy on the same arrivals)."""

import json

from django.core.management.base import BaseCommand, CommandError

from bench.inflation import HISTORY_SHARE, POLICIES
from bench.inflation import run as run_inflation
from bench.trace import replay
from scheduling.engine import Policy


class Command(BaseCommand):
    help = ("Replay ../shared/traces/openb through the engine in simulated time (JSON with waits and utilisation), "
            "or run the workload-inflation placement experiment (--mode inflation).")

    def add_arguments(self, parser):
        parser.add_argument("--nodes", required=True, help="openb_node_list_gpu_node.csv")
        parser.add_argument("--pods", required=True, help="openb_pod_list_*.csv")
        parser.add_argument("--mode", choices=("time", "inflation"), default="time",
                            help="time: replay in simulated time; inflation: tasks arrive until their GPU requests "
                                 "reach --inflation x capacity, nothing departs (placement quality).")
        parser.add_argument("--policy", default="default",
                            help="time mode: default or first-fit; inflation mode: " + ", ".join(POLICIES) + " or all")
        parser.add_argument("--seed", type=int, default=42,
                            help="inflation mode: seed of the task sampling; time mode: seed of --sample.")
        parser.add_argument("--sample", type=float, default=1.0,
                            help="time mode: keep this share of the pods, drawn with --seed (a resample).")
        parser.add_argument("--inflation", type=float, default=1.3,
                            help="inflation mode: arrivals stop once their GPU requests reach this x capacity.")
        parser.add_argument("--order", choices=("sample", "file"), default="sample",
                            help="inflation mode: sample (seeded, with replacement) or file (each task once, in the "
                                 "pod list's order).")
        parser.add_argument("--history", type=float, default=HISTORY_SHARE,
                            help="inflation mode: the share of the pod list (from its start) that default is given "
                                 "as the site's history of job shapes (0: the arrivals so far only).")
        parser.add_argument("--time-scale", type=float, default=1.0, help="Multiply arrival times (0.1: 10x denser).")
        parser.add_argument("--node-fraction", type=float, default=1.0, help="Share of each GPU-model group kept.")
        parser.add_argument("--pass-interval", type=float, default=0.0,
                            help="Handle events within this many simulated seconds in one pass (0: one per event).")
        parser.add_argument("--limit", type=int, default=0, help="Replay only the first N pods.")
        parser.add_argument("--runtime-percentile", type=float, default=0.9,
                            help="Percentile of past runtimes used as the runtime estimate.")
        parser.add_argument("--aging", type=float, default=None,
                            help="time mode: aging in priority points per hour waited (default: the policy's; 0: "
                                 "strict priority classes).")
        parser.add_argument("--eta-range", default="",
                            help="LOW,HIGH,MARGIN: the likely start range around an estimated wait W, from "
                                 "LOW x W to HIGH x W + MARGIN seconds (default: the policy's).")

    def handle(self, *args, **o):
        if o["mode"] == "inflation":
            self.inflation(o)
            return
        try:
            policy = Policy.named(o["policy"])
            if o["eta_range"]:
                low, high, margin = (float(x) for x in o["eta_range"].split(","))
                if not 0 <= low <= 1 <= high or margin < 0:
                    raise ValueError("--eta-range: LOW in [0, 1], HIGH at least 1, MARGIN at least 0")
                policy = Policy(**{**policy.__dict__, "eta_low_ratio": low, "eta_high_ratio": high,
                                   "eta_margin_seconds": margin})
            if o["aging"] is not None:
                if o["aging"] < 0:
                    raise ValueError("--aging must be 0 or more")
                policy = Policy(**{**policy.__dict__, "aging_points_per_hour": o["aging"]})
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not 0 < o["node_fraction"] <= 1 or o["time_scale"] <= 0 or not 0 < o["sample"] <= 1:
            raise CommandError("--node-fraction and --sample must be in (0, 1] and --time-scale above 0")
        try:
            result = replay(o["nodes"], o["pods"], policy, time_scale=o["time_scale"],
                            node_fraction=o["node_fraction"], pass_interval=o["pass_interval"], limit=o["limit"],
                            runtime_percentile=o["runtime_percentile"], sample=o["sample"], seed=o["seed"])
        except OSError as exc:
            raise CommandError(f"cannot read the trace: {exc}") from exc
        self.stdout.write(json.dumps(result))

    def inflation(self, o):
        if not 0 < o["node_fraction"] <= 1:
            raise CommandError("--node-fraction must be in (0, 1]")
        if not 0 < o["inflation"] <= 10:
            raise CommandError("--inflation must be above 0 and at most 10")
        if o["limit"] < 0:
            raise CommandError("--limit must be 0 (all) or more")
        policies = POLICIES if o["policy"] == "all" else (o["policy"],)
        try:
            results = run_inflation(o["nodes"], o["pods"], policies, seed=o["seed"], inflation=o["inflation"],
                                    order=o["order"], node_fraction=o["node_fraction"], limit=o["limit"],
                                    history=o["history"])
        except OSError as exc:
            raise CommandError(f"cannot read the trace: {exc}") from exc
        except (ValueError, KeyError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(results if o["policy"] == "all" else results[0]))
