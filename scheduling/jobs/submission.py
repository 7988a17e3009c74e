"""Submitting a job: the one declaration of the submit fields, the rules that check them, and the write.

``SUBMIT_FIELDS`` is the single description of a submission's body. The page's form
(``forms.JobSubmitForm``), the API's request serializer and its OpenAPI schema
(``api.serializers.JobSubmitSerializer``) are built from it, and ``validate_job_request`` takes its labels
and fixed limits from it (``limits.py`` holds the numbers), so the three can no longer disagree about a
field. Limits that depend on the fleet (how many GPUs a node of a model has) come from the GPU-model catalogue
at validation time.

``validate_job_request`` is the one check of a submission, whoever sends it (the form, the API, a template,
a clone): each rule refuses one field, the refusals are collected in one ``ValidationError``, and what passes
is a typed ``JobRequest`` in the units a job stores (millicores, MiB, thousandths of a GPU). The submit fields
keep the units a person types (``cpus_per_node`` in CPUs, ``memory_gb_per_node`` in GB: the public API's
and the CLI's names). ``create_jobs`` stores a ``JobRequest``, ``store_jobs`` any number of them.

Bulk submission (an array of up to ``MAX_ARRAY_TASKS`` tasks, a batch of specs: ``validate_batch``) goes
through the same rules and the same write: what validation reads from the database (projects, task types, the
catalogue, quotas, template versions) is read once per call (``Lookups``), and ``store_jobs`` writes every job
of every request with a few bulk inserts in one transaction (``lifecycle.create_many``: each job still gets its
event with the reason) and asks for one pass.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
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
from fleet.models import Cluster
from gpuportal.text.phrases import Phrase
from gpuportal.web.validation import Refusals, keyed, parse_whole_number, refuse
from scheduling import lifecycle
from scheduling.jobs import dependencies, sbatch
from scheduling.jobs import ports as named_ports
from scheduling.jobs.limits import MAX_ARRAY_TASKS, MAX_BATCH_TOTAL, MAX_ID, MAX_PORT_ENTRY, MAX_PORTS, MAX_REPLICAS
from scheduling.jobs.mailtypes import parse_mail_type
from scheduling.models import Job, JobGroup, JobStatus, JobTemplateVersion, TaskType, Topology, WorkloadKind, label_of
from scheduling.triggers import request_scheduling_pass
from tenants import access
from tenants.models import Project, Quota, Tenant
from tenants.quotas import effective_quotas, quota_gpus


class Lookups:
    """What validation reads from the database, read once per call: a batch of 1,000 specs naming one project,
    task type and GPU model reads each once, and a single submission reads the catalogue once, not once per rule.
    A refusal is kept too, so every spec that names the same unknown project is refused with the same words."""

    def __init__(self):
        self._kept: dict[Hashable, tuple[object, ValidationError | None]] = {}

    def get(self, key: Hashable, read: Callable[[], object]):
        if key not in self._kept:
            try:
                self._kept[key] = (read(), None)
            except ValidationError as refused:
                self._kept[key] = (None, refused)
        value, refused = self._kept[key]
        if refused is not None:
            raise ValidationError(refused.message_dict)
        return value


def _max_runtime() -> int:
    return settings.SCHEDULER["MAX_RUNTIME_MINUTES"]


@dataclass(frozen=True)
class SubmitField:
    """One field of a submission: its kind (text, int, float, choice, bool, list), label, help and fixed limits
    (a list's ``max_length`` bounds each entry, its ``max_value`` how many entries it may have)."""

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
                gettext_lazy("The template version the request came from (set by the form)."), min_value=1,
                max_value=MAX_ID),
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
    SubmitField("spare_own_jobs", "bool", gettext_lazy("Spare my running jobs"), gettext_lazy(
        "Never stop one of your own running jobs to start this one: it waits for free GPUs instead."),
                default=False),
    SubmitField("replicas", "int", gettext_lazy("Replicas"), gettext_lazy(
        "Service: how many copies serve, each with the GPUs above on one node."), min_value=1,
                max_value=MAX_REPLICAS, default=1),
    SubmitField("port", "int", gettext_lazy("Port"), gettext_lazy("Service: the port the program listens on."),
                min_value=1, max_value=65535, default=8000),
    SubmitField("ports", "list", gettext_lazy("Named ports"), gettext_lazy(
        "Ports your program serves, opened through the portal while the job runs: name:port, e.g. tensorboard:6006, "
        "ui:8080 (names: lowercase letters, digits, hyphens)."), max_length=MAX_PORT_ENTRY, max_value=MAX_PORTS),
    SubmitField("array", "text", gettext_lazy("Array indices"), gettext_lazy(
        "Array: indices as 0-99, 0-99:2 (a step) or 1,3,7; each task gets its index in GPUPORTAL_ARRAY_INDEX."),
                max_length=200),
    SubmitField("array_parallelism", "int", gettext_lazy("Tasks at once"), gettext_lazy(
        "Array: the most tasks running at the same time; empty: no limit."), min_value=1, max_value=MAX_ARRAY_TASKS),
    SubmitField("sbatch", "text", gettext_lazy("Batch script (#SBATCH)"), gettext_lazy(
        "Optional: a Slurm batch script. Its #SBATCH directives (job name, GPUs, nodes, time, CPUs, memory, array, "
        "partition) fill the fields left empty (the GPU model and GPUs per node among them) and its body becomes "
        "the command; a field given a value other than the script's is refused."), max_length=sbatch.MAX_SCRIPT),
    SubmitField("depends_on", "text", gettext_lazy("Depends on"), gettext_lazy(
        "Optional: start only after other jobs, as Slurm's --dependency: afterok:812:813 (once they succeed), "
        "afterany:820 (once it ends), afternotok (once it fails), aftercorr (each task once the same task of another "
        "array succeeds); several joined by commas. An array's first job id names the whole array, 812_3 one task."),
                max_length=dependencies.MAX_DEPENDS_ON_TEXT),
    SubmitField("mail_type", "text", gettext_lazy("Mail me"), gettext_lazy(
        "Optional, as Slurm's --mail-type: BEGIN, END, FAIL, REQUEUE (comma-separated), ALL or NONE; mail goes to "
        "your account's address. Empty: as your notification preferences say."),
                max_length=Job._meta.get_field("mail_type").max_length),
)
FIELDS = {f.name: f for f in SUBMIT_FIELDS}


