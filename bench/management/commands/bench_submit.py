"""Benchmark submission through the API: ``manage.py bench_submit [--array 10000] [--batch 1000] [--singles 50]``.

Builds a cluster and a tenant of its own, then, each in a transaction that is rolled back (so every run sees the
same world and nothing is left behind): an array of ``--array`` tasks through ``POST /api/jobs/`` and a batch of
``--batch`` jobs through ``POST /api/jobs/batch/``, each timed from the request to the answer (validated, stored,
the pass asked for), followed by one scheduling pass, timed, that admits what fits; and ``--singles`` single
submissions one after the other (their median and 95th percentile). The calls run in this process through the
API's views (DRF's request factory, no HTTP), so the figures are the portal's own cost; the commit, which the
rollback leaves out, is one WAL flush. ``--approval`` submits them of a task type that needs approval: the jobs
wait for the tenant's approvers, and ``*_requests`` says how many requests they opened (an array's tasks share
one). Prints one JSON object with the machine's load before and after. A pass schedules every cluster of the
database: give it a database of its own.
"""

import json
import os
import statistics
import time
from contextlib import contextmanager
from unittest import mock

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.test import TestCase
from rest_framework.test import APIRequestFactory, force_authenticate

from fleet.models import GPU, Cluster, Node
from governance.models import PriorityRequest
from scheduling import triggers
from scheduling.api.batch import JobBatchView
from scheduling.api.views import JobViewSet
from scheduling.models import Job, TaskType
from scheduling.passes.scheduler import run_pass
from tenants.models import Membership, Project, Quota, Role, Tenant

