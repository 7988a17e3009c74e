"""The demo world: a simulated cluster, three tenants, their users and a mix of jobs.

Used by ``manage.py seed_demo`` (and so by ``make demo``), the demo page tests and the benchmarks. Tests build
their own worlds (``tests/factories.py``), so changing the demo breaks no test of the apps.
Live jobs go through the same ``submit_job`` service as the pages, so the demo exercises the real path;
finished jobs of the past weeks are written with back-dated events through ``lifecycle.transition``.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone
from django.utils.translation import gettext_noop

from fleet.models import GPU, AdminState, Cluster, ExecutorKind, Node
from gpuportal.text import phrases
from gpuportal.text.phrases import Phrase
from metering.reports import monthly as reports
from metering.tasks import freeze_last_month
from scheduling import lifecycle
from scheduling.executors.simulated.executor import SimulatedExecutor, plan_for
from scheduling.executors.simulated.log import WATCHDOG_SECONDS
from scheduling.jobs import submission
from scheduling.models import FailureCategory, Job, JobAllocation, JobStatus, TaskType
from scheduling.passes.dispatch import KEPT_STATE
from scheduling.tasks import record_update
from tenants.models import Membership, PlatformRole, Project, Quota, Role, Tenant

from .governance import seed_governance
from .metering import seed_improvement_action, seed_metering

TASK_TYPES = [
    # code, name, priority, preemptible, requires approval, default max runtime (minutes)
    ("inference", "Inference service", 100, False, False, 7 * 24 * 60),
    ("training", "Production training", 80, False, False, 3 * 24 * 60),
    ("research", "Research experiment", 50, True, False, 24 * 60),
    ("notebook", "Notebook", 40, True, False, 8 * 60),
    ("evaluation", "Evaluation", 30, True, False, 4 * 60),
    ("test", "Test", 10, True, False, 60),
]

GPU_MEMORY_MB = {"H100": 81559, "A100": 81920, "L40S": 46068, "Ascend910B": 65536, "MI300X": 196608}

# name, gpu model, datacenter, rack, network domain
NODES = (
    [(f"dc1-r1-h100-{i:02d}", "H100", "dc1", "dc1-r1", "ib-dc1-a") for i in (1, 2)]
    + [(f"dc1-r2-h100-{i:02d}", "H100", "dc1", "dc1-r2", "ib-dc1-a") for i in (3, 4)]
    + [(f"dc1-r3-a100-{i:02d}", "A100", "dc1", "dc1-r3", "ib-dc1-b") for i in (1, 2)]
    + [(f"dc2-r1-a100-{i:02d}", "A100", "dc2", "dc2-r1", "ib-dc2-a") for i in (3, 4)]
    + [(f"dc2-r2-l40s-{i:02d}", "L40S", "dc2", "dc2-r2", "eth-dc2") for i in (1, 2, 3, 4)]
    # a mixed fleet: a Huawei Ascend pool (HCCS) and an AMD Instinct pool (Infinity Fabric) beside NVIDIA
    + [(f"dc3-r1-npu-910b-{i:02d}", "Ascend910B", "dc3", "dc3-r1", "roce-dc3") for i in (1, 2)]
    + [(f"dc3-r2-amd-mi300x-{i:02d}", "MI300X", "dc3", "dc3-r2", "roce-dc3") for i in (1, 2)]
    + [(f"dc1-r4-h100-{i:02d}", "H100", "dc1", "dc1-r4", "ib-dc1-a") for i in (5, 6)]
)
#: The history's fleet change: two H100 nodes joined in the middle of the last closed month (the what-if backtest
#: replays the weeks before with them added and compares with the weeks after, ``metering.whatif.backtest``). They
#: are cordoned since this month began (a firmware update), so that today's jobs meet the fleet the live scenario
#: was written for.
ADDED_MID_MONTH = ("dc1-r4-h100-05", "dc1-r4-h100-06")


def fleet_change(now=None) -> tuple[datetime, datetime]:
    """When the nodes of ``ADDED_MID_MONTH`` joined (local midnight of the 15th of the last closed month) and when
    they were cordoned (the first of this month)."""
    this_month = timezone.localtime(now or timezone.now()).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    last_month = (this_month - timedelta(days=1)).replace(day=1)
    return last_month.replace(day=15), this_month

TENANTS = {
    "vision": ("Computer Vision Lab", ["detection", "segmentation"],
               {"A100": (16, 16), "H100": (8, 16), "L40S": (8, 32), "MI300X": (4, 8)}),
    "nlp": ("Language Models Group", ["llm-pretrain", "chat-eval"],
            {"H100": (16, 24), "A100": (8, 16), "L40S": (4, 8), "Ascend910B": (8, 16)}),
    "speech": ("Speech Team", ["asr"], {"L40S": (8, 16), "A100": (4, 8), "Ascend910B": (4, 8), "MI300X": (4, 8)}),
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
    ("bob", "nlp/llm-pretrain", "training", "Ascend910B", 8, 1, LONG),  # the mixed fleet's pools at work
    ("erin", "speech/asr", "research", "MI300X", 4, 1, LONG),
    # waits: quota (vision uses 16 of its 16 A100)
    ("alice", "vision/detection", "research", "A100", 8, 1, "python train.py --epochs 90"),
    # waits: not enough free H100 GPUs on one node
    ("alice", "vision/segmentation", "research", "H100", 8, 1, "python seg.py"),
    # waits: a two-node L40S job that cannot be placed whole
    ("carol", "vision/segmentation", "research", "L40S", 8, 2, "torchrun seg_ddp.py"),
    # waits: would fit, but the two-node job above is ahead of it
    ("carol", "vision/detection", "test", "L40S", 2, 1, "pytest -k smoke"),
    # waits: nlp uses 24 of its 24 H100
    ("bob", "nlp/llm-pretrain", "research", "H100", 8, 1, "python ablation.py"),
]

#: What became of a finished job of the history, drawn for each: how its plan ends ("cancelled": while it
#: waited). A node fault is retried on another node, where the job then succeeds.
HISTORY_OUTCOMES = [
    *["succeeded"] * 11, FailureCategory.OUT_OF_MEMORY, FailureCategory.EXIT_CODE, FailureCategory.IMAGE,
    FailureCategory.TIMEOUT, FailureCategory.NODE_FAULT, "cancelled",
]
#: The first multi-node run of the history and every eighth after it first lose the network between their nodes
#: (NCCL's watchdog), are diagnosed to one node, retried away from it and then succeed; the others succeed at once.
#: One in eight stays below the acceptance checklist's 20 % (``metering.acceptance.checklist``) from the 11th run on,
#: which two closed months always reach: the demo's multi-node row shows failures localised, not a network to check.
COMMUNICATION_EVERY = 8
#: A communication failure is seen only once NCCL's watchdog gave up on the hung collective.
COMMUNICATION_FIRST_RUN = timedelta(seconds=WATCHDOG_SECONDS + 60)
#: How long a retried history job waits for its next attempt (the next scheduling passes), and the longest
#: an attempt waits for its image (``plan_for``'s pull, plus the dispatch).
RETRY_WAIT = timedelta(minutes=2)
PULL_BOUND = timedelta(seconds=92)


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
    joined, _cordoned = fleet_change()
    for name, model, dc, rack, network in NODES:
        node, made = Node.objects.get_or_create(name=name, defaults={
            "cluster": cluster, "gpu_model": model, "datacenter": dc, "rack": rack, "network_domain": network,
            "cpu_milli": 128_000, "memory_mib": 2_097_152,
            "admin_state": AdminState.CORDONED if name in ADDED_MID_MONTH else AdminState.ACTIVE})
        if made:  # registered before the history that runs on it (the two of ADDED_MID_MONTH: when they joined)
            Node.objects.filter(pk=node.pk).update(
                created=joined if name in ADDED_MID_MONTH else history_start() - timedelta(days=1))
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


class HistoryPlan(NamedTuple):
    """A finished job of the history to create: who ran what on which model, when it was submitted, how long it
    waited for its GPUs and how long it ran. A multi-node run names its project and how it ends; the others draw
    both when they are created (``HISTORY_OUTCOMES``)."""

    owner: str
    tenant: str
    model: str
    task: str
    gpus: int  # per node
    submitted: datetime
    wait: timedelta
    run: timedelta
    nodes: int = 1
    project: str = ""
    outcome: str = ""


def _history_plans(rng, start, now):
    """The single-node jobs of the history (``HistoryPlan``s).

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
            yield HistoryPlan(username, tenant_name, model, task, rng.choice([1, 2, 4, 8]),
                              day + timedelta(hours=rng.uniform(0, 23)), wait, run)
        for username, tenant_name, model, hours in (("frank", "nlp", "H100", (14, 22)),
                                                    ("alice", "vision", "H100", (10, 18)),
                                                    ("bob", "nlp", "H100", (12, 20)),
                                                    ("carol", "vision", "A100", (10, 20))):
            yield HistoryPlan(username, tenant_name, model, "training", 8, day + timedelta(hours=rng.uniform(0, 6)),
                              timedelta(minutes=rng.choice([1, 10, 45])), timedelta(hours=rng.uniform(*hours)))
        if index % 3 == 1:
            for k in range(5):
                username, tenant_name = rng.choice([("bob", "nlp"), ("frank", "nlp"), ("alice", "vision")])
                yield HistoryPlan(username, tenant_name, "H100", "training", 8, day + timedelta(hours=9, minutes=k),
                                  timedelta(hours=1.5 * k), timedelta(hours=rng.uniform(3, 6)))
        day += timedelta(days=1)
        index += 1