def _label(name: str) -> str:
    return str(FIELDS[name].label)


def submittable_projects(user):
    """Projects of tenants where ``user`` may submit jobs."""
    projects = Project.objects.visible_to(user).select_related("tenant")
    return [p for p in projects if access.can_submit(user, p.tenant_id)]


def _text(data: Mapping, name: str) -> str:
    value = data.get(name)
    return value.strip() if isinstance(value, str) else ""


def _whole(name: str, raw, minimum: int, maximum: int, too_large: str | None = None) -> int:
    """``raw`` as a whole number within the bounds, or the refusal of field ``name``."""
    return keyed(name, parse_whole_number, raw, minimum, maximum, _label(name), too_large)


def _project_by_reference(user, ref: str, tenant) -> Project:
    projects = Project.objects.visible_to(user).select_related("tenant")
    if "/" in ref:  # "tenant/project", as a job's JSON shows it
        ref_tenant, _sep, ref = ref.partition("/")
        projects = projects.filter(tenant__name=ref_tenant)
    if tenant is not None:
        projects = projects.filter(tenant=tenant)
    matches = list(projects.filter(name=ref)[:2])
    if not matches:
        where = _(" in tenant %(t)s") % {"t": tenant.name} if tenant else ""
        refuse("project", _("Unknown project %(name)r%(where)s.") % {"name": ref, "where": where})
    if len(matches) > 1:
        refuse("project", _("Project %(name)r exists in several of your tenants; name the tenant too.") % {
            "name": ref})
    return matches[0]


def _resolve_project(user, data: Mapping) -> Project:
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
            refuse("tenant", _("Unknown tenant %(name)r.") % {"name": tenant_name})
    ref = str(data.get("project") or "").strip()
    if ref:
        project = _project_by_reference(user, ref, tenant)
    else:
        if tenant is None:
            candidates = [t for t in visible_tenants if access.can_submit(user, t.pk)]
            if len(candidates) != 1:
                refuse("project", _("Choose a project."))
            tenant = candidates[0]
        project = Project.objects.filter(tenant=tenant).order_by("name").first()
        if project is None:
            refuse("project", _("Tenant %(t)s has no project; ask its admin to create one.") % {"t": tenant.name})
    if not access.can_submit(user, project.tenant_id):
        refuse("project", _("You may not submit jobs in tenant %(t)s (your role there is read-only).") % {
            "t": project.tenant.name})
    return project