PREFIX = "benchsubmit"
MODEL = "BENCH-SUBMIT-GPU"


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Time an array and a batch submitted through the API and the pass that admits them (JSON)."

    def add_arguments(self, parser):
        parser.add_argument("--array", type=int, default=10_000, help="Tasks of the array.")
        parser.add_argument("--batch", type=int, default=1000, help="Jobs of the batch.")
        parser.add_argument("--singles", type=int, default=50, help="Single submissions, one after the other.")
        parser.add_argument("--nodes", type=int, default=64, help="Nodes of 8 GPUs the pass may fill.")
        parser.add_argument("--approval", action="store_true", help="Of a task type that needs approval (the jobs "
                            "wait for the tenant's approvers, two of them, instead of a pass).")

    def handle(self, *args, **o):
        out = {"loadavg_before": os.getloadavg()[0], "array_tasks": o["array"], "batch_jobs": o["batch"],
               "approval": o["approval"]}
        factory = APIRequestFactory()
        self._approval = o["approval"]
        task_type = f"{PREFIX}-approval" if o["approval"] else f"{PREFIX}-test"
        spec = {"tenant": PREFIX, "project": "sweep", "task_type": task_type, "gpu_model": MODEL,
                "gpus_per_node": 1, "image": "registry.local/bench:1", "command": "sim:minutes=5",
                "max_runtime_minutes": 30}
        scenarios = {
            "array": (JobViewSet.as_view({"post": "create"}), "/api/jobs/",
                      {**spec, "kind": "array", "array": f"0-{o['array'] - 1}"}),
            "batch": (JobBatchView.as_view(), "/api/jobs/batch/",
                      {"jobs": [{**spec, "name": f"{PREFIX}-{i}"} for i in range(o["batch"])]}),
        }
        for name, (view, path, body) in scenarios.items():
            out.update(self._rolled_back(lambda user, name=name, view=view, path=path, body=body: self._bulk(
                user, name, factory, view, path, body), o["nodes"]))
        if o["singles"]:
            out.update(self._rolled_back(lambda user: self._singles(user, factory, spec, o["singles"]), o["nodes"]))
        out["loadavg_after"] = os.getloadavg()[0]
        self.stdout.write(json.dumps(out))

    def _rolled_back(self, measure, nodes: int) -> dict:
        figures = {}
        try:
            with transaction.atomic():
                user = self._world(nodes)
                figures = measure(user)
                raise _Rollback
        except _Rollback:
            pass
        return figures

    def _world(self, nodes: int):
        TaskType.objects.get_or_create(code=f"{PREFIX}-test", defaults={"name": "Bench", "priority": 10})
        TaskType.objects.get_or_create(code=f"{PREFIX}-approval", defaults={
            "name": "Bench approval", "priority": 10, "requires_approval": True})
        cluster = Cluster.objects.create(name=PREFIX)
        made = Node.objects.bulk_create([
            Node(cluster=cluster, name=f"{PREFIX}-{n}", gpu_model=MODEL, datacenter="dc", rack=f"r{n // 8}",
                 network_domain="net", cpu_milli=128_000, memory_mib=1_048_576) for n in range(nodes)])
        GPU.objects.bulk_create([GPU(node=node, index=i, uuid=f"{PREFIX}-{node.pk}-{i}", model=MODEL,
                                     memory_mb=81920) for node in made for i in range(8)])
        tenant = Tenant.objects.create(name=PREFIX, display_name="Bench")
        Project.objects.create(tenant=tenant, name="sweep")
        Quota.objects.create(tenant=tenant, gpu_model=MODEL, guaranteed_gpus=nodes * 8, limit_gpus=nodes * 8)
        user, _ = get_user_model().objects.get_or_create(username=f"{PREFIX}-user")
        Membership.objects.create(user=user, tenant=tenant, role=Role.RESEARCHER)
        if self._approval:  # told of each request, as a tenant's approvers are
            for i in range(2):
                approver, _ = get_user_model().objects.get_or_create(username=f"{PREFIX}-approver-{i}")
                Membership.objects.create(user=approver, tenant=tenant, role=Role.APPROVER)
        return user

    @contextmanager
    def _committing(self):
        """With --approval, what runs once a submission commits (the approval requests and their notices) runs and
        is timed with it: in the portal it runs before the answer leaves, and the rollback would skip it. The pass
        the submission asks for is left out (here it would run inline, or reach a broker for rows that are never
        committed): the benchmark times the pass itself."""
        with mock.patch.object(triggers, "queue_pass", lambda: True), \
                TestCase.captureOnCommitCallbacks(execute=self._approval):
            yield

    def _bulk(self, user, name: str, factory, view, path: str, body: dict) -> dict:
        request = factory.post(path, body, format="json")
        force_authenticate(request, user=user)
        started = time.perf_counter()
        with self._committing():
            response = view(request)
        stored = time.perf_counter() - started
        if response.status_code != 201:
            raise RuntimeError(f"{path} answered {response.status_code}: {str(response.data)[:300]}")
        started = time.perf_counter()
        report = run_pass()
        return {f"{name}_store_seconds": round(stored, 3), f"{name}_stored": Job.objects.filter(
            tenant__name=PREFIX).count(), f"{name}_pass_seconds": round(time.perf_counter() - started, 3),
            f"{name}_admitted": len(report.admitted_ids),
            f"{name}_requests": PriorityRequest.objects.filter(tenant__name=PREFIX).count()}

    def _singles(self, user, factory, spec: dict, count: int) -> dict:
        view, timings = JobViewSet.as_view({"post": "create"}), []
        for i in range(count):
            request = factory.post("/api/jobs/", {**spec, "name": f"{PREFIX}-single-{i}"}, format="json")
            force_authenticate(request, user=user)
            started = time.perf_counter()
            with self._committing():
                response = view(request)
            timings.append(time.perf_counter() - started)
            if response.status_code != 201:
                raise RuntimeError(f"/api/jobs/ answered {response.status_code}: {str(response.data)[:300]}")
        ordered = sorted(timings)
        return {"single_submissions": count, "single_p50_ms": round(statistics.median(ordered) * 1000, 1),
                "single_p95_ms": round(ordered[min(count - 1, int(count * 0.95))] * 1000, 1)}

