"""Benchmark a job's efficiency (``scheduling.jobs.efficiency``) on PostgreSQL: what its page, its API and its mail
cost for a long run of many GPUs.

    manage.py bench_efficiency --gpus 64 --days 3 --interval 15

Builds (afresh each run, in a cluster of its own) one finished job that held ``--gpus`` GPUs (nodes of 8) for
``--days`` days, with a reading of each GPU every ``--interval`` seconds (written by PostgreSQL itself with
``generate_series``; a quarter of the GPUs busy, so the hint is there to find). Then times ``efficiency_of`` with
its series (the database sums the buckets: what the page, ``GET /api/jobs/{id}/efficiency/`` and the monthly
report run) and the readings summed in Python (the embedded demo's path on SQLite),
checks that both give the same figures, and prints JSON.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from bench.fixtures import fresh_cluster
from fleet.models import GPU, GpuReading, Node
from scheduling import lifecycle
from scheduling.jobs.efficiency import efficiency_of
from scheduling.models import Job, JobAllocation, JobStatus, TaskType
from tenants.models import Project, Tenant

BENCH_CLUSTER = "bench-efficiency"


class Command(BaseCommand):
    help = "Time a long, wide job's efficiency summary and series, in the database and in Python (JSON)."

    def add_arguments(self, parser):
        parser.add_argument("--gpus", type=int, default=64, help="GPUs the job held (in nodes of 8).")
        parser.add_argument("--days", type=float, default=3, help="How long it held them.")
        parser.add_argument("--interval", type=int, default=15, help="Seconds between two readings of a GPU.")

    def handle(self, *args, **options):
        if connection.vendor != "postgresql":
            raise CommandError("bench_efficiency measures PostgreSQL; set DATABASE_URL.")
        gpus = max(8, options["gpus"] // 8 * 8)
        prepared = time.perf_counter()
        job = self._prepare(gpus, timedelta(days=options["days"]), options["interval"])
        prepare_seconds = time.perf_counter() - prepared
        started = time.perf_counter()
        database = efficiency_of(job)
        database_seconds = time.perf_counter() - started
        started = time.perf_counter()
        python = efficiency_of(job, in_database=False)
        python_seconds = time.perf_counter() - started
        self.stdout.write(json.dumps({
            "gpus": gpus, "days": options["days"], "interval_seconds": options["interval"],
            "readings": database.readings, "prepare_seconds": round(prepare_seconds, 1),
            "page_seconds": round(database_seconds, 3), "python_seconds": round(python_seconds, 3),
            "points_per_gpu": max((len(s.times) for s in database.series), default=0),
            "resolution_seconds": database.resolution_seconds, "most_gpus_working": database.most_gpus_working,
            "same_figures": (database.mean_gpu_utilization, database.idle_share, database.most_gpus_working,
                             database.peak_memory_mb) == (python.mean_gpu_utilization, python.idle_share,
                                                          python.most_gpus_working, python.peak_memory_mb),
            "target_page_seconds": 1}, indent=2))

    def _prepare(self, gpus: int, held: timedelta, interval: int) -> Job:
        with transaction.atomic():
            cluster = fresh_cluster(BENCH_CLUSTER, "bench_efficiency")
            nodes = Node.objects.bulk_create([Node(cluster=cluster, name=f"bench-eff-{i:03d}", gpu_model="H100",
                                                   datacenter="bench", rack="bench", network_domain="bench")
                                              for i in range(gpus // 8)])
            held_gpus = GPU.objects.bulk_create([GPU(node=node, index=k, uuid=f"GPU-bench-eff-{node.name}-{k}",
                                                     model="H100", memory_mb=81920)
                                                 for node in nodes for k in range(8)])
            end = timezone.now()
            start = end - held
            tenant, _ = Tenant.objects.get_or_create(name="bench-eff")
            project, _ = Project.objects.get_or_create(tenant=tenant, name="p")
            owner, _ = get_user_model().objects.get_or_create(username="bench-eff-user")
            task_type = TaskType.objects.order_by("pk").first()
            job = lifecycle.create_job(
                status=JobStatus.QUEUED, reason="bench", tenant=tenant, project=project, owner=owner,
                task_type=task_type, gpu_model="H100", name="bench-efficiency", gpus_per_node=8,
                node_count=gpus // 8, image="bench", priority=task_type.priority, submitted_at=start)
            JobAllocation.objects.bulk_create(JobAllocation(job=job, gpu=gpu, allocated_at=start)
                                              for gpu in held_gpus)
            lifecycle.transition(job, JobStatus.ADMITTED, "bench", at=start, cluster=cluster)
            lifecycle.transition(job, JobStatus.DISPATCHING, "bench", at=start)
            lifecycle.transition(job, JobStatus.RUNNING, "bench", at=start)
            lifecycle.transition(job, JobStatus.SUCCEEDED, "bench", at=end)
            busy = {gpu.pk for gpu in held_gpus[: max(1, gpus // 4)]}
            table = GpuReading._meta.db_table
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {table} (gpu_id, at, utilization_pct, memory_used_mb, power_w) "  # noqa: S608
                    "SELECT g, t, CASE WHEN g = ANY(%s) THEN 85 ELSE 0 END, CASE WHEN g = ANY(%s) THEN 60000 "
                    "ELSE 300 END, 300.0 FROM unnest(%s::bigint[]) AS g, "
                    "generate_series(%s::timestamptz, %s::timestamptz - interval '1 microsecond', "
                    "make_interval(secs => %s)) AS t",
                    [list(busy), list(busy), [gpu.pk for gpu in held_gpus], start, end, interval])
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {GpuReading._meta.db_table}")
        return Job.objects.get(pk=job.pk)