def _task_type(data: Mapping) -> TaskType:
    code = data.get("task_type")
    task_type = TaskType.objects.filter(code=code).first() if isinstance(code, str) and code else None
    if task_type is None:
        choices = ", ".join(TaskType.objects.values_list("code", flat=True))
        refuse("task_type", (_("Unknown task type %(code)r; choose one of: %(choices)s.") % {
            "code": code, "choices": choices}) if code else _("Task type is required."))
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


def _model_set(data: Mapping, catalogue: dict[str, GpuModelCapacity]) -> list[str]:
    """The models ``accept_models`` names, in its order (empty when it names none)."""
    spec = _text(data, "accept_models")
    if not spec:
        return []
    if not settings.SCHEDULER.get("ALLOW_MODEL_SETS", True):
        refuse("accept_models", _("This site runs each job on the one GPU model it names."))
    try:
        return resolve_models(spec, catalogue)
    except ValueError as bad:
        refuse("accept_models", _("%(part)r names no GPU model of the cluster; it has: %(known)s.") % {
            "part": str(bad), "known": ", ".join(catalogue) or _("none yet")})


def _capacity(data: Mapping, model_name: str, catalogue: dict[str, GpuModelCapacity]) -> GpuModelCapacity:
    """What the cluster has of ``model_name`` (the GPU model named, or the first acceptable one)."""
    capacity = catalogue.get(model_name)
    if capacity is None:
        known = ", ".join(catalogue) or _("none yet")
        refuse("gpu_model", (_("Unknown GPU model %(model)r; the cluster has: %(known)s.") % {
            "model": data.get("gpu_model"), "known": known}) if model_name else _("GPU model is required."))
    return capacity


#: Bounds of a size whose GPU model is unknown (that model is refused anyway, naming the models there are).
UNKNOWN_MODEL_MAX_GPUS_PER_NODE, UNKNOWN_MODEL_MAX_NODES = 64, 1024


def _gpus_per_node(data: Mapping, model: str, capacity: GpuModelCapacity | None) -> int:
    """GPUs per node, at most what the model's largest node has."""
    return _whole("gpus_per_node", data.get("gpus_per_node"), 1,
                  max(capacity.max_gpus_per_node if capacity else UNKNOWN_MODEL_MAX_GPUS_PER_NODE, 1),
                  too_large=_("%%(value)d GPUs per node is more than any %(model)s node has (at most %%(max)d).")
                  % {"model": model} if capacity else None)


def _nodes(data: Mapping, model: str, capacity: GpuModelCapacity | None) -> int:
    """Nodes, at most the model's nodes."""
    return _whole("nodes", data.get("nodes", FIELDS["nodes"].default), 1,
                  max(capacity.nodes if capacity else UNKNOWN_MODEL_MAX_NODES, 1),
                  too_large=_("%%(value)d nodes is more than the %%(max)d %(model)s nodes the cluster has.")
                  % {"model": model} if capacity else None)


def _nodes_fit(model: str, capacity: GpuModelCapacity, gpus_per_node: int, node_count: int) -> None:
    """Enough of the model's nodes have that many GPUs."""
    big_enough = capacity.nodes_with_at_least(gpus_per_node)
    if node_count > big_enough:
        refuse("nodes", _(
            "%(n)d nodes with %(g)d %(model)s GPUs each can never fit: only %(k)d nodes have %(g)d GPUs "
            "(the largest possible request is %(k)d x %(g)d).") % {
            "n": node_count, "g": gpus_per_node, "model": model, "k": big_enough})


def _runtime(data: Mapping, task_type: TaskType | None, kind: str) -> int | None:
    runtime = data.get("max_runtime_minutes")
    if runtime in (None, "") and kind == WorkloadKind.SERVICE:
        return None  # a service runs until stopped unless a max runtime is set
    if runtime in (None, "") and task_type is not None:
        runtime = task_type.default_max_runtime_minutes
    return _whole("max_runtime_minutes", runtime, 1, _max_runtime())


def _image(data: Mapping) -> str:
    image, limit = _text(data, "image"), FIELDS["image"].max_length
    if not image:
        refuse("image", _("Image is required (for example registry.local/pytorch:2.4)."))
    if len(image) > limit or any(c.isspace() for c in image):
        refuse("image", _("Image must be one reference without spaces, at most %(max)d characters.") % {
            "max": limit})
    return image


