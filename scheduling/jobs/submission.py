"""Submitting a job: the one declaration of the submit fields, the rules that check them, and the write.

``SUBMIT_FIELDS`` is the single description of a submission's body. The page's form
(``forms.JobSubmitForm``), the API's request serializer and its OpenAPI schema
(``api.serializers.JobSubmitSerializer``) are built from it, and ``validate_job_request`` takes its labels
and fixed limits from it, so the three can no longer disagree about a field. Limits that depend on the
fleet (how many GPUs a node of a model has) come from the GPU-model catalogue at validation time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop

from fleet.catalogue import GpuModelCapacity, gpu_model_catalogue
from gpuportal.phrases import Phrase
from gpuportal.validation import whole_number
from scheduling import lifecycle
from scheduling.models import Job, JobGroup, JobStatus, JobTemplateVersion, TaskType, Topology, WorkloadKind, label_of
from scheduling.tasks import request_scheduling_pass
from tenants import access
from tenants.models import Project, Quota, Tenant
from tenants.quotas import effective_quotas, quota_gpus

#: The most tasks one array may have and the most replicas one service may ask for.
MAX_ARRAY_TASKS = 1000
MAX_REPLICAS = 64


def _max_runtime() -> int:
    return settings.SCHEDULER["MAX_RUNTIME_MINUTES"]


@dataclass(frozen=True)
class SubmitField:
    """One field of a submission: its kind (text, int, float, choice, bool), label, help and fixed limits."""

    name: str
    kind: str
    label: str
    help_text: str = ""
    required: bool = False
    min_value: float | None = None
    max_value: float | None = None
    max_length: int | None = None
    choices: tuple = ()
    default: object = None


SUBMIT_FIELDS: tuple[SubmitField, ...] = (
    SubmitField("kind", "choice", gettext_lazy("Kind"), gettext_lazy(
        "Batch: runs to completion. Notebook: a Jupyter server you open from the job page. Service: replicas "
        "that serve HTTP until stopped. Array: one task per index."),
                choices=tuple(WorkloadKind.choices), default=WorkloadKind.BATCH),
    SubmitField("template_version", "int", gettext_lazy("Template version"),
                gettext_lazy("The template version the request came from (set by the form)."), min_value=1),
    SubmitField("tenant", "text", gettext_lazy("Tenant"), gettext_lazy("Tenant name; optional when the project "
                                                                      "names it."), max_length=64),
    SubmitField("project", "text", gettext_lazy("Project"), gettext_lazy("Project name, or tenant/project."),
                max_length=200),
    SubmitField("name", "text", gettext_lazy("Name"), gettext_lazy("Optional; a name is made up if empty."),
                max_length=Job._meta.get_field("name").max_length),
    SubmitField("task_type", "text", gettext_lazy("Task type"), gettext_lazy("A task type code, e.g. research."),
                required=True, max_length=32),
    SubmitField("gpu_model", "text", gettext_lazy("GPU model"), gettext_lazy("A GPU model the cluster has."),
                required=True, max_length=64),
    SubmitField("accept_models", "text", gettext_lazy("Acceptable models"), gettext_lazy(
        'Optional: other models it may run on, e.g. "A100,H100", "vendor:amd" or "memory>=80" (GB); each is held '
        'to its own quota and the job lands only on one of them.'), max_length=500),
    SubmitField("gpus_per_node", "int", gettext_lazy("GPUs per node"), required=True, min_value=1, default=1),
    SubmitField("nodes", "int", gettext_lazy("Nodes"), min_value=1, default=1),
    SubmitField("topology", "choice", gettext_lazy("Topology"), gettext_lazy("Where the nodes of a multi-node job "
                                                                            "must be."),
                choices=tuple(Topology.choices), default=Topology.ANY),
    SubmitField("gpu_share", "float", gettext_lazy("GPU share"),
                gettext_lazy("Below 1 (e.g. 0.25): a share of one GPU, packed with others."),
                min_value=0.05, max_value=1, default=1),
    SubmitField("cpus_per_node", "float", gettext_lazy("CPUs per node"),
                gettext_lazy("Empty: the task type's CPUs per GPU.")),
    SubmitField("memory_gb_per_node", "float", gettext_lazy("Memory per node (GB)"),
                gettext_lazy("Empty: the task type's default.")),
    SubmitField("image", "text", gettext_lazy("Image"), gettext_lazy("One image reference, e.g. "
                                                                    "registry.local/pytorch:2.4-cuda12."),
                required=True, max_length=Job._meta.get_field("image").max_length),
    SubmitField("command", "text", gettext_lazy("Command"), max_length=10000),
    SubmitField("max_runtime_minutes", "int", gettext_lazy("Max runtime (minutes)"),
                gettext_lazy("Empty: the task type's default."), min_value=1,
                max_value=settings.SCHEDULER["MAX_RUNTIME_MINUTES"]),
    SubmitField("requeue_on_preemption", "bool", gettext_lazy("Requeue when preempted"), default=True),
    SubmitField("replicas", "int", gettext_lazy("Replicas"), gettext_lazy(
        "Service: how many copies serve, each with the GPUs above on one node."), min_value=1,
                max_value=MAX_REPLICAS, default=1),
    SubmitField("port", "int", gettext_lazy("Port"), gettext_lazy("Service: the port the program listens on."),
                min_value=1, max_value=65535, default=8000),
    SubmitField("array", "text", gettext_lazy("Array indices"), gettext_lazy(
        "Array: indices as 0-99, 0-99:2 (a step) or 1,3,7; each task gets its index in GPUPORTAL_ARRAY_INDEX."),
                max_length=200),
    SubmitField("array_parallelism", "int", gettext_lazy("Tasks at once"), gettext_lazy(
        "Array: the most tasks running at the same time; empty: no limit."), min_value=1, max_value=MAX_ARRAY_TASKS),
)
FIELDS = {f.name: f for f in SUBMIT_FIELDS}


def _label(name: str) -> str:
    return str(FIELDS[name].label)


def submittable_projects(user):
    """Projects of tenants where ``user`` may submit jobs."""
    projects = Project.objects.visible_to(user).select_related("tenant")
    return [p for p in projects if access.can_submit(user, p.tenant_id)]


def _text(data: dict, name: str) -> str:
    value = data.get(name)
    return value.strip() if isinstance(value, str) else ""


def _project_by_reference(user, ref: str, tenant, errors: dict) -> Project | None:
    projects = Project.objects.visible_to(user).select_related("tenant")
    if "/" in ref:  # "tenant/project", as a job's JSON shows it
        ref_tenant, _sep, ref = ref.partition("/")
        projects = projects.filter(tenant__name=ref_tenant)
    if tenant is not None:
        projects = projects.filter(tenant=tenant)
    matches = list(projects.filter(name=ref)[:2])
    if not matches:
        where = _(" in tenant %(t)s") % {"t": tenant.name} if tenant else ""
        errors["project"] = _("Unknown project %(name)r%(where)s.") % {"name": ref, "where": where}
        return None
    if len(matches) > 1:
        errors["project"] = _("Project %(name)r exists in several of your tenants; name the tenant too.") % {
            "name": ref}
        return None
    return matches[0]


def _resolve_project(user, data: dict, errors: dict) -> Project | None:
    """A project names its tenant; ``tenant`` alone picks that tenant's first project.

    Projects and tenants the user cannot see are reported exactly like ones that do not exist.
    """
    raw_tenant = data.get("tenant")
    tenant_name = raw_tenant.strip() if isinstance(raw_tenant, str) else raw_tenant
    visible_tenants = Tenant.objects.visible_to(user)
    tenant = None
    if tenant_name:
        tenant = visible_tenants.filter(name=tenant_name).first()
        if tenant is None:
            errors["tenant"] = _("Unknown tenant %(name)r.") % {"name": tenant_name}
            return None
    ref = str(data.get("project") or "").strip()
    if ref:
        project = _project_by_reference(user, ref, tenant, errors)
    else:
        if tenant is None:
            candidates = [t for t in visible_tenants if access.can_submit(user, t.pk)]
            if len(candidates) != 1:
                errors["project"] = _("Choose a project.")
                return None
            tenant = candidates[0]
        project = Project.objects.filter(tenant=tenant).order_by("name").first()
        if project is None:
            errors["project"] = _("Tenant %(t)s has no project; ask its admin to create one.") % {"t": tenant.name}
    if project is not None and not access.can_submit(user, project.tenant_id):
        errors["project"] = _("You may not submit jobs in tenant %(t)s (your role there is read-only).") % {
            "t": project.tenant.name}
        return None
    return project


def _task_type(data: dict, errors: dict) -> TaskType | None:
    code = data.get("task_type")
    task_type = TaskType.objects.filter(code=code).first() if isinstance(code, str) and code else None
    if task_type is None:
        choices = ", ".join(TaskType.objects.values_list("code", flat=True))
        errors["task_type"] = (_("Unknown task type %(code)r; choose one of: %(choices)s.") % {
            "code": code, "choices": choices}) if code else _("Task type is required.")
    return task_type


_MEMORY_AT_LEAST = re.compile(r"^memory>=(\d{1,4})$")


def resolve_models(spec: str, catalogue: dict[str, GpuModelCapacity]) -> list[str]:
    """The models an ``accept_models`` spec names, in the order given: model names, ``vendor:<vendor>`` (every
    model of that vendor) and ``memory>=<GB>``; ValueError naming the first part that matches nothing."""
    found: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        memory = _MEMORY_AT_LEAST.match(part.replace(" ", ""))
        if part.startswith("vendor:"):
            matches = sorted(m for m, c in catalogue.items() if c.vendor == part.removeprefix("vendor:").strip())
        elif memory:
            matches = sorted(m for m, c in catalogue.items() if c.memory_gb >= int(memory[1]))
        else:
            matches = [part] if part in catalogue else []
        if not matches:
            raise ValueError(part)
        found += [m for m in matches if m not in found]
    return found


def _accept_models(data: dict, errors: dict) -> list[str]:
    """Resolve ``accept_models``; the first becomes the GPU model when none is named, and a named GPU model
    leads the list."""
    spec = _text(data, "accept_models")
    if not spec:
        return []
    if not settings.SCHEDULER.get("ALLOW_MODEL_SETS", True):
        errors["accept_models"] = _("This site runs each job on the one GPU model it names.")
        return []
    catalogue = gpu_model_catalogue()
    try:
        models = resolve_models(spec, catalogue)
    except ValueError as bad:
        errors["accept_models"] = _("%(part)r names no GPU model of the cluster; it has: %(known)s.") % {
            "part": str(bad), "known": ", ".join(catalogue) or _("none yet")}
        return []
    primary = _text(data, "gpu_model")
    if not primary:
        data["gpu_model"] = models[0] if models else ""
    elif primary not in models:
        models.insert(0, primary)
    return models if len(models) > 1 else []


def _gpu_model(data: dict, errors: dict) -> tuple[str, GpuModelCapacity | None]:
    catalogue = gpu_model_catalogue()
    model_name = _text(data, "gpu_model")
    capacity = catalogue.get(model_name)
    if capacity is None:
        known = ", ".join(catalogue) or _("none yet")
        errors["gpu_model"] = (_("Unknown GPU model %(model)r; the cluster has: %(known)s.") % {
            "model": data.get("gpu_model"), "known": known}) if model_name else _("GPU model is required.")
    return model_name, capacity


def _size(data: dict, errors: dict, clean: dict, capacity: GpuModelCapacity | None) -> None:
    """GPUs per node and nodes, bounded by what the model's nodes have."""
    model = clean["gpu_model"]
    clean["gpus_per_node"] = whole_number(
        errors, data, "gpus_per_node", 1, max(capacity.max_gpus_per_node if capacity else 64, 1),
        _label("gpus_per_node"),
        too_large=_("%%(value)d GPUs per node is more than any %(model)s node has (at most %%(max)d).")
        % {"model": model} if capacity else None)
    clean["node_count"] = whole_number(
        errors, {"nodes": data.get("nodes", FIELDS["nodes"].default)}, "nodes", 1,
        max(capacity.nodes if capacity else 1024, 1), _label("nodes"),
        too_large=_("%%(value)d nodes is more than the %%(max)d %(model)s nodes the cluster has.")
        % {"model": model} if capacity else None)
    if capacity and "gpus_per_node" not in errors and "nodes" not in errors:
        big_enough = capacity.nodes_with_at_least(clean["gpus_per_node"])
        if clean["node_count"] > big_enough:
            errors["nodes"] = _(
                "%(n)d nodes with %(g)d %(model)s GPUs each can never fit: only %(k)d nodes have %(g)d GPUs "
                "(the largest possible request is %(k)d x %(g)d).") % {
                "n": clean["node_count"], "g": clean["gpus_per_node"], "model": model, "k": big_enough}