def _multi_node_plans(rng, start, now):
    """The multi-node runs of the history, as a site's month has them: twice a week, then once, and so on, bob or
    frank pre-trains in nlp/llm-pretrain on two whole H100 nodes (16 of nlp's 24 H100) for most of a day. The
    first of the history and every ``COMMUNICATION_EVERY``-th first fail on the network between their nodes, so
    even a few days of history show a communication failure localised to a node and its retry."""
    week, weeks, index = start, 0, 0
    while week < now:
        for offset in sorted(rng.sample(range(7), 2 if weeks % 2 == 0 else 1)):
            outcome = "succeeded" if index % COMMUNICATION_EVERY else FailureCategory.COMMUNICATION
            yield HistoryPlan(rng.choice(["bob", "frank"]), "nlp", "H100", "training", 8,
                              week + timedelta(days=offset, hours=rng.uniform(7, 11)),
                              timedelta(minutes=rng.choice([1, 10, 45])), timedelta(hours=rng.uniform(8, 20)),
                              nodes=2, project="llm-pretrain", outcome=outcome)
            index += 1
        week += timedelta(days=7)
        weeks += 1


class _GpuCalendar:
    """When each GPU of the demo cluster is free again, so that no two back-dated runs share a GPU. A node of
    ``ADDED_MID_MONTH`` takes work only from when it joined until it was cordoned (``fleet_change``)."""

    def __init__(self):
        self.free_at: dict[int, datetime] = {}
        self.nodes: dict[str, list[tuple[Node, list[GPU]]]] = defaultdict(list)
        joined, cordoned = fleet_change()
        self.window: dict[int, tuple[datetime, datetime]] = {}
        for node in Node.objects.prefetch_related("gpus").order_by("name"):
            self.nodes[node.gpu_model].append((node, sorted(node.gpus.all(), key=lambda gpu: gpu.index)))
            if node.name in ADDED_MID_MONTH:
                self.window[node.pk] = (joined, cordoned)

    def _options(self, model: str, count: int, at: datetime, avoid) -> list[tuple[datetime, Node, list[GPU]]]:
        """For each node of ``model`` (not one of ``avoid``, taking work at the time): from when on it has ``count``
        free GPUs, and which."""
        options = []
        for node, gpus in self.nodes[model]:
            opens, closes = self.window.get(node.pk, (at, None))
            earliest = max(at, opens)
            if node.pk not in avoid:
                free = sorted(gpus, key=lambda gpu: (max(self.free_at.get(gpu.pk, earliest), earliest), gpu.index))
                free = free[:count]
                start = max(max(self.free_at.get(gpu.pk, earliest), earliest) for gpu in free)
                if closes is None or start < closes:
                    options.append((start, node, free))
        return options

    def place(self, rng, model: str, count: int, at: datetime, avoid=()) -> tuple[datetime, Node, list[GPU]]:
        """The earliest moment from ``at`` when a node (not one of ``avoid``) has ``count`` free GPUs, one of
        the nodes that has them then, and those GPUs."""
        options = self._options(model, count, at, avoid)
        earliest = min(option[0] for option in options)
        return rng.choice([option for option in options if option[0] == earliest])

    def place_nodes(self, rng, model: str, count: int, nodes: int, at: datetime,
                    avoid=()) -> tuple[datetime, list[tuple[Node, list[GPU]]]]:
        """The earliest moment from ``at`` when ``nodes`` nodes (none of ``avoid``) each have ``count`` free GPUs,
        as a gang starts: all at once. That moment and the chosen nodes (by name) with their GPUs. A GPU stays
        free once it is (``free_at`` is the end of its last run), so the moment is the ``nodes``-th earliest of
        the nodes' own."""
        options = self._options(model, count, at, avoid)
        if len(options) < nodes:
            raise ValueError(f"{nodes} nodes of {model} asked for, {len(options)} to choose from")
        earliest = sorted(option[0] for option in options)[nodes - 1]
        chosen = rng.sample([option for option in options if option[0] <= earliest], nodes)
        return earliest, [(node, gpus) for _at, node, gpus in sorted(chosen, key=lambda option: option[1].name)]

    def hold(self, placements: list[tuple[Node, list[GPU]]], until: datetime) -> None:
        """The GPUs of every node of an attempt are busy until it ends."""
        self.free_at.update((gpu.pk, until) for _node, gpus in placements for gpu in gpus)


