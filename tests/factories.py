"""The tests' own worlds, built here and not from the demo's seed (changing the demo must not break a test).

``build_world()`` makes the standard lab most tests use: one simulated cluster ``sim`` with four H100, four
A100 and four L40S nodes of 8 GPUs in two datacenters, the tenants vision, nlp and speech with their quotas,
and users with their roles (password ``demo``). The smaller factories make one thing each.
"""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from fleet.models import GPU, Cluster, Node
from scheduling import lifecycle
from scheduling.models import Job, JobQueueState, TaskType, queue_places
from scheduling.passes import queue_states
from tenants.models import Membership, PlatformRole, Project, Quota, Role, Tenant

PASSWORD = "demo"

#: code -> (priority, preemptible, default max runtime in minutes)
TASK_TYPES = {"inference": (100, False, 10080), "training": (80, False, 4320), "research": (50, True, 1440),
              "notebook": (40, True, 480), "evaluation": (30, True, 240), "test": (10, True, 60)}
GPU_MEMORY_MB = {"H100": 81559, "A100": 81920, "L40S": 46068, "H200": 143771}

#: (datacenter, rack, network domain, model, node numbers)
RACKS = [("dc1", "dc1-r1", "ib-dc1-a", "H100", (1, 2)), ("dc1", "dc1-r2", "ib-dc1-a", "H100", (3, 4)),
         ("dc1", "dc1-r3", "ib-dc1-b", "A100", (1, 2)), ("dc2", "dc2-r1", "ib-dc2-a", "A100", (3, 4)),
         ("dc2", "dc2-r2", "eth-dc2", "L40S", (1, 2, 3, 4))]

#: tenant -> (projects, {model: (guaranteed, limit)})
TENANTS = {"vision": (["detection", "segmentation"], {"A100": (16, 16), "H100": (8, 16), "L40S": (8, 32)}),
           "nlp": (["llm-pretrain", "chat-eval"], {"H100": (16, 24), "A100": (8, 16), "L40S": (4, 8)}),
           "speech": (["asr"], {"L40S": (8, 16), "A100": (4, 8)})}

#: username -> (tenant or None, roles)
USERS = {"alice": ("vision", [Role.RESEARCHER]), "bob": ("nlp", [Role.RESEARCHER]),
         "carol": ("vision", [Role.APPROVER, Role.RESEARCHER]), "erin": ("speech", [Role.RESEARCHER]),
         "frank": ("nlp", [Role.TENANT_ADMIN, Role.RESEARCHER]), "dave": (None, [PlatformRole.Kind.MANAGER]),
         "admin": (None, [PlatformRole.Kind.PLATFORM_ADMIN])}


def make_task_type(code: str, priority: int = 50, preemptible: bool = True, runtime: int = 1440,
                   **fields) -> TaskType:
    return TaskType.objects.update_or_create(code=code, defaults={
        "name": code.title(), "priority": priority, "preemptible": preemptible,
        "default_max_runtime_minutes": runtime, **fields})[0]


def make_node(cluster: Cluster, name: str, model: str, gpus: int = 8, datacenter: str = "dc1", rack: str = "r1",
              network_domain: str = "net", **fields) -> Node:
    node = Node.objects.create(cluster=cluster, name=name, gpu_model=model, datacenter=datacenter, rack=rack,
                               network_domain=network_domain, **{"cpu_milli": 128_000, "memory_mib": 2_097_152,
                                                                 **fields})
    GPU.objects.bulk_create(GPU(node=node, index=i, uuid=f"GPU-{uuid.uuid4()}", model=model,
                                memory_mb=GPU_MEMORY_MB.get(model, 81920)) for i in range(gpus))
    return node


def make_tenant(name: str, projects=("default",), quotas: dict | None = None) -> Tenant:
    tenant = Tenant.objects.create(name=name, display_name=name.title())
    for project in projects:
        Project.objects.create(tenant=tenant, name=project)
    for model, (guaranteed, limit) in (quotas or {}).items():
        Quota.objects.create(tenant=tenant, gpu_model=model, guaranteed_gpus=guaranteed, limit_gpus=limit)
    return tenant


def make_user(username: str, tenant: Tenant | None = None, roles=(Role.RESEARCHER,)):
    user = get_user_model().objects.create_user(username, f"{username}@test.gpuportal.local", PASSWORD,
                                                is_staff=username == "admin", is_superuser=username == "admin")
    for role in roles:
        if tenant is not None:
            Membership.objects.create(user=user, tenant=tenant, role=role)
        else:
            PlatformRole.objects.create(user=user, role=role)
    return user


def build_world() -> dict:
    """The standard lab (see the module's docstring), in one transaction: a test that commits pays one commit
    for it, not one per row."""
    with transaction.atomic():
        return _build_world()


def _build_world() -> dict:
    for code, (priority, preemptible, runtime) in TASK_TYPES.items():
        make_task_type(code, priority, preemptible, runtime)
    cluster = Cluster.objects.create(name="sim", description="Simulated cluster of the tests")
    for datacenter, rack, network, model, numbers in RACKS:
        for number in numbers:
            make_node(cluster, f"{rack}-{model.lower()}-{number:02d}", model, datacenter=datacenter, rack=rack,
                      network_domain=network)
    tenants = {name: make_tenant(name, projects, quotas) for name, (projects, quotas) in TENANTS.items()}
    users = {name: make_user(name, tenants.get(tenant), roles) for name, (tenant, roles) in USERS.items()}
    return {"cluster": cluster, "tenants": tenants, "users": users}


def make_job(owner, tenant: Tenant, status: str, name: str = "job", gpu_model: str = "A100", **fields):
    """A job stored straight in ``status`` (lifecycle.import_jobs: one event), with any of its fields set (times,
    exit code, size); no pass runs for it."""
    defaults = {"project": Project.objects.filter(tenant=tenant).first(), "task_type": TaskType.objects.first(),
                "gpus_per_node": 1, "image": "registry.local/img", "priority": 50, "max_runtime_minutes": 60}
    return lifecycle.import_jobs([Job(owner=owner, tenant=tenant, name=name, gpu_model=gpu_model,
                                      submitted_at=fields.pop("submitted_at", None) or timezone.now(),
                                      **{**defaults, **fields})], status, "test fixture")[0]


def make_queue_state(job, reason: str = "", params: dict | None = None, position: int | None = None,
                     tenant_position: int = 1, estimated_start=None, earliest_start=None, latest_start=None):
    """What a pass would have written of a waiting job: its reason row and, with a ``position``, its place in the
    queue table (the other jobs' places kept; places among a model's jobs counted as the pass counts them)."""
    JobQueueState.objects.update_or_create(job=job, defaults={"wait_reason": reason,
                                                              "wait_reason_params": params or {}})
    if position is None:
        return
    table = queue_places()
    places = [(pk, place.position, place.tenant_position,
               *(t.timestamp() if t else None for t in (place.estimated_start, place.earliest_start,
                                                        place.latest_start)))
              for pk, place in ((pk, table.get(pk)) for pk in table.index) if pk != job.pk]
    places.append((job.pk, position, tenant_position,
                   *(t.timestamp() if t else None for t in (estimated_start, earliest_start, latest_start))))
    models = dict(Job.objects.filter(pk__in=[p[0] for p in places]).values_list("pk", "gpu_model"))
    queue_states.write_table(queue_states.place_rows([p for p in places if p[0] in models], models),
                             timezone.now())
