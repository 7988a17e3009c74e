"""Business rules shared by pages, API and tasks: validating and submitting jobs, cancelling them,
and reporting quota use. Views call these; they never decide anything themselves."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from gpuportal.validation import whole_number as _int_field
from tenants import access
from tenants.models import Project, Quota, Tenant

from . import lifecycle
from .models import Job, JobStatus, Node, TaskType, Topology

MAX_IMAGE_LENGTH = Job._meta.get_field("image").max_length
MAX_NAME_LENGTH = Job._meta.get_field("name").max_length


@dataclass(frozen=True)
class GpuModelCapacity:
    """What a GPU model offers: how many nodes have it, the most GPUs, CPU and memory of any one of them."""

    gpu_model: str
    nodes: int
    max_gpus_per_node: int
    total_gpus: int
    node_sizes: tuple[int, ...] = ()
    max_cpu_milli: int = 0
    max_memory_mib: int = 0

    def nodes_with_at_least(self, gpus: int) -> int:
        return sum(1 for size in self.node_sizes if size >= gpus)


def gpu_model_catalogue() -> dict[str, GpuModelCapacity]:
    """GPU models the cluster has, from the registered nodes (whatever their health)."""
    per_model: dict[str, list[tuple[int, int, int]]] = {}
    for model, gpus, cpu, mem in Node.objects.annotate(n=Count("gpus")).values_list(
            "gpu_model", "n", "cpu_milli", "memory_mib").order_by("gpu_model"):
        per_model.setdefault(model, []).append((gpus, cpu, mem))
    return {m: GpuModelCapacity(m, len(rows), max(r[0] for r in rows), sum(r[0] for r in rows),
                                tuple(r[0] for r in rows), max(r[1] for r in rows), max(r[2] for r in rows))
            for m, rows in per_model.items()}


def submittable_projects(user):
    """Projects of tenants where ``user`` may submit jobs."""
    projects = Project.objects.visible_to(user).select_related("tenant")
    return [p for p in projects if access.can_submit(user, p.tenant_id)]


def _resolve_project(user, data: dict, errors: dict) -> Project | None:
    """A project names its tenant; ``tenant`` alone picks that tenant's ``default`` project.

    Projects and tenants the user cannot see are reported exactly like ones that do not exist.
    """
    tenant_name = (data.get("tenant") or "").strip() if isinstance(data.get("tenant"), str) else data.get("tenant")
    project_ref = data.get("project")
    visible_tenants = Tenant.objects.visible_to(user)
    tenant = None
    if tenant_name:
        tenant = visible_tenants.filter(name=tenant_name).first()
        if tenant is None:
            errors["tenant"] = _("Unknown tenant %(name)r.") % {"name": tenant_name}
            return None
    projects = Project.objects.visible_to(user).select_related("tenant")
    if project_ref not in (None, ""):
        ref = str(project_ref).strip()
        if "/" in ref:  # "tenant/project", as a job's JSON shows it
            ref_tenant, _sep, ref = ref.partition("/")
            projects = projects.filter(tenant__name=ref_tenant)
        if tenant is not None:
            projects = projects.filter(tenant=tenant)
        matches = list(projects.filter(name=ref)[:2])
        if not matches:
            where = _(" in tenant %(t)s") % {"t": tenant.name} if tenant else ""
            errors["project"] = _("Unknown project %(name)r%(where)s.") % {"name": project_ref, "where": where}
            return None
        if len(matches) > 1:
            errors["project"] = _("Project %(name)r exists in several of your tenants; name the tenant too.") % {
                "name": project_ref}
            return None
        project = matches[0]
    else:
        if tenant is None:
            candidates = [t for t in visible_tenants if access.can_submit(user, t.pk)]
            if len(candidates) != 1:
                errors["project"] = _("Choose a project.")
                return None
            tenant = candidates[0]
        project = projects.filter(tenant=tenant).order_by("name").first()
        if project is None:
            errors["project"] = _("Tenant %(t)s has no project; ask its admin to create one.") % {"t": tenant.name}
            return None
    if not access.can_submit(user, project.tenant_id):
        errors["project"] = _("You may not submit jobs in tenant %(t)s (your role there is read-only).") % {
            "t": project.tenant.name}
        return None
    return project


def validate_job_request(user, data: dict) -> dict:
    """Check a submission and return clean values, or raise ValidationError naming each bad field.

    The same rules serve the form and the API, so both say the same thing about the same input.
    """
    errors: dict[str, str] = {}
    clean: dict = {}
    clean["project"] = _resolve_project(user, data, errors)

    code = data.get("task_type")
    task_type = TaskType.objects.filter(code=code).first() if code else None
    if task_type is None:
        choices = ", ".join(TaskType.objects.values_list("code", flat=True))
        errors["task_type"] = (_("Unknown task type %(code)r; choose one of: %(choices)s.") % {
            "code": code, "choices": choices}) if code else _("Task type is required.")
    clean["task_type"] = task_type

    catalogue = gpu_model_catalogue()
    model_name = (data.get("gpu_model") or "").strip() if isinstance(data.get("gpu_model"), str) else ""
    capacity = catalogue.get(model_name)
    if capacity is None:
        known = ", ".join(catalogue) or _("none yet")
        errors["gpu_model"] = (_("Unknown GPU model %(model)r; the cluster has: %(known)s.") % {
            "model": data.get("gpu_model"), "known": known}) if model_name else _("GPU model is required.")
    clean["gpu_model"] = model_name

    per_node_max = capacity.max_gpus_per_node if capacity else 64
    node_max = capacity.nodes if capacity else 1024
    clean["gpus_per_node"] = _int_field(
        errors, data, "gpus_per_node", 1, max(per_node_max, 1), _("GPUs per node"),
        too_large=_("%%(value)d GPUs per node is more than any %(model)s node has (at most %%(max)d).")
        % {"model": model_name} if capacity else None)
    clean["node_count"] = _int_field(
        errors, data, "nodes", 1, max(node_max, 1), _("Nodes"),
        too_large=_("%%(value)d nodes is more than the %%(max)d %(model)s nodes the cluster has.")
        % {"model": model_name} if capacity else None)

    limit = settings.SCHEDULER["MAX_RUNTIME_MINUTES"]
    runtime = data.get("max_runtime_minutes")
    if runtime in (None, "") and task_type is not None:
        runtime = task_type.default_max_runtime_minutes
    clean["max_runtime_minutes"] = _int_field(errors, {"max_runtime_minutes": runtime}, "max_runtime_minutes",
                                              1, limit, _("Max runtime (minutes)"))

    image = data.get("image")
    image = image.strip() if isinstance(image, str) else ""
    if not image:
        errors["image"] = _("Image is required (for example registry.local/pytorch:2.4).")
    elif len(image) > MAX_IMAGE_LENGTH or any(c.isspace() for c in image):
        errors["image"] = _("Image must be one reference without spaces, at most %(max)d characters.") % {
            "max": MAX_IMAGE_LENGTH}
    clean["image"] = image

    command = data.get("command") or ""
    if not isinstance(command, str) or len(command) > 10000:
        errors["command"] = _("Command must be text of at most 10000 characters.")
    clean["command"] = command if isinstance(command, str) else ""

    topology = data.get("topology") or Topology.ANY
    if topology not in Topology.values:
        errors["topology"] = _("Unknown topology %(t)r; choose one of: %(choices)s.") % {
            "t": topology, "choices": ", ".join(Topology.values)}
    elif topology == Topology.SAME_NODE and clean.get("node_count") not in (None, 1):
        errors["topology"] = _("same_node needs nodes = 1 (got %(n)d).") % {"n": clean["node_count"]}
    clean["topology"] = topology

    share = data.get("gpu_share")
    clean["gpu_milli"] = 1000
    if share not in (None, ""):
        try:
            share_value = float(share)
        except (TypeError, ValueError):
            share_value = -1.0
        if not 0.05 <= share_value <= 1:
            errors["gpu_share"] = _("GPU share must be between 0.05 and 1 (got %(v)s).") % {"v": share}
        elif share_value < 1 and (clean.get("gpus_per_node") != 1 or clean.get("node_count") != 1):
            errors["gpu_share"] = _("A GPU share below 1 needs exactly 1 GPU on 1 node.")
        else:
            clean["gpu_milli"] = round(share_value * 1000)

    for field_name, unit, scale in (("cpus_per_node", _("CPUs per node"), 1000),
                                    ("memory_gb_per_node", _("Memory per node (GB)"), 1024)):
        raw = data.get(field_name)
        clean[field_name] = None
        if raw in (None, ""):
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = -1.0
        limit = (capacity.max_cpu_milli / 1000 if field_name == "cpus_per_node" else capacity.max_memory_mib / 1024) \
            if capacity and (capacity.max_cpu_milli if field_name == "cpus_per_node" else capacity.max_memory_mib) \
            else 1e9
        if not 0 < value <= limit:
            errors[field_name] = _("%(label)s must be above 0 and at most %(max)g (got %(v)s).") % {
                "label": unit, "max": limit, "v": raw}
        else:
            clean[field_name] = round(value * scale)

    if capacity and "gpus_per_node" not in errors and "nodes" not in errors and clean["gpus_per_node"]:
        big_enough = capacity.nodes_with_at_least(clean["gpus_per_node"])
        if clean["node_count"] > big_enough:
            errors["nodes"] = _(
                "%(n)d nodes with %(g)d %(model)s GPUs each can never fit: only %(k)d nodes have %(g)d GPUs "
                "(the largest possible request is %(k)d x %(g)d).") % {
                "n": clean["node_count"], "g": clean["gpus_per_node"], "model": model_name, "k": big_enough}

    name = data.get("name") or ""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH:
        errors["name"] = _("Name must be at most %(max)d characters.") % {"max": MAX_NAME_LENGTH}
    clean["name"] = name.strip() if isinstance(name, str) else ""

    if errors:
        raise ValidationError(errors)
    return clean


def submit_job(user, data: dict) -> Job:
    """Validate and store a job; it queues at once unless its task type needs approval."""
    clean = validate_job_request(user, data)
    project, task_type = clean["project"], clean["task_type"]
    now = timezone.now()
    needs_approval = task_type.requires_approval
    reason = (_("Submitted by %(user)s; task type %(t)s needs approval.") if needs_approval
              else _("Submitted by %(user)s; task type %(t)s needs no approval, queued.")) % {
        "user": user.get_username(), "t": task_type.code}
    with transaction.atomic():
        job = lifecycle.create_job(
            status=JobStatus.PENDING if needs_approval else JobStatus.QUEUED, reason=reason, actor=user,
            tenant=project.tenant, project=project, owner=user,
            name=clean["name"] or f"{task_type.code}-{clean['gpu_model'].lower()}-{now:%m%d-%H%M%S}",
            task_type=task_type, gpu_model=clean["gpu_model"], gpus_per_node=clean["gpus_per_node"],
            node_count=clean["node_count"], image=clean["image"], command=clean["command"],
            max_runtime_minutes=clean["max_runtime_minutes"], priority=task_type.priority, submitted_at=now,
            topology=clean["topology"], gpu_milli=clean["gpu_milli"],
            cpu_milli=clean["cpus_per_node"] or task_type.cpu_milli_per_gpu * clean["gpus_per_node"],
            memory_mib=clean["memory_gb_per_node"] or task_type.memory_mib_per_gpu * clean["gpus_per_node"],
            requeue_on_preemption=str(data.get("requeue_on_preemption", True)).lower() not in ("false", "0", "no"),
        )
        request_scheduling_pass()
    job.refresh_from_db()  # the pass that ran on commit may have admitted it already
    return job


def cancel_job(user, job: Job, reason: str = "") -> Job:
    """Cancel a waiting or running job; the executor stops it and its GPUs are released."""
    from django.core.exceptions import PermissionDenied

    if not access.can_manage_job(user, job.tenant_id, job.owner_id):
        raise PermissionDenied(_("You may not cancel this job."))
    if job.is_terminal:
        raise ValidationError({"status": _("Job #%(id)d has already ended (%(status)s).") % {
            "id": job.pk, "status": job.get_status_display()}})
    from .executors import executor_for

    was_active = job.cluster_id is not None and job.status in ("admitted", "dispatching", "running")
    text = _("Cancelled by %(user)s.") % {"user": user.get_username()}
    if reason:
        text = f"{text} {reason}"
    try:
        with transaction.atomic():
            before = job.status
            lifecycle.transition(job, JobStatus.CANCELLED, text, actor=user)
            if user.pk != job.owner_id:  # the owner cancelling their own job is not a governance action
                from audit import log as audit
                from audit.models import AuditAction

                audit.record(AuditAction.JOB_CANCEL, job, actor=user, reason=text, before={"status": before},
                             after={"status": job.status})
    except lifecycle.InvalidTransition as exc:
        raise ValidationError({"status": _("Job #%(id)d changed state meanwhile; reload and retry.") % {
            "id": job.pk}}) from exc
    if was_active:
        executor_for(job.cluster).stop(job)
    request_scheduling_pass()
    return job


def set_hold(user, job: Job, hold: bool) -> Job:
    """Hold a waiting job (it keeps its place but is not started) or release it. Owners hold as "user";
    tenant and platform admins as "admin"; only an admin releases an admin hold."""
    from django.core.exceptions import PermissionDenied

    from .models import JobEvent

    if not access.can_manage_job(user, job.tenant_id, job.owner_id):
        raise PermissionDenied(_("You may not hold or release this job."))
    if not job.is_waiting:
        raise ValidationError({"status": _("Only a waiting job can be held or released (job #%(id)d is %(s)s).")
                               % {"id": job.pk, "s": job.get_status_display()}})
    is_admin = job.owner_id != user.pk or access.for_user(user).platform_admin
    if not hold and job.held_by == "admin" and not (access.for_user(user).platform_admin or access.has_role(
            user, job.tenant_id, {"tenant_admin"})):
        raise PermissionDenied(_("An admin hold can only be released by an admin."))
    new = ("admin" if is_admin else "user") if hold else ""
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(held_by=new)
        JobEvent.objects.create(job=job, at=timezone.now(), kind=JobEvent.Kind.HOLD, from_status=job.status,
                                to_status=job.status, actor=user,
                                reason=(_("Held by %(user)s.") if hold else _("Released by %(user)s.")) % {
                                    "user": user.get_username()})
        request_scheduling_pass()
    job.held_by = new
    return job


def request_scheduling_pass() -> None:
    """Ask for a pass once the current transaction commits (inline in the embedded mode)."""
    from .tasks import run_scheduling_pass

    transaction.on_commit(lambda: run_scheduling_pass.delay())


@dataclass(frozen=True)
class QuotaUse:
    tenant: str
    gpu_model: str
    guaranteed: int
    limit: int
    used: int
    queued: int

    @property
    def used_pct(self) -> float:
        return 100.0 * self.used / self.limit if self.limit else 0.0

    @property
    def guaranteed_pct(self) -> float:
        return 100.0 * self.guaranteed / self.limit if self.limit else 0.0

    @property
    def borrowing(self) -> int:
        return max(0, self.used - self.guaranteed)


def quota_usage(user) -> list[QuotaUse]:
    """Each visible tenant's quota per GPU model, with GPUs in use and GPUs asked for by queued jobs."""
    jobs = Job.objects.visible_to(user)
    used = {(r["tenant__name"], r["gpu_model"]): r["gpus"] for r in jobs.active()
            .values("tenant__name", "gpu_model").annotate(gpus=Sum("allocations__fraction"))}
    queued = {}
    for job in jobs.filter(status=JobStatus.QUEUED).values("tenant__name", "gpu_model", "gpus_per_node", "node_count"):
        key = (job["tenant__name"], job["gpu_model"])
        queued[key] = queued.get(key, 0) + job["gpus_per_node"] * job["node_count"]
    rows = []
    for q in Quota.objects.visible_to(user).select_related("tenant"):
        key = (q.tenant.name, q.gpu_model)
        rows.append(QuotaUse(q.tenant.name, q.gpu_model, q.guaranteed_gpus, q.limit_gpus,
                             int(used.get(key) or 0), queued.get(key, 0)))
    return rows


