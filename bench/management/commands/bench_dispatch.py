"""Benchmark Kubernetes dispatch and status sync against the fake API server (in its own process).

    manage.py bench_dispatch --jobs 1000

``jobs_per_second``: admitted jobs (a mix of single-node and two-node jobs) -> their Kubernetes objects
created through the real client over HTTP (each body validated in strict mode by the server) and the jobs
marked ``dispatching`` in the database. ``sync_events_per_second``: pod watch events -> job states stored
(every job ``running`` once all of its pods run), timed from the first event to the last state written.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import yaml
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone

from fleet.models import GPU, Cluster, Node
from gpuportal.storage.db import bulk_insert
from scheduling import lifecycle
from scheduling.executors.kubernetes import _prepared
from scheduling.executors.kubernetes.connection import forget_clients
from scheduling.executors.kubernetes.sync import ClusterSync
from scheduling.models import Job, JobAllocation, JobStatus, TaskType
from scheduling.passes.dispatch import dispatch_many
from tenants.models import Project, Quota, Tenant

CLUSTER = "bench-k8s"
MODEL = "BENCH-GPU"


class Command(BaseCommand):
    help = "Time Kubernetes dispatch (jobs/s) and pod-event sync (events/s) against the fake API server; JSON out."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, default=1000)
        parser.add_argument("--multi-node-share", type=float, default=0.2, help="Share of two-node jobs.")
        parser.add_argument("--workers", type=int, default=16, help="Concurrent dispatches.")
        parser.add_argument("--tenants", type=int, default=10)
        parser.add_argument("--seed", type=int, default=5)

    def handle(self, *args, **options):
        if connection.vendor != "postgresql":
            raise CommandError("bench_dispatch measures PostgreSQL; set DATABASE_URL (see `make bench-dispatch`).")
        rng = random.Random(options["seed"])
        count = options["jobs"]
        multi = [rng.random() < options["multi_node_share"] for _ in range(count)]
        node_count = count + sum(multi)
        server = subprocess.Popen([sys.executable, "-m", "kubefake", "--nodes", str(node_count),
                                   "--node-prefix", "bench-k8s-node-"], stdout=subprocess.PIPE, text=True)
        try:
            url = server.stdout.readline().strip()
            if not url.startswith("http"):
                raise CommandError("the fake API server did not start")
            with tempfile.TemporaryDirectory() as folder:
                kubeconfig = Path(folder) / "bench.kubeconfig"
                kubeconfig.write_text(yaml.safe_dump({
                    "apiVersion": "v1", "kind": "Config", "current-context": "bench",
                    "clusters": [{"name": "bench", "cluster": {"server": url}}],
                    "users": [{"name": "bench", "user": {"token": "bench"}}],
                    "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}]}))
                result = self._run(str(kubeconfig), multi, node_count, options)
        finally:
            server.terminate()
            server.wait(10)
        self.stdout.write(json.dumps(result, indent=2))

    def _setup(self, kubeconfig: str, multi: list[bool], node_count: int, options) -> list[int]:
        Job.objects.filter(cluster__name=CLUSTER).delete()
        Node.objects.filter(cluster__name=CLUSTER).delete()
        Cluster.objects.filter(name=CLUSTER).delete()
        cluster = Cluster.objects.create(name=CLUSTER, executor="kubernetes", kubeconfig_path=kubeconfig,
                                         kube_context="bench", namespace_prefix="bench-")
        nodes = Node.objects.bulk_create([Node(cluster=cluster, name=f"bench-k8s-node-{i:04d}", gpu_model=MODEL,
                                               datacenter="bench", rack=f"r{i // 16}", network_domain=f"ib{i // 64}")
                                          for i in range(node_count)])
        gpus = GPU.objects.bulk_create([GPU(node=n, index=k, uuid=f"GPU-{n.name}-{k}", model=MODEL, memory_mb=81920)
                                        for n in nodes for k in range(8)])
        by_node = {}
        for gpu in gpus:
            by_node.setdefault(gpu.node_id, []).append(gpu)
        owner, _ = get_user_model().objects.get_or_create(username="bench-dispatcher")
        task_type = TaskType.objects.get_or_create(code="training", defaults={"name": "Production training",
                                                                              "priority": 80})[0]
        projects = []
        for t in range(options["tenants"]):
            tenant = Tenant.objects.get_or_create(name=f"bench-t{t:02d}")[0]
            Quota.objects.update_or_create(tenant=tenant, gpu_model=MODEL, defaults={
                "guaranteed_gpus": 8 * node_count, "limit_gpus": 8 * node_count})
            projects.append(Project.objects.get_or_create(tenant=tenant, name="p0")[0])
        now = timezone.now()
        jobs, placements, node_iter = [], [], iter(nodes)
        for i, two in enumerate(multi):
            project = projects[i % len(projects)]
            jobs.append(Job(tenant=project.tenant, project=project, owner=owner, name=f"bench-{i}",
                            task_type=task_type, gpu_model=MODEL, gpus_per_node=8, node_count=2 if two else 1,
                            image="registry.local/pytorch:2.4-cuda12", command="torchrun train.py",
                            max_runtime_minutes=600, priority=80, submitted_at=now - timedelta(minutes=1),
                            admitted_at=now, cluster=cluster))
            placements.append([next(node_iter) for _ in range(2 if two else 1)])
        created = lifecycle.import_jobs(jobs, JobStatus.ADMITTED, "Admitted by bench_dispatch.")
        bulk_insert(JobAllocation, [JobAllocation(job=job, gpu=gpu, allocated_at=now)
                                    for job, chosen in zip(created, placements, strict=True)
                                    for node in chosen for gpu in by_node[node.pk]])
        return [job.pk for job in created]

    def _run(self, kubeconfig: str, multi: list[bool], node_count: int, options) -> dict:
        forget_clients()
        _prepared.clear()
        ids = self._setup(kubeconfig, multi, node_count, options)
        cluster = Cluster.objects.get(name=CLUSTER)
        sync = ClusterSync(cluster)
        start_rv = sync._list()  # the resourceVersion before any job object exists
        started = time.perf_counter()
        summary = dispatch_many(ids, workers=options["workers"])
        dispatch_seconds = time.perf_counter() - started
        dispatching = Job.objects.filter(pk__in=ids, status=JobStatus.DISPATCHING).count()

        # Sync: replay every pod event since before the dispatch through the watch, as a worker would.
        watcher = ClusterSync(cluster)
        watcher.listed = True
        Cluster.objects.filter(pk=cluster.pk).update(watch_resource_version=start_rv)
        watcher.cluster.watch_resource_version = start_rv
        timings = {}
        original = watcher.reconcile

        def timed_reconcile(job_ids=None):
            timings.setdefault("first", time.perf_counter())
            changed = original(job_ids)
            timings["last"] = time.perf_counter()
            return changed

        watcher.reconcile = timed_reconcile
        watch_started = time.perf_counter()
        report = watcher.watch(max(5.0, len(ids) / 100))
        running = Job.objects.filter(pk__in=ids, status=JobStatus.RUNNING).count()
        sync_seconds = timings.get("last", time.perf_counter()) - watch_started
        return {
            "jobs": len(ids), "multi_node_jobs": sum(multi), "pods": len(ids) + sum(multi),
            "workers": options["workers"],
            "dispatched": summary["dispatched"], "failed": summary["failed"], "marked_dispatching": dispatching,
            "dispatch_seconds": round(dispatch_seconds, 3), "jobs_per_second": round(len(ids) / dispatch_seconds, 1),
            "dispatch_phases": {k: round(summary[k], 3) for k in ("load_seconds", "send_seconds", "store_seconds")},
            "sync_events": report.events, "jobs_running": running, "sync_seconds": round(sync_seconds, 3),
            "sync_events_per_second": round(report.events / sync_seconds, 1) if sync_seconds > 0 else None,
            "target_jobs_per_second": 300,
        }
