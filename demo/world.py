"""The demo world: a simulated cluster, three tenants, their users and a mix of jobs.

Used by ``manage.py seed_demo`` (and so by ``make demo``), the demo page tests and the benchmarks. Tests build
their own worlds (``tests/factories.py``), so changing the demo breaks no test of the apps.
Live jobs go through the same ``submit_job`` service as the pages, so the demo exercises the real path;
finished jobs of the past weeks are written with back-dated events through ``lifecycle.transition``.
"""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from fleet.models import GPU, Cluster, Node
from metering.tasks import freeze_last_month
from scheduling import lifecycle, submission
from scheduling.executors.simulated import plan_for
from scheduling.models import FailureCategory, Job, JobAllocation, JobStatus, TaskType
from tenants.models import Membership, PlatformRole, Project, Quota, Role, Tenant

from .governance import seed_governance
from .metering import seed_metering

TASK_TYPES = [
    # code, name, priority, preemptible, requires approval, default max runtime (minutes)
    ("inference", "Inference service", 100, False, False, 7 * 24 * 60),
    ("training", "Production training", 80, False, False, 3 * 24 * 60),
    ("research", "Research experiment", 50, True, False, 24 * 60),
    ("notebook", "Notebook", 40, True, False, 8 * 60),
    ("evaluation", "Evaluation", 30, True, False, 4 * 60),
    ("test", "Test", 10, True, False, 60),
]

GPU_MEMORY_MB = {"H100": 81559, "A100": 81920, "L40S": 46068}

# name, gpu model, datacenter, rack, network domain
NODES = (
    [(f"dc1-r1-h100-{i:02d}", "H100", "dc1", "dc1-r1", "ib-dc1-a") for i in (1, 2)]
    + [(f"dc1-r2-h100-{i:02d}", "H100", "dc1", "dc1-r2", "ib-dc1-a") for i in (3, 4)]
    + [(f"dc1-r3-a100-{i:02d}", "A100", "dc1", "dc1-r3", "ib-dc1-b") for i in (1, 2)]
    + [(f"dc2-r1-a100-{i:02d}", "A100", "dc2", "dc2-r1", "ib-dc2-a") for i in (3, 4)]
    + [(f"dc2-r2-l40s-{i:02d}", "L40S", "dc2", "dc2-r2", "eth-dc2") for i in (1, 2, 3, 4)]
)

TENANTS = {
    "vision": ("Computer Vision Lab", ["detection", "segmentation"],
               {"A100": (16, 16), "H100": (8, 16), "L40S": (8, 32)}),
    "nlp": ("Language Models Group", ["llm-pretrain", "chat-eval"],
            {"H100": (16, 24), "A100": (8, 16), "L40S": (4, 8)}),
    "speech": ("Speech Team", ["asr"], {"L40S": (8, 16), "A100": (4, 8)}),
}

# username, tenant, roles (tenant roles or platform roles)
USERS = [
    ("alice", "vision", [Role.RESEARCHER]),
    ("bob", "nlp", [Role.RESEARCHER]),
    ("carol", "vision", [Role.APPROVER, Role.RESEARCHER]),
    ("erin", "speech", [Role.RESEARCHER]),
    ("frank", "nlp", [Role.TENANT_ADMIN, Role.RESEARCHER]),
    ("dave", None, [PlatformRole.Kind.MANAGER]),
    ("admin", None, [PlatformRole.Kind.PLATFORM_ADMIN]),
]
DEMO_PASSWORD = "demo"  # noqa: S105 - documented demo logins, embedded mode only