def _runtime(data: dict, errors: dict, task_type: TaskType | None, kind: str) -> int | None:
    runtime = data.get("max_runtime_minutes")
    if runtime in (None, "") and kind == WorkloadKind.SERVICE:
        return None  # a service runs until stopped unless a max runtime is set
    if runtime in (None, "") and task_type is not None:
        runtime = task_type.default_max_runtime_minutes
    return whole_number(errors, {"max_runtime_minutes": runtime}, "max_runtime_minutes", 1, _max_runtime(),
                        _label("max_runtime_minutes"))


def _program(data: dict, errors: dict, clean: dict) -> None:
    """Image, command and name: text within the declared lengths."""
    image, limit = _text(data, "image"), FIELDS["image"].max_length
    if not image:
        errors["image"] = _("Image is required (for example registry.local/pytorch:2.4).")
    elif len(image) > limit or any(c.isspace() for c in image):
        errors["image"] = _("Image must be one reference without spaces, at most %(max)d characters.") % {
            "max": limit}
    clean["image"] = image
    command = data.get("command") or ""
    if not isinstance(command, str) or len(command) > FIELDS["command"].max_length:
        errors["command"] = _("Command must be text of at most %(max)d characters.") % {
            "max": FIELDS["command"].max_length}
    clean["command"] = command if isinstance(command, str) else ""
    name = data.get("name") or ""
    if not isinstance(name, str) or len(name) > FIELDS["name"].max_length:
        errors["name"] = _("Name must be at most %(max)d characters.") % {"max": FIELDS["name"].max_length}
    clean["name"] = name.strip() if isinstance(name, str) else ""