def _command(data: Mapping) -> str:
    command, limit = data.get("command") or "", FIELDS["command"].max_length
    if not isinstance(command, str) or len(command) > limit:
        refuse("command", _("Command must be text of at most %(max)d characters.") % {"max": limit})
    return command


def _name(data: Mapping) -> str:
    name, limit = data.get("name") or "", FIELDS["name"].max_length
    if not isinstance(name, str) or len(name) > limit:
        refuse("name", _("Name must be at most %(max)d characters.") % {"max": limit})
    return name.strip()


def _topology(data: Mapping, node_count: int | None) -> str:
    topology = data.get("topology") or Topology.ANY
    if topology not in Topology.values:
        refuse("topology", _("Unknown topology %(t)r; choose one of: %(choices)s.") % {
            "t": topology, "choices": ", ".join(Topology.values)})
    if topology == Topology.SAME_NODE and node_count not in (None, 1):
        refuse("topology", _("same_node needs nodes = 1 (got %(n)d).") % {"n": node_count})
    return topology


def _gpu_milli(data: Mapping, gpus_per_node: int | None, node_count: int | None) -> int:
    """The GPU share in thousandths of a GPU (1000: whole GPUs)."""
    share, spec = data.get("gpu_share"), FIELDS["gpu_share"]
    if share in (None, ""):
        return 1000
    try:
        share_value = float(share)
    except (TypeError, ValueError):
        share_value = -1.0
    if not spec.min_value <= share_value <= spec.max_value:
        refuse("gpu_share", _("GPU share must be between %(min)g and %(max)g (got %(v)s).") % {
            "min": spec.min_value, "max": spec.max_value, "v": share})
    if share_value < 1 and (gpus_per_node != 1 or node_count != 1):
        refuse("gpu_share", _("A GPU share below 1 needs exactly 1 GPU on 1 node."))
    return round(share_value * 1000)


def _per_node(data: Mapping, name: str, scale: int, largest: int) -> int | None:
    """CPUs (``cpus_per_node``, in CPUs) or memory (``memory_gb_per_node``, in GB) per node as typed, at most
    what the model's largest node has (``largest``, in millicores or MiB), returned in millicores or MiB
    (``scale`` of them to the typed unit); None when left empty (the task type's default applies)."""
    raw = data.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    limit = largest / scale if largest else 1e9
    if not 0 < value <= limit:
        refuse(name, _("%(label)s must be above 0 and at most %(max)g (got %(v)s).") % {
            "label": _label(name), "max": limit, "v": raw})
    return round(value * scale)


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


def _kind(data: Mapping) -> str:
    kind = data.get("kind") or WorkloadKind.BATCH
    if kind not in WorkloadKind.values:
        refuse("kind", _("Unknown kind %(k)r; choose one of: %(choices)s.") % {
            "k": kind, "choices": ", ".join(WorkloadKind.values)})
    return kind


def _one_node(kind: str, node_count: int | None) -> None:
    """A notebook or a service replica runs on one node."""
    if kind in (WorkloadKind.NOTEBOOK, WorkloadKind.SERVICE) and node_count not in (None, 1):
        refuse("nodes", _("A %(kind)s runs on one node (each replica on one node); got %(n)d nodes.") % {
            "kind": label_of(WorkloadKind, kind).lower(), "n": node_count})


def _array_indices(data: Mapping) -> list[int]:
    spec, limit = _text(data, "array"), FIELDS["array"].max_length
    if not spec:
        refuse("array", _("An array needs its indices, for example 0-99."))
    if len(spec) > limit:
        refuse("array", _("Array indices must be at most %(max)d characters.") % {"max": limit})
    try:
        return parse_array(spec)
    except OverflowError:
        refuse("array", _("An array may have at most %(max)d tasks; %(spec)s names more.") % {
            "max": MAX_ARRAY_TASKS, "spec": spec})
    except ValueError as bad:
        refuse("array", _("Array indices look like 0-99, 0-99:2 or 1,3,7; %(part)r is not one.") % {
            "part": str(bad)})


def usable_version(user, number: int, tenant_id: int | None) -> JobTemplateVersion | None:
    """Template version ``number`` (its id) when the submitter's tenant may use it: a platform template's or
    one of the tenant's own; None otherwise (reported like one that does not exist)."""
    scope = Q(template__tenant__isnull=True)
    if tenant_id is not None:
        scope |= Q(template__tenant_id=tenant_id)
    return JobTemplateVersion.objects.filter(scope, pk=number).select_related("template").first()