def _attempt(job: Job, placements: list[tuple[Node, list[GPU]]], start_at: datetime, plan: dict,
             utilization: int) -> tuple[Job, datetime]:
    """Run one back-dated attempt of ``job`` on the GPUs of ``placements`` (one (node, GPUs) per node, as the
    scheduler admits it) through the simulated executor at the pace of real time (so its messages, diagnosis and
    log are those of a live run, its failure retried by the same rule); the job as it ended the attempt, and
    when."""
    gpus = [gpu for _node, node_gpus in placements for gpu in node_gpus]
    JobAllocation.objects.bulk_create([JobAllocation(job=job, gpu=gpu, allocated_at=start_at) for gpu in gpus])
    where = "; ".join(f"{node.name} (GPU {', '.join(str(gpu.index) for gpu in node_gpus)})"
                      for node, node_gpus in placements)
    cluster = placements[0][0].cluster
    lifecycle.transition(job, JobStatus.ADMITTED, Phrase(gettext_noop("Admitted: %(n)s x %(model)s on %(where)s."), {
        "n": str(len(gpus)), "model": job.gpu_model, "where": where}), at=start_at, cluster=cluster)
    dispatched = start_at + timedelta(seconds=1)
    kept = {key: value for key, value in job.executor_state.items() if key in KEPT_STATE}
    sent = Phrase(gettext_noop("Sent to cluster %(c)s (%(kind)s executor)."), {
        "c": cluster.name, "kind": phrases.label(ExecutorKind(cluster.executor).label)})
    lifecycle.transition(job, JobStatus.DISPATCHING, sent, at=dispatched,
                         executor_state={**kept, "plan": plan, "time_scale": 1.0, "demo_utilization_pct": utilization,
                                         "dispatched_at": dispatched.isoformat()})
    job = Job.objects.select_related("task_type").prefetch_related(Prefetch(  # two queries, not four
        "allocations", queryset=JobAllocation.objects.select_related("gpu__node"))).get(pk=job.pk)
    executor, moment = SimulatedExecutor(cluster), dispatched + timedelta(seconds=plan["pull_seconds"])
    while True:
        update = executor.observe(job, moment)
        if update is None or not record_update(job, update, moment):
            raise RuntimeError(f"the back-dated job #{job.pk} did not move at {moment}")
        if job.status != JobStatus.RUNNING:
            return job, moment
        moment += timedelta(seconds=min(plan["run_minutes"], job.max_runtime_minutes) * 60, milliseconds=1)