@dataclass
class ModelCapacity:
    """What can run now on one GPU model: the bridge between what was bought and what can run."""

    gpu_model: str
    nodes: int = 0
    schedulable_nodes: int = 0
    gpus: int = 0
    allocated: int = 0
    free: int = 0
    unhealthy: int = 0
    unavailable: int = 0  # on cordoned or draining nodes
    largest_on_node: int = 0
    largest_in_rack: int = 0
    largest_in_rack_where: str = ""
    largest_in_cluster: int = 0
    node_rows: list = field(default_factory=list)

    @property
    def allocated_pct(self) -> float:
        return 100.0 * self.allocated / self.gpus if self.gpus else 0.0


def largest_gang(free_per_node: list[int]) -> int:
    """The most GPUs one job can get from these nodes with the same number of GPUs on each node."""
    return max((g * sum(1 for f in free_per_node if f >= g) for g in set(free_per_node) if g), default=0)


def capacity_summary(with_nodes: bool = False) -> list[ModelCapacity]:
    """Cluster capacity per GPU model. Not tenant data: every signed-in user may see it."""
    from .models import AdminState, Health, JobAllocation

    busy = set(JobAllocation.objects.filter(released_at__isnull=True).values_list("gpu_id", flat=True))
    summary: dict[str, ModelCapacity] = {}
    free_by: dict[tuple, list[int]] = {}
    for node in Node.objects.select_related("cluster").prefetch_related("gpus"):
        row = summary.setdefault(node.gpu_model, ModelCapacity(node.gpu_model))
        gpus = list(node.gpus.all())
        taken = sum(1 for g in gpus if g.pk in busy)
        usable = node.schedulable
        free = sum(1 for g in gpus if g.pk not in busy and g.healthy) if usable else 0
        row.nodes += 1
        row.schedulable_nodes += usable
        row.gpus += len(gpus)
        row.allocated += taken
        row.free += free
        row.unhealthy += len(gpus) if node.health == Health.UNHEALTHY else sum(1 for g in gpus if not g.healthy)
        if node.admin_state != AdminState.ACTIVE and node.health != Health.UNHEALTHY:
            row.unavailable += len(gpus)
        row.largest_on_node = max(row.largest_on_node, free)
        free_by.setdefault((node.gpu_model, "rack", node.cluster.name, node.rack), []).append(free)
        free_by.setdefault((node.gpu_model, "cluster", node.cluster.name), []).append(free)
        if with_nodes:
            row.node_rows.append({"node": node, "gpus": gpus, "busy": busy, "taken": taken, "free": free})
    for key, frees in free_by.items():
        row, best = summary[key[0]], largest_gang(frees)
        if key[1] == "rack" and best > row.largest_in_rack:
            row.largest_in_rack, row.largest_in_rack_where = best, key[3]
        elif key[1] == "cluster":
            row.largest_in_cluster = max(row.largest_in_cluster, best)
    return [summary[k] for k in sorted(summary)]