def _template_version(user, data: Mapping, project: Project | None, lookups: Lookups) -> JobTemplateVersion | None:
    """The template version a request came from: one the submitter's tenant may use (a platform template or
    one of the tenant's own)."""
    raw, spec = data.get("template_version"), FIELDS["template_version"]
    if raw in (None, ""):
        return None
    number = _whole("template_version", raw, int(spec.min_value), int(spec.max_value))
    tenant_id = project.tenant_id if project else None
    version = lookups.get(("template_version", number, tenant_id), lambda: usable_version(user, number, tenant_id))
    if version is None:
        refuse("template_version", _("Unknown template version %(v)d.") % {"v": number})
    return version


def _ask_for_quota(tenant: Tenant, model: str) -> str:
    """Where to ask for (more) quota, filled in for this tenant and model."""
    query = urlencode({"kind": "quota", "tenant": tenant.name, "gpu_model": model})
    return f"{reverse('governance:request-new')}?{query}"


def _within_quota(tenant: Tenant, models: list[str], gpus_per_node: int, node_count: int, replicas: int,
                  lookups: Lookups) -> None:
    """Refuse what could never run: a model the tenant has no quota for, or more GPUs than its limit.

    Such a job would wait forever; the limit is the effective one (bursts active now included). One acceptable
    model the tenant may use is enough: the job lands only there. With ``gpus_per_node`` 0 (a size refused on
    its own) only the model's quota is checked."""
    needed = quota_gpus(gpus_per_node, node_count) * replicas
    problems = [quota_problem(tenant, candidate, needed, node_count, lookups) for candidate in models]
    if all(problems):
        refuse(*problems[0])


def quota_problem(tenant: Tenant, model: str, needed: int, nodes: int,
                  lookups: Lookups | None = None) -> tuple[str, str] | None:
    """Why ``needed`` GPUs of ``model`` can never run for ``tenant`` (the field to blame, the sentence), or None."""
    quota = (lookups or Lookups()).get(("quota", tenant.pk, model), lambda: next(iter(effective_quotas(
        Quota.objects.filter(tenant=tenant, gpu_model=model))), None))
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


@dataclass(frozen=True)
class JobRequest:
    """A submission that passed every rule, in the units a job stores: what ``create_jobs`` and
    ``create_member`` write. ``cpu_millicores`` and ``memory_mib`` are None where the task type's per-GPU
    defaults apply; ``asked`` is the submission as the submit fields name it (kept on a group, read by clone)."""

    project: Project
    task_type: TaskType
    kind: str
    gpu_model: str
    accept_models: list[str]
    gpus_per_node: int
    node_count: int
    topology: str
    gpu_milli: int
    cpu_millicores: int | None
    memory_mib: int | None
    image: str
    command: str
    name: str
    max_runtime_minutes: int | None
    requeue_on_preemption: bool
    template_version: JobTemplateVersion | None
    replicas: int = 1
    port: int | None = None
    indices: list[int] = field(default_factory=list)
    array_parallelism: int | None = None
    asked: dict = field(default_factory=dict)
    spare_own_jobs: bool = False
    cluster: Cluster | None = None  # the cluster a batch script's --partition names; None: the pass chooses
    ports: list[named_ports.NamedPort] = field(default_factory=list)
    depends_on: list[dependencies.Edge] = field(default_factory=list)  # the jobs it waits for
    mail_type: str = ""  # mailtypes.parse_mail_type's form; "" leaves it to the owner's preferences