def _place(calendar: _GpuCalendar, rng, plan: HistoryPlan, at: datetime,
           avoid=()) -> tuple[datetime, list[tuple[Node, list[GPU]]]]:
    """When and where an attempt of ``plan`` starts from ``at``: on one node, or on ``plan.nodes`` at once."""
    if plan.nodes == 1:
        start_at, node, chosen = calendar.place(rng, plan.model, plan.gpus, at, avoid=avoid)
        return start_at, [(node, chosen)]
    return calendar.place_nodes(rng, plan.model, plan.gpus, plan.nodes, at, avoid=avoid)


def _history_job(users, rng, calendar: _GpuCalendar, task: TaskType, project: Project, plan: HistoryPlan,
                 cutoff: datetime) -> Job | None:
    """One finished job of the history, or None when it would not have finished by ``cutoff``. An infrastructure
    failure (a node fault; on several nodes, their communication) is retried away from the node its diagnosis
    names, where the rest of the run succeeds."""
    username, model, gpus, submitted, waited = plan.owner, plan.model, plan.gpus, plan.submitted, plan.wait
    outcome = plan.outcome or rng.choice(HISTORY_OUTCOMES)
    retried = outcome in (FailureCategory.NODE_FAULT, FailureCategory.COMMUNICATION)
    limit = timedelta(minutes=task.default_max_runtime_minutes)
    ran = limit * 1.5 if outcome == FailureCategory.TIMEOUT else min(plan.run, limit * rng.uniform(0.3, 0.95))
    first_run = ran * rng.uniform(0.1, 0.5) if retried else min(ran, limit)
    if outcome == FailureCategory.COMMUNICATION:
        first_run = max(first_run, COMMUNICATION_FIRST_RUN)
    start_at, placements = _place(calendar, rng, plan, submitted + waited)
    end = start_at + first_run + PULL_BOUND
    if retried:  # where and when its retry would run: away from all its nodes, at the latest
        avoid = {node.pk for node, _gpus in placements}
        end = _place(calendar, rng, plan, end + RETRY_WAIT, avoid)[0] + ran - first_run + PULL_BOUND
    if end > cutoff:
        return None  # only finished history; today's work is the live jobs
    owner = users[username]
    command = (f"torchrun --nnodes {plan.nodes} --nproc-per-node {gpus} pretrain.py" if plan.nodes > 1
               else "python train.py")
    job = lifecycle.create_job(
        status=JobStatus.QUEUED, reason=Phrase(gettext_noop(
            "Submitted by %(user)s; task type %(t)s needs no approval, queued."), {"user": username, "t": task.code}),
        actor=owner, tenant=project.tenant, project=project, owner=owner, task_type=task, gpu_model=model,
        name=f"{task.code}-{model.lower()}-{submitted:%m%d-%H%M}", gpus_per_node=gpus, node_count=plan.nodes,
        image=rng.choice(["registry.local/pytorch:2.4-cuda12", "registry.local/jax:0.4-cuda12"]),
        command=command, max_runtime_minutes=task.default_max_runtime_minutes, priority=task.priority,
        submitted_at=submitted)
    if outcome == "cancelled":
        lifecycle.transition(job, JobStatus.CANCELLED, Phrase(gettext_noop("Cancelled by %(user)s."), {
            "user": username}), actor=owner, at=submitted + waited)
        return job
    mean, spread = DEMO_UTILIZATION[task.code]
    utilization = max(1, min(99, round(rng.gauss(mean, spread))))
    run_plan = {**plan_for(job), "outcome": outcome, "run_minutes": round(first_run.total_seconds()) / 60}
    if outcome == FailureCategory.TIMEOUT:
        run_plan["run_minutes"] = ran.total_seconds() / 60  # beyond its max runtime, which stops it
    job, ended = _attempt(job, placements, start_at, run_plan, utilization)
    calendar.hold(placements, ended)
    if job.status == JobStatus.QUEUED:  # retried by the rule of every executor: the rest of the run elsewhere
        start_at, placements = _place(calendar, rng, plan, ended + RETRY_WAIT, job.executor_state["avoid_nodes"])
        run_plan = {**plan_for(job), "outcome": "succeeded",
                    "run_minutes": round((ran - first_run).total_seconds()) / 60}
        ended = _attempt(job, placements, start_at, run_plan, utilization)[1]
        calendar.hold(placements, ended)
    return job