def _placement(data: dict, errors: dict, clean: dict) -> None:
    """Topology and GPU share."""
    topology = data.get("topology") or Topology.ANY
    if topology not in Topology.values:
        errors["topology"] = _("Unknown topology %(t)r; choose one of: %(choices)s.") % {
            "t": topology, "choices": ", ".join(Topology.values)}
    elif topology == Topology.SAME_NODE and clean.get("node_count") not in (None, 1):
        errors["topology"] = _("same_node needs nodes = 1 (got %(n)d).") % {"n": clean["node_count"]}
    clean["topology"] = topology
    share, spec = data.get("gpu_share"), FIELDS["gpu_share"]
    clean["gpu_milli"] = 1000
    if share in (None, ""):
        return
    try:
        share_value = float(share)
    except (TypeError, ValueError):
        share_value = -1.0
    if not spec.min_value <= share_value <= spec.max_value:
        errors["gpu_share"] = _("GPU share must be between %(min)g and %(max)g (got %(v)s).") % {
            "min": spec.min_value, "max": spec.max_value, "v": share}
    elif share_value < 1 and (clean.get("gpus_per_node") != 1 or clean.get("node_count") != 1):
        errors["gpu_share"] = _("A GPU share below 1 needs exactly 1 GPU on 1 node.")
    else:
        clean["gpu_milli"] = round(share_value * 1000)