def validate_job_request(user, data: Mapping, lookups: Lookups | None = None,
                         batch_size: int | None = None) -> JobRequest:
    """Check a submission (the form's text, the API's validated body, a template's or a clone's fields) and
    return it typed, or raise one ValidationError naming each bad field.

    The same rules serve the form and the API, so both say the same thing about the same input. Each rule
    refuses one field; they are all tried (a rule that needs another field's value skips when that field was
    refused) and their refusals are collected here, in one place. ``lookups`` shares what was read from the
    database with the other specs of a batch.
    """
    refusals, lookups = Refusals(), lookups or Lookups()
    attempt = refusals.attempt
    data, scripted = _with_script(refusals, data)
    project = attempt(lookups.get, ("project", repr(data.get("tenant")), repr(data.get("project"))),
                      lambda: _resolve_project(user, data))
    task_type = attempt(lookups.get, ("task_type", repr(data.get("task_type"))), lambda: _task_type(data))
    catalogue = lookups.get(("catalogue",), gpu_model_catalogue)
    models = attempt(_model_set, data, catalogue) or []
    gpu_model = _text(data, "gpu_model") or (models[0] if models else "")  # the first acceptable, when unnamed
    if models and gpu_model not in models:  # a named GPU model leads the list
        models.insert(0, gpu_model)
    accept_models = models if len(models) > 1 else []
    capacity = attempt(_capacity, data, gpu_model, catalogue)
    gpus_per_node = attempt(_gpus_per_node, data, gpu_model, capacity)
    node_count = attempt(_nodes, data, gpu_model, capacity)
    if capacity and gpus_per_node is not None and node_count is not None:
        attempt(_nodes_fit, gpu_model, capacity, gpus_per_node, node_count)
    kind = attempt(_kind, data) or WorkloadKind.BATCH
    attempt(_one_node, kind, node_count)
    replicas, port, indices, parallelism = _shape(attempt, data, kind)
    if project is not None and gpu_model and "gpu_model" not in refusals:
        # A model without quota is refused even while the size is wrong too: every refusal comes out at once.
        sized = not refusals.any_of("gpus_per_node", "nodes")
        attempt(_within_quota, project.tenant, accept_models or [gpu_model], gpus_per_node if sized else 0,
                node_count if sized else 1, replicas or 1, lookups)
    template_version = attempt(_template_version, user, data, project, lookups)
    max_runtime = attempt(_runtime, data, task_type, kind)
    image, command, name = attempt(_image, data), attempt(_command, data), attempt(_name, data)
    topology = attempt(_topology, data, node_count)
    gpu_milli = attempt(_gpu_milli, data, gpus_per_node, node_count)
    cpu_millicores = attempt(_per_node, data, "cpus_per_node", 1000, capacity.max_cpu_milli if capacity else 0)
    memory_mib = attempt(_per_node, data, "memory_gb_per_node", 1024, capacity.max_memory_mib if capacity else 0)
    depends_on = attempt(dependencies.check, user, data, kind, indices, batch_size)
    mail_type = attempt(parse_mail_type, data.get("mail_type"))
    cluster = _script_cluster(refusals, scripted, gpu_model)  # names the directive of the refusals above
    ports = attempt(named_ports.parse_ports, data.get("ports"), kind)
    refusals.raise_any()
    return JobRequest(
        project=project, task_type=task_type, kind=kind, gpu_model=gpu_model, accept_models=accept_models,
        gpus_per_node=gpus_per_node, node_count=node_count, topology=topology, gpu_milli=gpu_milli,
        cpu_millicores=cpu_millicores, memory_mib=memory_mib, image=image, command=command, name=name,
        max_runtime_minutes=max_runtime,
        requeue_on_preemption=str(data.get("requeue_on_preemption", True)).lower() not in ("false", "0", "no"),
        template_version=template_version, replicas=replicas, port=port, indices=indices,
        array_parallelism=parallelism, asked=submitted_request(data),
        spare_own_jobs=str(data.get("spare_own_jobs", False)).lower() in ("true", "1", "yes", "on"),
        cluster=cluster, ports=ports or [], depends_on=depends_on or [], mail_type=mail_type or "")


def _shape(attempt, data: Mapping, kind: str) -> tuple[int | None, int | None, list[int], int | None]:
    """A service's replicas and port, an array's indices and tasks at once (1, None, [], None otherwise)."""
    replicas, port, indices, parallelism = 1, None, [], None
    if kind == WorkloadKind.SERVICE:
        replicas = attempt(_whole, "replicas", data.get("replicas") or 1, 1, FIELDS["replicas"].max_value)
        port = attempt(_whole, "port", data.get("port") or FIELDS["port"].default, FIELDS["port"].min_value,
                       FIELDS["port"].max_value)
    if kind == WorkloadKind.ARRAY:
        indices = attempt(_array_indices, data) or []
        if data.get("array_parallelism") not in (None, ""):
            parallelism = attempt(_whole, "array_parallelism", data.get("array_parallelism"), 1,
                                  FIELDS["array_parallelism"].max_value)
    return replicas, port, indices, parallelism