LONG = "sim:outcome=succeeded sim:minutes=5000"
# user, project, task type, model, gpus per node, nodes, command. Submitted in this order, each followed
# by a scheduling pass, so the later ones queue for the reasons the comments give.
LIVE_JOBS = [
    ("alice", "vision/detection", "training", "A100", 8, 1, LONG),
    ("carol", "vision/segmentation", "training", "A100", 8, 1, LONG),
    ("bob", "nlp/llm-pretrain", "training", "H100", 8, 3, LONG),
    ("alice", "vision/detection", "research", "H100", 8, 1, LONG),
    ("bob", "nlp/chat-eval", "evaluation", "A100", 4, 1, LONG),
    ("erin", "speech/asr", "research", "L40S", 4, 1, LONG),
    ("erin", "speech/asr", "research", "L40S", 4, 1, LONG),
    ("alice", "vision/segmentation", "notebook", "L40S", 6, 1, LONG),
    ("bob", "nlp/chat-eval", "notebook", "L40S", 4, 1, LONG),
    ("alice", "vision/detection", "research", "L40S", 4, 1, "sim:outcome=succeeded sim:minutes=40"),
    # waits: quota (vision uses 16 of its 16 A100)
    ("alice", "vision/detection", "research", "A100", 8, 1, "python train.py --epochs 90"),
    # waits: not enough free H100 GPUs on one node
    ("alice", "vision/segmentation", "research", "H100", 8, 1, "python seg.py"),
    # waits: a two-node L40S job that cannot be placed whole
    ("carol", "vision/segmentation", "research", "L40S", 8, 2, "torchrun seg_ddp.py"),
    # waits: would fit, but the two-node job above is ahead of it
    ("carol", "vision/detection", "test", "L40S", 2, 1, "pytest -k smoke"),
    # waits: tenant speech has no H100 quota
    ("erin", "speech/asr", "research", "H100", 4, 1, "python asr.py"),
    # waits: nlp uses 24 of its 24 H100
    ("bob", "nlp/llm-pretrain", "research", "H100", 8, 1, "python ablation.py"),
]

HISTORY_OUTCOMES = [
    *[("succeeded", "", "")] * 9,
    ("succeeded", "", ""),
    ("succeeded", "", ""),
    ("failed", FailureCategory.OUT_OF_MEMORY, "CUDA out of memory on GPU 2: tried to allocate 4.00 GiB with "
     "78.9 of 80 GiB in use; the container was killed (exit code 137)."),
    ("failed", FailureCategory.EXIT_CODE, "The program exited with code 1 after 12.0 minutes; see its log."),
    ("failed", FailureCategory.NODE_FAULT, "Node reported XID 79 (GPU has fallen off the bus); the job lost its GPU."),
    ("failed", FailureCategory.IMAGE, "Pulling image failed: manifest unknown (ErrImagePull)."),
    ("cancelled", "", ""),
]