def set_node_admin_state(user, node: Node, state: str, reason: str = ""):
    """Cordon, drain or reactivate a node (platform admins); recorded as a node event with the actor."""
    from django.core.exceptions import PermissionDenied

    from .models import AdminState, NodeEvent

    if not access.for_user(user).platform_admin:
        raise PermissionDenied(_("Only platform admins may change a node's state."))
    if state not in AdminState.values:
        raise ValidationError({"state": _("Unknown node state %(s)r.") % {"s": state}})
    if node.admin_state == state:
        return node
    before = node.admin_state
    with transaction.atomic():
        node.admin_state = state
        node.save(update_fields=["admin_state", "last_updated"])
        text = _("%(user)s set the node %(state)s.") % {"user": user.get_username(),
                                                          "state": AdminState(state).label.lower()}
        NodeEvent.objects.create(node=node, at=timezone.now(), kind=NodeEvent.Kind.ADMIN, from_state=before,
                                 to_state=state, reason=f"{text} {reason}".strip(), actor=user)
        from audit import log as audit
        from audit.models import AuditAction

        audit.record(AuditAction.NODE_ADMIN, node, actor=user, reason=reason, before={"admin_state": before},
                     after={"admin_state": state})
        request_scheduling_pass()
    return node


def cluster_queue(user, cluster_name: str | None = None) -> list[dict]:
    """The waiting jobs in queue order; other tenants' jobs show their tenant, size and reason code only."""
    from .models import Cluster, JobQueueState

    visible = set(Job.objects.visible_to(user).waiting().values_list("pk", flat=True))
    states = (JobQueueState.objects.select_related("job__tenant", "job__task_type", "job__owner", "job__cluster")
              .filter(job__status__in=("pending", "queued")).order_by("queue_position", "job__submitted_at"))
    clusters = {c.name for c in Cluster.objects.all()}
    rows = []
    for state in states:
        job = state.job
        home = job.cluster.name if job.cluster else None
        if cluster_name and cluster_name in clusters and home and home != cluster_name:
            continue
        mine = job.pk in visible
        rows.append({"position": state.queue_position, "tenant": job.tenant.name, "job": job if mine else None,
                     "id": job.pk if mine else None, "size": f"{job.node_count} x {job.gpus_per_node:g}"
                     + (f" x {job.gpu_share:g}" if job.gpu_milli < 1000 else "") + f" {job.gpu_model}",
                     "task_type": job.task_type.code, "priority": job.priority, "reason": state.wait_reason,
                     "message": job.wait_reason_message if mine else "",
                     "estimated_start": state.estimated_start})
    return rows