def _with_script(refusals: Refusals, data: Mapping) -> tuple[Mapping, sbatch.ScriptRequest | None]:
    """The submission with its batch script's directives filling the fields left empty; a field set both ways
    to different values is refused."""
    scripted = refusals.attempt(sbatch.apply_script, data)
    if scripted is None:
        return data, None
    for name, conflict in scripted.conflicts.items():
        refusals.attempt(refuse, name, conflict)
    return scripted.data, scripted


def _script_cluster(refusals: Refusals, scripted: sbatch.ScriptRequest | None, gpu_model: str) -> Cluster | None:
    """The cluster the script's ``--partition`` names; and a refusal of a field the script set names the
    directive it came from, so that the person knows which line of their script to change."""
    if scripted is None:
        return None
    cluster = refusals.attempt(sbatch.cluster_for, scripted.script, gpu_model)
    for name, directive in scripted.script.sources.items():
        if name in refusals and name not in scripted.conflicts:
            refusals.by_field[name] = [_("%(problem)s (from %(where)s)") % {"problem": message,
                                                                             "where": directive.where()}
                                       for message in refusals.by_field[name]]
    return cluster


def submitted_request(data: Mapping) -> dict:
    """What a submission asked for, as the submit fields name it (kept on a group, read by clone): the declared
    fields only, so nothing else a client sent is stored."""
    return {name: data[name] for name in FIELDS if data.get(name) not in (None, "")}


def submit_job(user, data: Mapping) -> Job:
    """Validate a submission (``validate_job_request``) and store it (``create_jobs``)."""
    return create_jobs(user, validate_job_request(user, data))


def validate_batch(user, specs: Sequence[Mapping], lookups: Lookups | None = None) -> list[JobRequest]:
    """Check every spec of a batch with the one check of a submission, reading the database once for all of
    them; all or nothing: one ValidationError naming each bad field of each bad spec as ``jobs.<index>.<field>``
    (the API's dotted naming of nested fields). How many specs a batch may hold is the API's limit
    (``limits.MAX_BATCH_JOBS``, in the request's schema)."""
    lookups, requests, refused, jobs = lookups or Lookups(), [], {}, 0
    for index, spec in enumerate(specs):
        try:
            requests.append(validate_job_request(user, spec, lookups, batch_size=len(specs)))
        except ValidationError as exc:
            refused.update({f"jobs.{index}.{name}": messages for name, messages in exc.message_dict.items()})
            continue
        jobs += len(_indices(requests[-1]))
        if jobs > MAX_BATCH_TOTAL:  # refused as soon as it is known: a thousand arrays would be ten million jobs
            raise ValidationError({"jobs": _(
                "A batch may store at most %(max)d jobs in all (an array counts each task, a service each "
                "replica); the specs up to jobs.%(index)d already ask for %(jobs)d.") % {
                "max": MAX_BATCH_TOTAL, "index": index, "jobs": jobs}})
    if not refused:  # specs that name each other (``@<index>``): only once every spec is known
        refused = dependencies.check_batch(requests)
    if refused:
        raise ValidationError(refused)
    return requests


def create_jobs(user, request: JobRequest) -> Job:
    """Store a validated submission (``store_jobs``) and return its first job as it is after the commit: the
    pass that ran on commit (in the embedded mode) may have admitted it already."""
    job = store_jobs(user, [request])[0][0]
    job.refresh_from_db()
    return job


def store_jobs(user, requests: Sequence[JobRequest]) -> list[list[Job]]:
    """Store validated submissions in one transaction and ask for one pass; each queues at once unless its task
    type needs approval. Returns each request's jobs, in the order given.

    A service stores a group and one job per replica, an array a group and one job per index. Every job of
    every request is written by the same few bulk inserts (``lifecycle.create_many``), so an array of 10,000
    tasks or a batch of 1,000 jobs costs a handful of queries, not two per job."""
    now = timezone.now()
    names = [request.name or f"{request.task_type.code}-{request.gpu_model.lower()}-{now:%m%d-%H%M%S}"
             for request in requests]
    with transaction.atomic():
        groups = _store_groups(user, requests, names, now)
        planned = [_members(user, request, name, now, group)
                   for request, name, group in zip(requests, names, groups, strict=True)]
        flat = [member for members in planned for member in members]
        created = iter(lifecycle.create_many([job for job, _status, _reason in flat],
                                             [status for _job, status, _reason in flat],
                                             [reason for _job, _status, reason in flat], actor=user))
        stored = [[next(created) for _member in members] for members in planned]
        dependencies.store(requests, stored)
        request_scheduling_pass()
    return stored