def _host_resources(data: dict, errors: dict, clean: dict, capacity: GpuModelCapacity | None) -> None:
    """CPUs and memory per node, at most what the model's largest node has."""
    for name, scale, largest in (("cpus_per_node", 1000, capacity.max_cpu_milli if capacity else 0),
                                 ("memory_gb_per_node", 1024, capacity.max_memory_mib if capacity else 0)):
        raw = data.get(name)
        clean[name] = None
        if raw in (None, ""):
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = -1.0
        limit = largest / scale if largest else 1e9
        if not 0 < value <= limit:
            errors[name] = _("%(label)s must be above 0 and at most %(max)g (got %(v)s).") % {
                "label": _label(name), "max": limit, "v": raw}
        else:
            clean[name] = round(value * scale)


_ARRAY_PART = re.compile(r"^(\d{1,7})(?:-(\d{1,7})(?::(\d{1,7}))?)?$")


def parse_array(spec: str) -> list[int]:
    """The indices of an array spec ("0-99", "0-99:2", "1,3,7", "0-9,20-29"), sorted and unique; ValueError
    when it is not one, or names more than ``MAX_ARRAY_TASKS`` tasks."""
    indices: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        match = _ARRAY_PART.match(part)
        if not match:
            raise ValueError(part)
        first, last, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
        if last < first or step < 1:
            raise ValueError(part)
        if (last - first) // step + 1 + len(indices) > MAX_ARRAY_TASKS:
            raise OverflowError(part)
        indices.update(range(first, last + 1, step))
    if len(indices) > MAX_ARRAY_TASKS:
        raise OverflowError(spec)
    return sorted(indices)


