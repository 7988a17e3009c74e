"""``manage.py chaos_soak --minutes M --seed S [--drain-minutes D] [--json]``: the production stack under seeded
faults and concurrent API clients (``bench.chaos``), then a drain, then the checks.

It prints each fault as it is injected (one line, with the seconds since the soak started), then the findings:
with ``--json`` one JSON object on stdout (the progress lines go to stderr), otherwise one line per check. It
exits non-zero when any check fails, naming the offending job ids. The database of ``DATABASE_URL`` is used as
it is (a fresh one: the soak's world and its jobs are added to whatever is there, and every stored job is
checked); its Redis database (``--broker-url``) is flushed first.

The figures: ``submitted`` (idempotency keys sent), ``acknowledged`` (answered 2xx), ``same_key_pairs`` (keys
sent twice at once); the findings, each a list naming jobs: ``lost`` (answered 2xx, not stored),
``duplicated`` (two jobs or groups for one key, one key answered with two ids, or a job under no key sent),
``stuck`` (admitted or dispatching past the reconcile bounds, or queued at the end for what no freed capacity
cures: host_resources, never_fits, no_healthy_node, or avoiding too many nodes of its GPU model after node
faults), ``gpus_held_by_inactive``, ``illegal_transitions``, ``holds_ignored`` (a held job admitted before its
release, a hold recorded or answered 2xx for a job that no longer waited), ``replicas_restarted_after_stop``
(a status move after a replica ended, the server recorded for an ended replica still holding its lease, a
replica of a stopped service not ended, a stand-in server still up at the end), ``server_errors`` (5xx answers,
apart from 503s of requests under way while the database sessions were being terminated), ``pass_failures_uncounted``
(passes the worker logged as raised beyond ``gpuportal_scheduling_pass_failures_total`` and the counter writes
it logged as lost), ``processes_exited`` (a stack process that ended without a fault), ``client_errors`` (a
client thread that raised: a bug of the soak), and ``audit_ok``.
"""

from __future__ import annotations

import json
import os
import signal

from django.core.management.base import BaseCommand, CommandError

from ...chaos import VIOLATIONS, Soak


def _interrupted(signum, frame):
    """SIGTERM ends the soak like Ctrl-C: through its cleanup, so that no process it started is left behind."""
    raise SystemExit(128 + signum)


class Command(BaseCommand):
    help = "Run the production stack under seeded faults and concurrent clients, drain it, check the invariants."

    def add_arguments(self, parser):
        parser.add_argument("--minutes", type=float, default=5, help="Minutes of clients and faults.")
        parser.add_argument("--seed", type=int, default=1, help="Seeds the clients' actions and the faults.")
        parser.add_argument("--drain-minutes", type=float, default=2,
                            help="Most minutes the drain waits for every job to end (no submissions, no faults).")
        parser.add_argument("--json", action="store_true", help="Print the findings as one JSON object.")
        parser.add_argument("--broker-url", default=os.environ.get("CHAOS_BROKER_URL", "redis://127.0.0.1:6379/8"),
                            help="Redis database of the stack's broker and cache (flushed first).")
        parser.add_argument("--think", type=float, default=0.6,
                            help="Mean seconds each client waits between two actions.")
        parser.add_argument("--keep-logs", action="store_true",
                            help="Keep the stack's output even when every check passes (it is kept otherwise).")

    def handle(self, *args, **o):
        if o["minutes"] <= 0 or o["drain_minutes"] < 0 or o["think"] <= 0:
            raise CommandError("--minutes and --think must be above 0, --drain-minutes at least 0")
        progress = self.stderr if o["json"] else self.stdout
        previous = signal.signal(signal.SIGTERM, _interrupted)
        try:
            result = Soak(o["seed"], o["minutes"], o["drain_minutes"], o["broker_url"], think=o["think"],
                          say=lambda line: (progress.write(line), progress.flush()), keep_logs=o["keep_logs"]).run()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            signal.signal(signal.SIGTERM, previous)
        if o["json"]:
            self.stdout.write(json.dumps(result))
        else:
            self._summary(result)
        if not result["ok"]:
            raise CommandError("chaos soak failed: " + "; ".join(_failure(name, result) for name in
                                                                   result["violations"]))

    def _summary(self, result: dict) -> None:
        self.stdout.write(f"seed {result['seed']}: {len(result['faults'])} faults, {result['submitted']} submissions "
                          f"({result['acknowledged']} acknowledged, {result['same_key_pairs']} sent twice at once), "
                          f"{result['requests']} requests; jobs {result['jobs']}")
        for name in (*VIOLATIONS, "audit_ok"):
            value = result[name]
            bad = (not value) if name == "audit_ok" else bool(value)
            count = len(value) if isinstance(value, list) else value
            self.stdout.write(f"{'FAIL' if bad else 'ok  '} {name}: {count}")
            for entry in (value if isinstance(value, list) else [])[:20]:
                self.stdout.write(f"       {json.dumps(entry, default=str)[:300]}")
        self.stdout.write(f"pass failures logged {result['pass_failures']['logged']}, counted "
                          f"{result['pass_failures']['counted']}; counters {result['counters']}")
        if not result["ok"]:
            self.stdout.write(f"the stack's output: {result['logs']}")


def _failure(name: str, result: dict) -> str:
    """One failed check and the jobs it names."""
    if name == "audit":
        return f"audit chain: {result['audit_problem']}"
    value = result[name]
    if not isinstance(value, list):
        return f"{name} {value}"
    jobs = sorted({job for entry in value if isinstance(entry, dict)
                   for job in (entry.get("jobs") or [entry.get("job")]) if isinstance(job, int)})
    return f"{name} {len(value)}" + (f" (jobs {', '.join(map(str, jobs[:30]))})" if jobs else "")