def _members(user, request: JobRequest, name: str, now, group: JobGroup | None) -> list[tuple[Job, str, Phrase]]:
    """Every job of a request, not stored yet: the first made field by field, the others copies of it that differ
    in their name and index (building each of 10,000 tasks afresh costs seconds). The copies share the first's
    JSON values (its acceptable models, empty states); nothing changes those in place before they are stored."""
    indices = _indices(request)
    first, status, reason = _member(user, request, name, now, group, indices[0])
    members = [(first, status, reason)]
    for index in indices[1:]:
        twin = copy.copy(first)
        twin.name, twin.group_index = member_name(name, request.kind, index), index
        members.append((twin, status, reason))
    return members


def _indices(request: JobRequest) -> Sequence[int | None]:
    """The members of a request: a service's replica numbers, an array's indices, or the one job (None)."""
    if request.kind == WorkloadKind.SERVICE:
        return range(request.replicas)
    return request.indices if request.kind == WorkloadKind.ARRAY else [None]


def _store_groups(user, requests: Sequence[JobRequest], names: list[str], now) -> list[JobGroup | None]:
    """The group of each service or array request (None for the others), stored with one insert."""
    groups: list[JobGroup | None] = []
    for request, name in zip(requests, names, strict=True):
        if request.kind not in (WorkloadKind.SERVICE, WorkloadKind.ARRAY):
            groups.append(None)
            continue
        is_service, project = request.kind == WorkloadKind.SERVICE, request.project
        groups.append(JobGroup(
            kind=JobGroup.Kind.SERVICE if is_service else JobGroup.Kind.ARRAY, tenant=project.tenant,
            project=project, owner=user, name=name, request=request.asked,
            indices=[] if is_service else request.indices,
            size=request.replicas if is_service else len(request.indices),
            parallelism=request.array_parallelism, port=request.port, image=request.image, submitted_at=now))
    JobGroup.objects.bulk_create([group for group in groups if group is not None])
    return groups


def member_name(name: str, kind: str, index: int | None) -> str:
    if index is None:
        return name
    return f"{name}[{index}]" if kind == WorkloadKind.ARRAY else f"{name}-{index}"


def create_member(user, request: JobRequest, name: str, now, group=None, index: int | None = None,
                  revision: int | None = None) -> Job:
    """One job of a submission, stored alone: a service's replica ``index`` added later (scale, roll out)."""
    job, status, reason = _member(user, request, name, now, group, index, revision)
    return lifecycle.create_many([job], [status], [reason], actor=user)[0]


def _member(user, request: JobRequest, name: str, now, group=None, index: int | None = None,
            revision: int | None = None) -> tuple[Job, str, Phrase]:
    """One job of a submission, not stored yet, with its first status and the reason of its first event: the job
    itself, an array's task ``index`` or a service's replica ``index``."""
    task_type = request.task_type
    needs_approval = task_type.requires_approval
    reason = Phrase(gettext_noop("Submitted by %(user)s; task type %(t)s needs approval.") if needs_approval
                    else gettext_noop("Submitted by %(user)s; task type %(t)s needs no approval, queued."),
                    {"user": user.get_username(), "t": task_type.code})
    project = request.project
    job = Job(
        tenant=project.tenant, project=project, owner=user, name=member_name(name, request.kind, index),
        task_type=task_type, gpu_model=request.gpu_model, gpus_per_node=request.gpus_per_node,
        node_count=request.node_count, image=request.image, command=request.command,
        max_runtime_minutes=request.max_runtime_minutes, priority=task_type.priority, submitted_at=now,
        topology=request.topology, gpu_milli=request.gpu_milli,
        cpu_milli=request.cpu_millicores or task_type.cpu_milli_per_gpu * request.gpus_per_node,
        memory_mib=request.memory_mib or task_type.memory_mib_per_gpu * request.gpus_per_node,
        requeue_on_preemption=request.requeue_on_preemption, kind=request.kind, group=group,
        accept_models=list(request.accept_models),
        group_index=index, revision=(revision or 1) if request.kind == WorkloadKind.SERVICE else None,
        template_version=request.template_version,
        spare_own_jobs=request.spare_own_jobs, asked_cluster=request.cluster, ports=list(request.ports),
        mail_type=request.mail_type,
    )
    return job, JobStatus.PENDING if needs_approval else JobStatus.QUEUED, reason
