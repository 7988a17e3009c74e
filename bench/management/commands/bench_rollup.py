"""Benchmark the monthly rollup on PostgreSQL: a month of agent readings for 1,000 GPUs, then one rollup.

    manage.py bench_rollup --samples 10000000 --gpus 1000 --month 2026-10

Builds (once; reused while the parameters match) a bench cluster of ``--gpus`` GPUs in nodes of 8, jobs
that keep them busy in two 4-GPU lanes per node (about 90 % allocated), and ``--samples`` GPU readings
spread evenly over the month (1,000 GPUs and 10 million samples: one reading per GPU every 268 s), written
by PostgreSQL itself with ``generate_series``. Then times ``rollup`` over the whole month and the monthly
report page rendered from the rollups, and prints JSON.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.test import RequestFactory
from django.urls import reverse

from bench.fixtures import fresh_cluster
from fleet.models import GPU, Cluster, GpuReading, Node
from gpuportal.storage.db import bulk_insert
from gpuportal.text.dates import day_start, next_month
from metering.reports import monthly as reports
from metering.reports.views import render_report_page
from metering.usage.rollup import rollup
from scheduling import lifecycle
from scheduling.models import Job, JobAllocation, JobEvent, JobStatus, TaskType
from tenants.models import PlatformRole, Project, Tenant

BENCH_CLUSTER = "bench-rollup"
MODELS = ("H100", "A100", "L40S")


class Command(BaseCommand):
    help = "Time the full-month rollup over millions of GPU readings, and the report page built from it (JSON)."

    def add_arguments(self, parser):
        parser.add_argument("--samples", type=int, default=10_000_000, help="GPU readings in the month.")
        parser.add_argument("--gpus", type=int, default=1000, help="GPUs (in nodes of 8).")
        parser.add_argument("--month", default="2026-10", help="YYYY-MM")
        parser.add_argument("--tenants", type=int, default=20)
        parser.add_argument("--repeat", type=int, default=2, help="Rollup runs (the first is reported).")
        parser.add_argument("--seed", type=int, default=3)

    def handle(self, *args, **options):
        if connection.vendor != "postgresql":
            raise CommandError("bench_rollup measures PostgreSQL; set DATABASE_URL (see `make bench-rollup`).")
        try:
            month = reports.parse_month(options["month"])
        except ValueError as exc:
            raise CommandError(f"--month: {exc}") from None
        params = {"samples": options["samples"], "gpus": options["gpus"] // 8 * 8, "month": options["month"],
                  "tenants": options["tenants"], "seed": options["seed"]}
        prepared = time.perf_counter()
        reused = self._prepare(month, params)
        prepare_seconds = time.perf_counter() - prepared
        last_day = next_month(month) - timedelta(days=1)
        runs = []
        for _run in range(max(1, options["repeat"])):
            result = rollup(month, last_day, force=True)
            runs.append(result)
        page_ms, build_ms = self._time_report(month)
        first = runs[0]
        self.stdout.write(json.dumps({
            "samples": GpuReading.objects.filter(gpu__node__cluster__name=BENCH_CLUSTER).count(),
            "gpus": params["gpus"], "month": params["month"], "data_reused": reused,
            "prepare_seconds": round(prepare_seconds, 1), "allocation_pieces": first.pieces,
            "daily_rows": first.daily_rows, "job_facts": first.job_facts,
            "rollup_seconds": round(first.seconds, 2), "rollup_seconds_runs": [round(r.seconds, 2) for r in runs],
            "report_page_ms": page_ms, "report_build_ms": build_ms, "target_rollup_seconds": 30,
            "target_report_page_ms": 500}, indent=2))

    # --- fixture -----------------------------------------------------------------------------------------

    def _prepare(self, month, params) -> bool:
        cluster = Cluster.objects.filter(name=BENCH_CLUSTER).first()
        if cluster is not None and cluster.description == json.dumps(params, sort_keys=True):
            return True
        self.stderr.write("Generating the bench month (once; reused while parameters match)…")
        with transaction.atomic():
            cluster = fresh_cluster(BENCH_CLUSTER, "")
            gpus = self._inventory(cluster, params["gpus"])
            self._jobs(month, gpus, params, cluster)
            self._readings(month, cluster, params["samples"], params["gpus"])
            cluster.description = json.dumps(params, sort_keys=True)
            cluster.save(update_fields=["description"])
        with connection.cursor() as cursor:  # index-only scans need a fresh visibility map
            cursor.execute(f"VACUUM ANALYZE {GpuReading._meta.db_table}")
        return False

    def _inventory(self, cluster, count: int) -> list[GPU]:
        nodes = Node.objects.bulk_create([Node(
            cluster=cluster, name=f"bench-{i:04d}", gpu_model=MODELS[i % len(MODELS)], datacenter="bench",
            rack=f"bench-r{i // 16}", network_domain=f"bench-ib{i // 32}") for i in range(count // 8)])
        return GPU.objects.bulk_create([GPU(node=node, index=k, uuid=f"GPU-bench-{node.name}-{k}",
                                            model=node.gpu_model, memory_mb=81920)
                                        for node in nodes for k in range(8)])

    def _jobs(self, month, gpus, params, cluster) -> None:
        rng = random.Random(params["seed"])
        users = get_user_model().objects
        tenants, projects, owners = [], [], []
        for t in range(params["tenants"]):
            tenant, _ = Tenant.objects.get_or_create(name=f"bench-t{t:02d}")
            tenants.append(tenant)
            projects.append([Project.objects.get_or_create(tenant=tenant, name=f"p{p}")[0] for p in range(3)])
            owners.append(users.get_or_create(username=f"bench-user-{t:02d}")[0])
        task_types = list(TaskType.objects.all())
        t0, t1 = day_start(month), day_start(next_month(month))
        by_node: dict[int, list[GPU]] = {}
        for gpu in gpus:
            by_node.setdefault(gpu.node_id, []).append(gpu)
        jobs, lanes = [], []
        for node_gpus in by_node.values():
            for lane in (node_gpus[:4], node_gpus[4:]):
                moment = t0 - timedelta(hours=rng.uniform(0, 12))
                while moment < t1:
                    start = moment + timedelta(hours=rng.expovariate(1.0))
                    end = start + timedelta(hours=rng.uniform(1, 16))
                    t = rng.randrange(len(tenants))
                    task = rng.choice(task_types)
                    jobs.append(Job(
                        tenant=tenants[t], project=rng.choice(projects[t]), owner=owners[t], name="bench",
                        task_type=task, gpu_model=lane[0].model, gpus_per_node=4, image="bench", command="",
                        max_runtime_minutes=24 * 60, priority=task.priority, cluster=cluster,
                        submitted_at=start - timedelta(minutes=rng.expovariate(1 / 20)), admitted_at=start,
                        started_at=start, finished_at=end))
                    lanes.append((lane, start, end))
                    moment = end
        created = lifecycle.import_jobs(jobs, JobStatus.SUCCEEDED, "Imported by bench_rollup.")
        bulk_insert(JobEvent, [JobEvent(job=job, at=job.admitted_at, from_status=JobStatus.QUEUED,
                                        to_status=JobStatus.ADMITTED, reason="bench") for job in created])
        bulk_insert(JobAllocation, [JobAllocation(job=job, gpu=gpu, allocated_at=start, released_at=end)
                                    for job, (lane, start, end) in zip(created, lanes, strict=True) for gpu in lane])

    def _readings(self, month, cluster, samples: int, gpu_count: int) -> None:
        t0, t1 = day_start(month), day_start(next_month(month))
        step = (t1 - t0).total_seconds() * gpu_count / samples
        table, gpu_table, node_table = GpuReading._meta.db_table, GPU._meta.db_table, Node._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (gpu_id, at, utilization_pct, memory_used_mb, temperature_c, power_w) "  # noqa: S608
                f"SELECT g.id, ts, (random() * 100)::smallint, (random() * 80000)::int, 40, 300 "
                f"FROM generate_series(%s::timestamptz, %s::timestamptz - make_interval(secs => %s), "
                f"make_interval(secs => %s)) AS ts "
                f"CROSS JOIN {gpu_table} g JOIN {node_table} n ON n.id = g.node_id WHERE n.cluster_id = %s "
                f"ORDER BY ts LIMIT %s", [t0, t1, step, step, cluster.id, samples])

    # --- report timing -----------------------------------------------------------------------------------

    def _time_report(self, month) -> tuple[float, float]:
        manager, _ = get_user_model().objects.get_or_create(username="bench-manager")
        PlatformRole.objects.get_or_create(user=manager, role=PlatformRole.Kind.MANAGER)
        request = RequestFactory().get(reverse("metering:platform-report", args=[f"{month:%Y-%m}"]))
        request.user = manager
        page, build = [], []
        for _run in range(5):
            started = time.perf_counter()
            data = reports.build_report(month)
            built = time.perf_counter()
            response = render_report_page(request, month, None, data)
            assert response.status_code == 200
            page.append((time.perf_counter() - started) * 1000)
            build.append((built - started) * 1000)
        return round(statistics.median(page), 1), round(statistics.median(build), 1)
