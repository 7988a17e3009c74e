"""Clone and resubmit: a job's request as submit fields, submitted again through ``submission.submit_job``.

A member of an array or service clones its group's submission (``JobGroup.request``: the whole array, every
replica), not one task; a job of its own clones its columns. The same checks apply as to a new submission,
so a request that no longer fits (quota, a GPU model gone, a role taken away) is refused naming the field.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _

from scheduling.jobs import ports as named_ports
from scheduling.jobs import submission
from scheduling.models import Job, Topology, WorkloadKind
from tenants import access


def _number(value: float):
    """3.0 as 3, 0.25 as 0.25: what a person would have typed."""
    return int(value) if float(value).is_integer() else value


def request_of(job: Job) -> dict:
    """The submit-field values ``job`` was made from (``submission.SUBMIT_FIELDS`` names)."""
    if job.group_id is not None and job.group.request:
        return dict(job.group.request)
    task_type = job.task_type
    request = {
        "kind": job.kind or WorkloadKind.BATCH,
        "project": f"{job.tenant.name}/{job.project.name}",
        "name": job.name,
        "task_type": task_type.code,
        "gpu_model": job.gpu_model,
        "gpus_per_node": job.gpus_per_node,
        "nodes": job.node_count,
        "image": job.image,
        "requeue_on_preemption": job.requeue_on_preemption,
    }
    if job.topology != Topology.ANY:
        request["topology"] = job.topology
    if job.gpu_milli != 1000:
        request["gpu_share"] = _number(job.gpu_milli / 1000)
    # CPUs and memory were the task type's defaults unless asked for: only what was asked is repeated, so the
    # clone follows the task type as the original did.
    if job.cpu_milli and job.cpu_milli != task_type.cpu_milli_per_gpu * job.gpus_per_node:
        request["cpus_per_node"] = _number(job.cpu_milli / 1000)
    if job.memory_mib and job.memory_mib != task_type.memory_mib_per_gpu * job.gpus_per_node:
        request["memory_gb_per_node"] = _number(round(job.memory_mib / 1024, 3))
    if job.command:
        request["command"] = job.command
    if job.max_runtime_minutes is not None:
        request["max_runtime_minutes"] = job.max_runtime_minutes
    if job.template_version_id is not None:
        request["template_version"] = job.template_version_id
    if job.spare_own_jobs:  # submitted so as to spare its owner's running jobs
        request["spare_own_jobs"] = True
    if job.mail_type:  # the events it mails about, as it asked
        request["mail_type"] = job.mail_type
    if job.ports:  # its named ports, as they were submitted
        request["ports"] = named_ports.as_entries(job.ports)
    if job.accept_models:  # the models it accepted, the one it first named leading
        request["gpu_model"] = job.accept_models[0]
        request["accept_models"] = ",".join(job.accept_models)
    return request


def clonable_job(user, pk) -> Job:
    """Job ``pk`` when ``user`` may see it (Http404 otherwise, as if it did not exist)."""
    job = Job.objects.visible_to(user).select_related("tenant", "project", "task_type", "group").filter(pk=pk).first()
    if job is None:
        raise Http404(_("No job %(id)s among those you may see.") % {"id": pk})
    return job


def clone_job(user, job: Job) -> Job:
    """Submit ``job``'s request again as ``user`` (who must see it and may submit in its tenant): the new job,
    the first member of a new group for an array or service. ValidationError naming the field when the request
    no longer passes."""
    if not Job.objects.visible_to(user).filter(pk=job.pk).exists():
        raise Http404(_("No job %(id)s among those you may see.") % {"id": job.pk})
    if not access.can_submit(user, job.tenant_id):
        raise PermissionDenied(_("You may not submit jobs in tenant %(t)s (your role there is read-only).") % {
            "t": job.tenant.name})
    return submission.submit_job(user, request_of(job))