def fair_share_report() -> list:
    """Each tenant's weight, fair share, decayed usage and running GPUs: why another tenant goes first."""
    from . import engine
    from .models import Cluster
    from .scheduler import usage_history

    now = timezone.now()
    cluster = Cluster.objects.order_by("name").first()
    half_life = (cluster.fair_share_half_life_hours if cluster else 168) * 3600
    running = tuple(engine.RunningJob(
        id=j["id"], tenant=j["tenant__name"], gpu_model=j["gpu_model"],
        placements=(engine.Placement(0, tuple(range(j["gpus_per_node"] * j["node_count"])), j["gpu_milli"]),),
        started_at=(j["started_at"] or now).timestamp())
        for j in Job.objects.active().values("id", "tenant__name", "gpu_model", "gpus_per_node", "node_count",
                                             "gpu_milli", "started_at"))
    snapshot = engine.Snapshot(nodes=(), running=running, usage=usage_history(now, half_life),
                               tenants=tuple(engine.TenantInfo(t.name, t.fair_share_weight)
                                             for t in Tenant.objects.all()),
                               now=now.timestamp(), policy=engine.Policy(half_life_seconds=half_life))
    from .engine.passes import decayed_usage, tenant_shares

    return tenant_shares(snapshot, decayed_usage(snapshot))