def seed_history(users: dict, start=None, seed: int = 7) -> int:
    """Finished jobs since ``start`` (default: two months back), with back-dated timelines and released
    allocations, run through the simulated executor in real time (their failures have their diagnosis, their
    evidence and their log; a node fault, or a multi-node run's communication failure, is retried away from its
    node); the simulated GPU utilisation of each goes into its executor state for the demo readings. The
    multi-node runs are drawn apart (``_multi_node_plans``), so the single-node plans stay those of ``seed``."""
    rng = random.Random(seed)
    now = timezone.now()
    start = start or history_start(now)
    task_types = {t.code: t for t in TaskType.objects.all()}
    projects = {}
    for project in Project.objects.select_related("tenant"):
        projects.setdefault(project.tenant.name, []).append(project)
    calendar = _GpuCalendar()
    created = 0
    plans = sorted([*_history_plans(rng, start, now), *_multi_node_plans(random.Random(seed + 1), start, now)],
                   key=lambda plan: plan.submitted + plan.wait)  # in the order they start
    for plan in plans:
        project = (next(p for p in projects[plan.tenant] if p.name == plan.project) if plan.project
                   else rng.choice(projects[plan.tenant]))
        created += _history_job(users, rng, calendar, task_types[plan.task], project, plan,
                                now - timedelta(minutes=30)) is not None
    return created


