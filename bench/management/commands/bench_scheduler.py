"""Benchmark the scheduling pass: the pure engine, and load + engine + apply on the database.

Builds a synthetic cluster and workload (``bench/synthetic.py``), times ``engine.schedule`` on it, stores
the same world in the database and runs passes on it: the first one cold (the scheduler's kept view read
in full, every waiting job's queue state written for the first time), then ``--runs`` passes in a moving world
(between two passes some running jobs end, some jobs arrive and a few are cancelled), each reading only what
changed. Prints one JSON line (``db_pass_seconds``: the median of the moving passes; ``engine_moving_seconds``: the
engine alone on the world they left, moved once more as before each of them; ``db_pass_cold_seconds``:
the first; ``db_states_written``: the reasons each moving pass wrote; ``db_table_written``: whether it wrote the
queue table of places and estimates; the process's peak memory) and
leaves nothing behind: the whole run is one transaction that is rolled back. ``--large`` is the 10,000-node size.
Use a database of its own (``make bench-scheduler``): a pass schedules every cluster in the database.
"""

import json
import random
import resource
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from bench.synthetic import build
from demo.world import TASK_TYPES
from fleet.models import GPU, Cluster, Node
from scheduling import engine, lifecycle
from scheduling.models import Job, JobAllocation, JobStatus, TaskType
from scheduling.passes import kept
from scheduling.passes.scheduler import run_pass
from tenants.models import Project, Quota, Tenant