def _workload(data: dict, errors: dict, clean: dict) -> None:
    """The kind and what it adds: a notebook or a service replica runs on one node; a service has replicas and
    a port; an array has indices and perhaps a limit on tasks at once."""
    kind = data.get("kind") or WorkloadKind.BATCH
    if kind not in WorkloadKind.values:
        errors["kind"] = _("Unknown kind %(k)r; choose one of: %(choices)s.") % {
            "k": kind, "choices": ", ".join(WorkloadKind.values)}
        kind = WorkloadKind.BATCH
    clean.update(kind=kind, replicas=1, port=None, indices=[], array_parallelism=None)
    if kind in (WorkloadKind.NOTEBOOK, WorkloadKind.SERVICE) and clean.get("node_count") not in (None, 1):
        errors["nodes"] = _("A %(kind)s runs on one node (each replica on one node); got %(n)d nodes.") % {
            "kind": label_of(WorkloadKind, kind).lower(), "n": clean["node_count"]}
    if kind == WorkloadKind.SERVICE:
        clean["replicas"] = whole_number(errors, {"replicas": data.get("replicas") or 1}, "replicas", 1,
                                         MAX_REPLICAS, _label("replicas"))
        clean["port"] = whole_number(errors, {"port": data.get("port") or FIELDS["port"].default}, "port", 1,
                                     65535, _label("port"))
    if kind == WorkloadKind.ARRAY:
        spec = _text(data, "array")
        if not spec:
            errors["array"] = _("An array needs its indices, for example 0-99.")
        elif len(spec) > FIELDS["array"].max_length:
            errors["array"] = _("Array indices must be at most %(max)d characters.") % {
                "max": FIELDS["array"].max_length}
        else:
            try:
                clean["indices"] = parse_array(spec)
            except OverflowError:
                errors["array"] = _("An array may have at most %(max)d tasks; %(spec)s names more.") % {
                    "max": MAX_ARRAY_TASKS, "spec": spec}
            except ValueError as bad:
                errors["array"] = _("Array indices look like 0-99, 0-99:2 or 1,3,7; %(part)r is not one.") % {
                    "part": str(bad)}
        if data.get("array_parallelism") not in (None, ""):
            clean["array_parallelism"] = whole_number(errors, data, "array_parallelism", 1, MAX_ARRAY_TASKS,
                                                      _label("array_parallelism"))