def seed_live_jobs(users: dict) -> list[Job]:
    """Submit today's jobs through the normal service; each submission triggers a scheduling pass."""
    jobs = []
    for username, project, task_type, model, gpus, nodes, command in LIVE_JOBS:
        notebook = task_type == "notebook"  # notebooks one can open (a stand-in Jupyter on the simulated cluster)
        fields = {
            "project": project, "task_type": task_type, "gpu_model": model, "gpus_per_node": gpus,
            "nodes": nodes, "kind": "notebook" if notebook else "batch", "command": "" if notebook else command,
            "image": "registry.local/jupyter:cuda12" if notebook else "registry.local/pytorch:2.4-cuda12"}
        if (username, task_type) == ("alice", "training"):  # her run's TensorBoard opens through the portal
            fields["ports"] = ["tensorboard:6006"]
        jobs.append(submission.submit_job(users[username], fields))
    # an inference service that serves (two replicas, answering through the portal)
    jobs.append(submission.submit_job(users["bob"], {
        "project": "nlp/chat-eval", "task_type": "inference", "gpu_model": "L40S", "gpus_per_node": 1,
        "kind": "service", "replicas": 2, "port": 8000, "name": "chat-assistant",
        "image": "registry.local/vllm:0.6-cuda12", "command": "vllm serve /models/chat-7b --port 8000"}))
    return jobs


def seed_demo(history: bool = True) -> dict:
    world = seed_structure()
    if not Job.objects.exists():
        if history:
            start = history_start()
            world["history"] = seed_history(world["users"], start)
            world["metering"] = seed_metering(start)
            world["frozen"] = freeze_last_month()  # as the beat task does once a month has closed
            world["action"] = seed_improvement_action(world["users"], reports.last_closed_month())
        world["live"] = seed_live_jobs(world["users"])
        world["governance"] = seed_governance(world["users"])
    return world