def _uuid(node_name: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{node_name}.gpu{index}.gpuportal.demo"))


@transaction.atomic
def seed_structure() -> dict:
    """Cluster, nodes, GPUs, task types, tenants, projects, quotas and users (idempotent)."""
    for code, name, priority, preemptible, approval, runtime in TASK_TYPES:
        TaskType.objects.update_or_create(code=code, defaults={
            "name": name, "priority": priority, "preemptible": preemptible, "requires_approval": approval,
            "default_max_runtime_minutes": runtime})
    cluster, _ = Cluster.objects.get_or_create(name="sim", defaults={
        "description": "Simulated cluster of the embedded demo"})
    for name, model, dc, rack, network in NODES:
        node, _ = Node.objects.get_or_create(name=name, defaults={
            "cluster": cluster, "gpu_model": model, "datacenter": dc, "rack": rack, "network_domain": network,
            "cpu_milli": 128_000, "memory_mib": 2_097_152})
        for index in range(8):
            GPU.objects.get_or_create(node=node, index=index, defaults={
                "uuid": _uuid(name, index), "model": model, "memory_mb": GPU_MEMORY_MB[model]})
    tenants = {}
    for tenant_name, (display, projects, quotas) in TENANTS.items():
        tenant, _ = Tenant.objects.get_or_create(name=tenant_name, defaults={"display_name": display})
        tenants[tenant_name] = tenant
        for project in projects:
            Project.objects.get_or_create(tenant=tenant, name=project)
        for model, (guaranteed, limit) in quotas.items():
            Quota.objects.update_or_create(tenant=tenant, gpu_model=model, defaults={
                "guaranteed_gpus": guaranteed, "limit_gpus": limit})
    users = {}
    user_model = get_user_model()
    for username, tenant_name, roles in USERS:
        user, created = user_model.objects.get_or_create(username=username, defaults={
            "email": f"{username}@demo.gpuportal.local"})
        if created:
            user.set_password(DEMO_PASSWORD)
            if username == "admin":
                user.is_staff = user.is_superuser = True
            user.save()
        for role in roles:
            if tenant_name:
                Membership.objects.get_or_create(user=user, tenant=tenants[tenant_name], role=role)
            else:
                PlatformRole.objects.get_or_create(user=user, role=role)
        users[username] = user
    return {"cluster": cluster, "tenants": tenants, "users": users}


#: How busy each task type keeps its GPUs in the demo's simulated readings (mean, spread; percent).
DEMO_UTILIZATION = {"inference": (55, 15), "training": (88, 6), "research": (62, 20), "notebook": (12, 10),
                    "evaluation": (48, 15), "test": (25, 15)}


def history_start(now=None):
    """Midnight of the first day of the month two months back: two closed months and this one so far."""
    local = timezone.localtime(now or timezone.now())
    first = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    for _month in range(2):
        first = (first - timedelta(days=1)).replace(day=1)
    return first


def _history_plans(rng, start, now):
    """(owner, tenant, model, task, gpus, submitted, wait, run) of every finished job to create.

    A few jobs a day on every model, long training runs on H100 and A100, and every third day a crunch on
    H100: five 8-GPU training jobs at once that queue behind each other, so the reports have waits and
    demand above capacity to explain."""
    owners = [("alice", "vision"), ("carol", "vision"), ("bob", "nlp"), ("frank", "nlp"), ("erin", "speech")]
    day = start
    index = 0
    while day < now:
        for _n in range(rng.randint(3, 7)):
            username, tenant_name = rng.choice(owners)
            model = rng.choice(sorted(TENANTS[tenant_name][2]))
            task = rng.choice(["training", "research", "research", "notebook", "evaluation", "test"])
            wait = timedelta(minutes=rng.choice([0.2, 1, 5, 30, 90, 240]) * (3 if model == "H100" else 1))
            run = timedelta(minutes=rng.choice([20, 60, 120, 240, 480, 720, 1440]) * rng.uniform(0.7, 1.3))
            yield (username, tenant_name, model, task, rng.choice([1, 2, 4, 8]),
                   day + timedelta(hours=rng.uniform(0, 23)), wait, run)
        for username, tenant_name, model, hours in (("frank", "nlp", "H100", (14, 22)),
                                                    ("alice", "vision", "H100", (10, 18)),
                                                    ("bob", "nlp", "H100", (12, 20)),
                                                    ("carol", "vision", "A100", (10, 20))):
            yield (username, tenant_name, model, "training", 8, day + timedelta(hours=rng.uniform(0, 6)),
                   timedelta(minutes=rng.choice([1, 10, 45])), timedelta(hours=rng.uniform(*hours)))
        if index % 3 == 1:
            for k in range(5):
                username, tenant_name = rng.choice([("bob", "nlp"), ("frank", "nlp"), ("alice", "vision")])
                yield (username, tenant_name, "H100", "training", 8, day + timedelta(hours=9, minutes=k),
                       timedelta(hours=1.5 * k), timedelta(hours=rng.uniform(3, 6)))
        day += timedelta(days=1)
        index += 1


def seed_history(users: dict, start=None, seed: int = 7) -> int:
    """Finished jobs since ``start`` (default: two months back), with back-dated timelines and released
    allocations; the simulated GPU utilisation of each goes into its executor state for the demo readings."""
    rng = random.Random(seed)
    now = timezone.now()
    start = start or history_start(now)
    task_types = {t.code: t for t in TaskType.objects.all()}
    projects = {}
    for project in Project.objects.select_related("tenant"):
        projects.setdefault(project.tenant.name, []).append(project)
    nodes_by_model: dict[str, list[Node]] = {}
    for node in Node.objects.prefetch_related("gpus"):
        nodes_by_model.setdefault(node.gpu_model, []).append(node)
    created = 0
    for username, tenant_name, model, code, gpus, submitted, waited, ran in _history_plans(rng, start, now):
        if submitted + waited + ran > now - timedelta(minutes=30):
            continue  # only finished history; today's work is the live jobs
        task = task_types[code]
        project = rng.choice(projects[tenant_name])
        status, category, message = rng.choice(HISTORY_OUTCOMES)
        job = lifecycle.create_job(
            status=JobStatus.QUEUED, reason=f"Submitted by {username}; task type {task.code} needs no approval.",
            actor=users[username], tenant=project.tenant, project=project, owner=users[username], task_type=task,
            gpu_model=model, name=f"{task.code}-{model.lower()}-{submitted:%m%d-%H%M}", gpus_per_node=gpus,
            node_count=1, image=rng.choice(["registry.local/pytorch:2.4-cuda12", "registry.local/jax:0.4-cuda12"]),
            command="python train.py", max_runtime_minutes=task.default_max_runtime_minutes,
            priority=task.priority, submitted_at=submitted)
        created += 1
        if status == "cancelled":
            lifecycle.transition(job, JobStatus.CANCELLED, f"Cancelled by {username}.", actor=users[username],
                                 at=submitted + waited)
            continue
        node = rng.choice(nodes_by_model[model])
        start_at = submitted + waited
        first_gpu = rng.randrange(0, 8 - gpus + 1)
        JobAllocation.objects.bulk_create([JobAllocation(job=job, gpu=g, allocated_at=start_at)
                                           for g in list(node.gpus.all())[first_gpu:first_gpu + gpus]])
        mean, spread = DEMO_UTILIZATION[code]
        utilization = max(1, min(99, round(rng.gauss(mean, spread))))
        lifecycle.transition(job, JobStatus.ADMITTED, f"Admitted: {gpus} x {model} on {node.name}.", at=start_at,
                             cluster=node.cluster)
        lifecycle.transition(job, JobStatus.DISPATCHING, "Sent to cluster sim (Simulated executor).",
                             at=start_at + timedelta(seconds=1),
                             executor_state={"plan": plan_for(job), "demo_utilization_pct": utilization})
        lifecycle.transition(job, JobStatus.RUNNING, f"Containers started on {node.name}.",
                             at=start_at + timedelta(seconds=40))
        end = start_at + ran
        if status == "succeeded":
            lifecycle.transition(job, JobStatus.SUCCEEDED, "Finished with exit code 0.", at=end, exit_code=0)
        else:
            lifecycle.transition(job, JobStatus.FAILED, str(FailureCategory(category).label), at=end,
                                 failure_category=category, failure_message=message,
                                 exit_code=137 if category == FailureCategory.OUT_OF_MEMORY else
                                 (1 if category == FailureCategory.EXIT_CODE else None))
    return created


def seed_live_jobs(users: dict) -> list[Job]:
    """Submit today's jobs through the normal service; each submission triggers a scheduling pass."""
    jobs = []
    for username, project, task_type, model, gpus, nodes, command in LIVE_JOBS:
        jobs.append(submission.submit_job(users[username], {
            "project": project, "task_type": task_type, "gpu_model": model, "gpus_per_node": gpus,
            "nodes": nodes, "image": "registry.local/pytorch:2.4-cuda12", "command": command}))
    return jobs


def seed_demo(history: bool = True) -> dict:
    world = seed_structure()
    if not Job.objects.exists():
        if history:
            start = history_start()
            world["history"] = seed_history(world["users"], start)
            world["metering"] = seed_metering(start)
            world["frozen"] = freeze_last_month()  # as the beat task does once a month has closed
        world["live"] = seed_live_jobs(world["users"])
        world["governance"] = seed_governance(world["users"])
    return world