def usable_version(user, number: int, tenant_id: int | None) -> JobTemplateVersion | None:
    """Template version ``number`` (its id) when the submitter's tenant may use it: a platform template's or
    one of the tenant's own; None otherwise (reported like one that does not exist)."""
    scope = Q(template__tenant__isnull=True)
    if tenant_id is not None:
        scope |= Q(template__tenant_id=tenant_id)
    return JobTemplateVersion.objects.filter(scope, pk=number).select_related("template").first()


def _template_version(user, data: dict, errors: dict, clean: dict):
    """The template version a request came from: one the submitter's tenant may use (a platform template or
    one of the tenant's own)."""
    raw = data.get("template_version")
    if raw in (None, ""):
        return None
    number = whole_number(errors, data, "template_version", 1, 2 ** 31 - 1, _label("template_version"))
    if number is None:
        return None
    version = usable_version(user, number, clean["project"].tenant_id if clean.get("project") else None)
    if version is None:
        errors["template_version"] = _("Unknown template version %(v)d.") % {"v": number}
    return version


def _ask_for_quota(tenant: Tenant, model: str) -> str:
    """Where to ask for (more) quota, filled in for this tenant and model."""
    query = urlencode({"kind": "quota", "tenant": tenant.name, "gpu_model": model})
    return f"{reverse('governance:request-new')}?{query}"


def _within_quota(errors: dict, clean: dict) -> None:
    """Refuse what could never run: a model the tenant has no quota for, or more GPUs than its limit.

    Such a job would wait forever; the limit is the effective one (bursts active now included)."""
    project, model = clean["project"], clean["gpu_model"]
    if project is None or not model or {"gpu_model", "gpus_per_node", "nodes"} & errors.keys():
        return
    needed = quota_gpus(clean["gpus_per_node"], clean["node_count"]) * (clean.get("replicas") or 1)
    problems = [quota_problem(project.tenant, candidate, needed, clean["node_count"])
                for candidate in (clean.get("accept_models") or [model])]
    if all(problems):  # one acceptable model the tenant may use is enough: the job lands only there
        field, message = problems[0]
        errors[field] = message


def quota_problem(tenant: Tenant, model: str, needed: int, nodes: int) -> tuple[str, str] | None:
    """Why ``needed`` GPUs of ``model`` can never run for ``tenant`` (the field to blame, the sentence), or None."""
    quota = next(iter(effective_quotas(Quota.objects.filter(tenant=tenant, gpu_model=model))), None)
    if quota is None or quota.effective_limit == 0:
        return "gpu_model", _("Tenant %(tenant)s has no quota for %(model)s GPUs, so this job could never "
                              "start. Ask for quota: %(link)s") % {
            "tenant": tenant.name, "model": model, "link": _ask_for_quota(tenant, model)}
    if needed > quota.effective_limit:
        return "nodes" if nodes > 1 else "gpus_per_node", _(
            "This job needs %(n)d %(model)s GPUs but tenant %(tenant)s may hold at most %(limit)d, so it could "
            "never start. Ask for more quota: %(link)s") % {
            "n": needed, "model": model, "tenant": tenant.name, "limit": quota.effective_limit,
            "link": _ask_for_quota(tenant, model)}
    return None


def validate_job_request(user, data: dict) -> dict:
    """Check a submission and return clean values, or raise ValidationError naming each bad field.

    The same rules serve the form and the API, so both say the same thing about the same input.
    """
    errors: dict[str, str] = {}
    data = dict(data)  # the accepted models may name the GPU model
    clean: dict = {"project": _resolve_project(user, data, errors)}
    clean["task_type"] = _task_type(data, errors)
    clean["accept_models"] = _accept_models(data, errors)
    clean["gpu_model"], capacity = _gpu_model(data, errors)
    _size(data, errors, clean, capacity)
    _workload(data, errors, clean)
    _within_quota(errors, clean)
    clean["template_version"] = _template_version(user, data, errors, clean)
    clean["max_runtime_minutes"] = _runtime(data, errors, clean["task_type"], clean["kind"])
    _program(data, errors, clean)
    _placement(data, errors, clean)
    _host_resources(data, errors, clean, capacity)
    clean["requeue_on_preemption"] = str(data.get("requeue_on_preemption", True)).lower() not in (
        "false", "0", "no")
    if errors:
        raise ValidationError(errors)
    return clean