PREFIX = "bench-"
#: The large size of the issue: 10,000 nodes of 8 GPUs, 100,000 waiting and 40,000 running jobs.
LARGE = {"nodes": 10000, "gpus_per_node": 8, "tenants": 100, "pending": 100000, "running": 40000}
#: Share of running jobs that end, and of the queue that arrives, between two moving passes.
ENDING, ARRIVING, CANCELLED = 0.01, 0.01, 0.002


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Time the scheduling engine and a full database pass on a synthetic cluster (JSON)."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=1000)
        parser.add_argument("--gpus-per-node", type=int, default=8)
        parser.add_argument("--tenants", type=int, default=100)
        parser.add_argument("--pending", type=int, default=10000)
        parser.add_argument("--running", type=int, default=4000)
        parser.add_argument("--runs", type=int, default=3)
        parser.add_argument("--engine-only", action="store_true")
        parser.add_argument("--large", action="store_true", help="10,000 nodes, 100,000 waiting, 40,000 running")

    def handle(self, *args, **o):
        if o["large"]:
            o.update(LARGE)
        snapshot = build(o["nodes"], o["gpus_per_node"], o["tenants"], o["pending"], o["running"])
        engine_runs, result = [], None
        for _ in range(o["runs"]):
            started = time.perf_counter()
            result = engine.schedule(snapshot)
            engine_runs.append(time.perf_counter() - started)
        out = {"nodes": o["nodes"], "gpus": o["nodes"] * o["gpus_per_node"], "tenants": o["tenants"],
               "pending": len(snapshot.waiting), "running": len(snapshot.running),
               "engine_seconds": round(statistics.median(engine_runs), 3),
               "engine_runs": [round(r, 3) for r in engine_runs], "admitted": len(result.admissions),
               "preempted": len(result.preemptions), "waiting": len(result.waiting),
               "backfilled": result.stats["backfilled"], "fragmentation": result.stats["fragmentation"]}
        if not o["engine_only"]:
            try:  # the fixture lives in one transaction that is rolled back: nothing to clean up afterwards
                with transaction.atomic():
                    self._store(snapshot)
                    with connection.cursor() as cursor:  # as autovacuum would have: the planner's row counts
                        cursor.execute("ANALYZE")
                    out.update(self._time_passes(o["runs"], snapshot))
                    raise _Rollback
            except _Rollback:
                pass
        out["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        self.stdout.write(json.dumps(out))

    def _store(self, snap):
        for code, name, priority, preemptible, approval, runtime in TASK_TYPES:
            TaskType.objects.get_or_create(code=code, defaults={
                "name": name, "priority": priority, "preemptible": preemptible, "requires_approval": approval,
                "default_max_runtime_minutes": runtime})
        task_types = {t.code: t for t in TaskType.objects.all()}
        owner, _ = get_user_model().objects.get_or_create(username=f"{PREFIX}owner")
        cluster = Cluster.objects.create(name=f"{PREFIX}cluster")
        nodes = Node.objects.bulk_create([
            Node(cluster=cluster, name=f"{PREFIX}{n.name}", gpu_model=n.gpu_model, datacenter=n.datacenter,
                 rack=n.rack, network_domain=n.network_domain, cpu_milli=n.cpu_milli, memory_mib=n.memory_mib)
            for n in snap.nodes], batch_size=2000)
        node_of = {s.id: d for s, d in zip(snap.nodes, nodes, strict=True)}
        gpus = GPU.objects.bulk_create([GPU(node=node_of[n.id], index=i, uuid=f"{PREFIX}{n.name}-{i}",
                                            model=n.gpu_model, memory_mb=81920)
                                        for n in snap.nodes for i in n.gpu_indices], batch_size=5000)
        gpu_of = {(g.node_id, g.index): g for g in gpus}
        weights = {t.name: t.weight for t in snap.tenants}
        tenants = {t.name: t for t in Tenant.objects.bulk_create([
            Tenant(name=f"{PREFIX}{name}", fair_share_weight=int(weights[name])) for name in weights])}
        projects = {p.tenant_id: p for p in Project.objects.bulk_create([
            Project(tenant=t, name="default") for t in tenants.values()])}
        Quota.objects.bulk_create([Quota(tenant=tenants[f"{PREFIX}{q.tenant}"], gpu_model=q.gpu_model,
                                         guaranteed_gpus=q.guaranteed, limit_gpus=q.limit) for q in snap.quotas])

        def job_row(j, **extra):  # kept for the jobs that arrive between passes (``_move``)
            tenant = tenants[f"{PREFIX}{j.tenant}"]
            return Job(tenant=tenant, project=projects[tenant.pk], owner=owner, name=f"{PREFIX}{j.id}",
                       task_type=task_types[j.task_type], gpu_model=j.gpu_model, image="bench", priority=j.priority,
                       max_runtime_minutes=int(j.max_runtime // 60), submitted_at=datetime.fromtimestamp(
                           j.submitted_at, tz=UTC), cpu_milli=j.cpu_milli, memory_mib=j.memory_mib, **extra)

        running = lifecycle.import_jobs([job_row(
            j, gpus_per_node=len(j.placements[0].gpu_indices), node_count=1, cluster=cluster,
            started_at=datetime.fromtimestamp(j.started_at, tz=UTC)) for j in snap.running],
            JobStatus.RUNNING, "benchmark fixture")
        JobAllocation.objects.bulk_create([
            JobAllocation(job=db, gpu=gpu_of[(node_of[p.node_id].pk, i)], allocated_at=db.started_at)
            for db, j in zip(running, snap.running, strict=True) for p in j.placements for i in p.gpu_indices],
            batch_size=5000)
        self._job_row = job_row
        lifecycle.import_jobs([job_row(j, gpus_per_node=j.gpus_per_node, node_count=j.nodes, gpu_milli=j.gpu_milli,
                                       topology=j.topology) for j in snap.waiting], JobStatus.QUEUED,
                              "benchmark fixture")

    def _time_passes(self, runs: int, snap) -> dict:
        kept.VIEW.discard()  # the first pass is the one a fresh worker makes
        cold = run_pass()
        rng, timings, reports, read = random.Random(2), [], [], []
        for _ in range(runs):
            self._move(rng, snap)
            started = time.perf_counter()
            reports.append(run_pass())
            timings.append(time.perf_counter() - started)
            read.append(kept.VIEW.last.get("waiting_read", 0) + kept.VIEW.last.get("running_read", 0))
        report = reports[-1] if reports else cold
        median = (lambda values: round(statistics.median(values), 3)) if reports else (lambda values: None)
        # The engine alone on the world the passes left, moved once more as before each of them (what the next pass
        # would decide on): a moving world preempts and requeues in every pass, so the engine has more to do than on
        # the first snapshot.
        self._move(rng, snap)
        snapshots, _nodes, _gpus = kept.load_snapshots()
        moving = []
        for _ in range(max(1, runs)):
            started = time.perf_counter()
            for snapshot in snapshots.values():
                engine.schedule(snapshot)
            moving.append(time.perf_counter() - started)
        return {"database": connection.vendor, "db_pass_seconds": median(timings),
                "engine_moving_seconds": round(statistics.median(moving), 3),
                "db_pass_runs": [round(t, 3) for t in timings], "db_pass_cold_seconds": round(cold.seconds, 3),
                "db_pass_cold_parts": {"load": round(cold.load_seconds, 3), "engine": round(cold.engine_seconds, 3),
                                       "apply": round(cold.apply_seconds, 3)},
                "db_pass_engine_seconds": median([r.engine_seconds for r in reports]),
                "db_pass_load_seconds": median([r.load_seconds for r in reports]),
                "db_pass_apply_seconds": median([r.apply_seconds for r in reports]),
                "db_rows_read_again": read,  # per moving pass: the job rows the kept view read again
                "db_states_written": [r.states_written for r in reports],  # per moving pass: reasons written
                "db_table_written": [r.table_written for r in reports],  # per moving pass: the queue table written
                "db_admitted": len(report.admitted), "db_preempted": len(report.preempted),
                "db_waiting": len(report.waiting)}

    def _move(self, rng: random.Random, snap) -> None:
        """Between two passes: some running jobs end, some jobs arrive, a few waiting ones are cancelled."""
        running = list(Job.objects.filter(status=JobStatus.RUNNING, name__startswith=PREFIX).only("id", "status"))
        ending = rng.sample(running, min(len(running), max(1, int(len(snap.running) * ENDING))))
        lifecycle.transition_many(ending, JobStatus.SUCCEEDED, {j.pk: "benchmark: ended" for j in ending})
        queued = list(Job.objects.filter(status=JobStatus.QUEUED, name__startswith=PREFIX).only("id", "status"))
        cancelled = rng.sample(queued, min(len(queued), int(len(snap.waiting) * CANCELLED)))
        lifecycle.transition_many(cancelled, JobStatus.CANCELLED, {j.pk: "benchmark: cancelled" for j in cancelled})
        now = time.time()
        arriving = [replace(j, submitted_at=now) for j in rng.sample(snap.waiting, max(1, int(len(snap.waiting)
                                                                                           * ARRIVING)))]
        lifecycle.import_jobs([self._job_row(j, gpus_per_node=j.gpus_per_node, node_count=j.nodes,
                                             gpu_milli=j.gpu_milli, topology=j.topology) for j in arriving],
                              JobStatus.QUEUED, "benchmark: arrived")
