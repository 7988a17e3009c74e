"""Benchmark the scheduling pass: the pure engine, and load + engine + apply on the database.

Builds a synthetic cluster and workload (``bench/synthetic.py``), times ``engine.schedule`` on it, stores
the same world in the database and times full passes (each rolled back, so every run sees the same
state), prints one JSON line, and removes what it stored. Use a database of its own
(``make bench-scheduler``): a pass schedules every cluster in the database.
"""

import json
import statistics
import time
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from bench.synthetic import build
from demo.world import TASK_TYPES
from fleet.models import GPU, Cluster, Node
from scheduling import engine, lifecycle
from scheduling.models import Job, JobAllocation, JobStatus, TaskType
from scheduling.passes.scheduler import run_pass
from tenants.models import Project, Quota, Tenant

PREFIX = "bench-"


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

    def handle(self, *args, **o):
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
                    out.update(self._time_passes(o["runs"]))
                    raise _Rollback
            except _Rollback:
                pass
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

        def job_row(j, **extra):
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
        lifecycle.import_jobs([job_row(j, gpus_per_node=j.gpus_per_node, node_count=j.nodes, gpu_milli=j.gpu_milli,
                                       topology=j.topology) for j in snap.waiting], JobStatus.QUEUED,
                              "benchmark fixture")

    def _time_passes(self, runs: int) -> dict:
        timings, engine_times, parts, report = [], [], [], None
        for _ in range(runs):
            try:
                with transaction.atomic():
                    started = time.perf_counter()
                    report = run_pass()
                    timings.append(time.perf_counter() - started)
                    engine_times.append(report.engine_seconds)
                    parts.append((report.load_seconds, report.apply_seconds))
                    raise _Rollback
            except _Rollback:
                pass
        return {"database": connection.vendor, "db_pass_seconds": round(statistics.median(timings), 3),
                "db_pass_runs": [round(t, 3) for t in timings],
                "db_pass_engine_seconds": round(statistics.median(engine_times), 3),
                "db_pass_load_seconds": round(statistics.median(p[0] for p in parts), 3),
                "db_pass_apply_seconds": round(statistics.median(p[1] for p in parts), 3),
                "db_admitted": len(report.admitted), "db_preempted": len(report.preempted),
                "db_waiting": len(report.waiting)}