def submitted_request(data: dict) -> dict:
    """What a submission asked for, as the submit fields name it (kept on a group, read by clone): the declared
    fields only, so nothing else a client sent is stored."""
    return {name: data[name] for name in FIELDS if data.get(name) not in (None, "")}


def submit_job(user, data: dict) -> Job:
    """Validate and store a job; it queues at once unless its task type needs approval.

    A service stores a group and one job per replica, an array a group and one job per index; the job
    returned is the first member."""
    clean = validate_job_request(user, data)
    project, task_type = clean["project"], clean["task_type"]
    now = timezone.now()
    name = clean["name"] or f"{task_type.code}-{clean['gpu_model'].lower()}-{now:%m%d-%H%M%S}"
    with transaction.atomic():
        group = None
        if clean["kind"] in (WorkloadKind.SERVICE, WorkloadKind.ARRAY):
            is_service = clean["kind"] == WorkloadKind.SERVICE
            group = JobGroup.objects.create(
                kind=JobGroup.Kind.SERVICE if is_service else JobGroup.Kind.ARRAY, tenant=project.tenant,
                project=project, owner=user, name=name, request=submitted_request(data),
                indices=[] if is_service else clean["indices"],
                size=clean["replicas"] if is_service else len(clean["indices"]),
                parallelism=clean["array_parallelism"], port=clean["port"], image=clean["image"],
                submitted_at=now)
        members = (range(clean["replicas"]) if clean["kind"] == WorkloadKind.SERVICE
                   else clean["indices"] if clean["kind"] == WorkloadKind.ARRAY else [None])
        jobs = [create_member(user, clean, name, now, group, index) for index in members]
        request_scheduling_pass()
    job = jobs[0]
    job.refresh_from_db()  # the pass that ran on commit may have admitted it already
    return job


def member_name(name: str, kind: str, index: int | None) -> str:
    if index is None:
        return name
    return f"{name}[{index}]" if kind == WorkloadKind.ARRAY else f"{name}-{index}"


def create_member(user, clean: dict, name: str, now, group=None, index: int | None = None,
                  revision: int | None = None) -> Job:
    """One job of a submission: the job itself, an array's task ``index`` or a service's replica ``index``."""
    task_type = clean["task_type"]
    needs_approval = task_type.requires_approval
    reason = Phrase(gettext_noop("Submitted by %(user)s; task type %(t)s needs approval.") if needs_approval
                    else gettext_noop("Submitted by %(user)s; task type %(t)s needs no approval, queued."),
                    {"user": user.get_username(), "t": task_type.code})
    project = clean["project"]
    return lifecycle.create_job(
        status=JobStatus.PENDING if needs_approval else JobStatus.QUEUED, reason=reason, actor=user,
        tenant=project.tenant, project=project, owner=user, name=member_name(name, clean["kind"], index),
        task_type=task_type, gpu_model=clean["gpu_model"], gpus_per_node=clean["gpus_per_node"],
        node_count=clean["node_count"], image=clean["image"], command=clean["command"],
        max_runtime_minutes=clean["max_runtime_minutes"], priority=task_type.priority, submitted_at=now,
        topology=clean["topology"], gpu_milli=clean["gpu_milli"],
        cpu_milli=clean["cpus_per_node"] or task_type.cpu_milli_per_gpu * clean["gpus_per_node"],
        memory_mib=clean["memory_gb_per_node"] or task_type.memory_mib_per_gpu * clean["gpus_per_node"],
        requeue_on_preemption=clean["requeue_on_preemption"], kind=clean["kind"], group=group,
        accept_models=clean["accept_models"],
        group_index=index, revision=(revision or 1) if clean["kind"] == WorkloadKind.SERVICE else None,
        template_version=clean["template_version"],
    )
