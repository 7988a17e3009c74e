"""The acceptance checklist: four rows a pilot or a go-live review signs off, filled from live data.

Each row (``contract.ChecklistRow``) names a capability, lists the evidence the portal holds for it (links to
the jobs, nodes, reports and audit records), and computes a status from that data. A pilot adds notes, the
configuration used and screenshots to a row (``add_note``, audited). ``checklist()`` reads everything in a
bounded number of queries whatever the number of jobs: counts are aggregates, and each kind of evidence lists at
most ``EVIDENCE_LINKS`` recent items.

Status rules (``RULES`` shows them on the page; "missing" always means no evidence at all):

* **Multi-card** — a multi-card job is one node with 2 or more GPUs. *Present*: at least one succeeded, every
  GPU model of the fleet is known to the catalogue with its memory and interconnect, every node carries its
  topology labels (rack, network domain), and infrastructure faults (node, GPU, communication) ended fewer than
  ``INFRA_ATTENTION_SHARE`` of the finished ones. *Attention*: such jobs ran but none succeeded, a model or a
  node is not fully recognised, or infrastructure faults reached that share. *Missing*: none has run.
* **Multi-node** — a job on 2 or more nodes. *Present*: at least one succeeded, every cross-node communication
  failure was localised to a node by its diagnosis (every communication attempt, or the final diagnosis when no
  attempt was recorded, names a node), and communication failures hit fewer than
  ``COMMUNICATION_ATTENTION_SHARE`` of the jobs that ran. *Attention*: they ran but none succeeded, a
  communication failure names no node (the fault was not localised), or communication failures reached that
  share (the network needs a look before growing). *Missing*: none has run.
* **Multi-tenant** — *Present*: two or more tenants have metered usage, every (tenant, model) with usage has a
  quota row (a tenant without one may not use the model), no job belongs to a project of another tenant, and
  the audit log holds quota, membership, approval or reservation records. *Attention*: usage or audit
  records exist but one of those fails. *Missing*: no usage and no such audit record.
* **Operations** — *Present*: at least ``MIN_TRIAL_DAYS`` days of usage or capacity data (the guidance: a
  month of trial data before deciding to grow), at least one frozen platform report, and the latest report's
  advice to change something (anything but "keep") followed by at least one platform improvement action for
  that month (a tenant's action answers its own report, not the platform's). *Attention*: data exists but one
  of those fails. *Missing*: no data and no frozen report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    Func,
    Max,
    OuterRef,
    Q,
    Sum,
    TextField,
    Value,
)
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Coalesce
from django.db.models.lookups import Exact
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from audit import log as audit
from audit.models import AuditAction, AuditRecord
from fleet.catalogue import gpu_model_catalogue
from fleet.models import Node, NodeEvent
from gpuportal.text.dates import local_day, month_start
from gpuportal.text.formatting import list_text
from metering.acceptance.contract import ChecklistRow, Evidence, Note
from metering.models import (
    AcceptanceArea,
    AcceptanceNote,
    CapacityAction,
    CapacityDaily,
    ImprovementAction,
    MonthlyReport,
    UsageDaily,
    UsageMonthly,
)
from metering.reports.contract import Advice, JobOutcomes
from metering.reports.monthly import advice_text
from scheduling.models import INFRASTRUCTURE_FAILURES, TERMINAL_STATUSES, FailureCategory, Job, JobAllocation, JobStatus
from tenants import access
from tenants.models import Quota

#: At most this many links per kind of evidence (the newest).
EVIDENCE_LINKS = 5
#: Multi-card: infrastructure faults ending this share of the finished jobs need attention.
INFRA_ATTENTION_SHARE = 0.2
#: Multi-node: communication failures hitting this share of the jobs that ran need attention.
COMMUNICATION_ATTENTION_SHARE = 0.2
#: Operations: the guidance is a month of trial data before deciding to grow.
MIN_TRIAL_DAYS = 30
#: Bounds of a note's text and configuration (characters).
MAX_TEXT = 10_000
MAX_CONFIGURATION = 20_000
#: A screenshot is kept in the database: bounded.
SCREENSHOT_MAX_BYTES = 5 * 1024 * 1024
#: Audit actions that show tenancy being governed (quotas, members, approvals, reservations, preemption).
TENANCY_ACTIONS = (AuditAction.QUOTA_CHANGE, AuditAction.MEMBERSHIP_ADD, AuditAction.MEMBERSHIP_CHANGE,
                   AuditAction.MEMBERSHIP_REMOVE, AuditAction.REQUEST_APPROVE, AuditAction.REQUEST_DENY,
                   AuditAction.RESERVATION_CREATE, AuditAction.RESERVATION_CHANGE, AuditAction.RESERVATION_DELETE,
                   AuditAction.JOB_PREEMPT)


class Status:
    PRESENT = "present"
    MISSING = "missing"
    ATTENTION = "attention"


STATUS_TEXT = {Status.PRESENT: gettext_lazy("Evidence present"), Status.MISSING: gettext_lazy("Evidence missing"),
               Status.ATTENTION: gettext_lazy("Needs attention")}

CAPABILITIES = {
    AcceptanceArea.MULTI_CARD: gettext_lazy(
        "Accelerator models, their memory and the node topology are recognised, and jobs using several cards "
        "of one node are submitted and run."),
    AcceptanceArea.MULTI_NODE: gettext_lazy(
        "Jobs are scheduled across nodes, and a cross-node communication fault is localised to a node "
        "(communication logs, node events)."),
    AcceptanceArea.MULTI_TENANT: gettext_lazy(
        "Tenants work side by side under their own queues and quotas, isolated from each other, and the "
        "governance of it is audited."),
    AcceptanceArea.OPERATIONS: gettext_lazy(
        "Utilisation, waits and failures are analysed in periodic reports, and their conclusions are followed "
        "up."),
}

RULES = {
    AcceptanceArea.MULTI_CARD: gettext_lazy(
        "Present: a job on one node with 2 or more GPUs succeeded, every model of the fleet is known with its "
        "memory and interconnect, every node has its rack and network domain, and node, GPU or communication "
        "faults ended fewer than %(share)d %% of the finished ones. Needs attention: they ran but none succeeded, or "
        "one of those fails. Missing: none has run."),
    AcceptanceArea.MULTI_NODE: gettext_lazy(
        "Present: a job on 2 or more nodes succeeded, every communication failure was localised to a node, and "
        "communication failures hit fewer than %(share)d %% of the multi-node jobs that ran. Needs attention: they ran "
        "but none succeeded, or one of those fails. Missing: none has run."),
    AcceptanceArea.MULTI_TENANT: gettext_lazy(
        "Present: 2 or more tenants have usage, every tenant uses only models it has a quota for, no job "
        "belongs to another tenant's project, and quota, membership, approval or reservation changes are in "
        "the audit log. Needs attention: usage or audit records exist but one of those fails. Missing: "
        "neither exists."),
    AcceptanceArea.OPERATIONS: gettext_lazy(
        "Present: at least %(days)d days of data (a month of trial data before deciding to grow), a frozen monthly "
        "platform report, and the latest report's advice to change something followed by an improvement "
        "action. Needs attention: data exists but one of those fails. Missing: no data and no report."),
}


# --- who may do what ---------------------------------------------------------------------------------------


def can_read(user) -> bool:
    """Platform admins and managers: the checklist reads every tenant's jobs, usage and audit records."""
    return access.sees_all_tenants(user)


def can_add_notes(user) -> bool:
    """Platform admins only: managers see every tenant but change nothing (their role is read-only)."""
    return access.is_platform_admin(user)


# --- the rows ----------------------------------------------------------------------------------------------


def checklist(now: datetime | None = None) -> list[ChecklistRow]:
    """The four rows, in the order of ``AcceptanceArea``, each with its evidence, status, why and notes."""
    now = now or timezone.now()
    notes = _notes()
    builders = {AcceptanceArea.MULTI_CARD: _multi_card, AcceptanceArea.MULTI_NODE: _multi_node,
                AcceptanceArea.MULTI_TENANT: _multi_tenant, AcceptanceArea.OPERATIONS: _operations}
    rows = []
    for area, build in builders.items():
        evidence, status, why = build(now)
        rows.append(ChecklistRow(area=area.value, area_label=str(area.label), capability=str(CAPABILITIES[area]),
                                 rule=_rule(area), evidence=evidence, status=status,
                                 status_text=str(STATUS_TEXT[status]), why=why, notes=notes.get(area.value, [])))
    return rows


def _rule(area: AcceptanceArea) -> str:
    """The row's status rule with the thresholds this module applies (one place for the figures)."""
    return str(RULES[area]) % {"share": round(100 * (COMMUNICATION_ATTENTION_SHARE if area == AcceptanceArea.MULTI_NODE
                                                     else INFRA_ATTENTION_SHARE)), "days": MIN_TRIAL_DAYS}


def _item(text: str, url: str | None = None) -> Evidence:
    return Evidence(text=text, url=url)


def _job_url(pk: int, anchor: str = "") -> str:
    return reverse("scheduling:job-detail", args=[pk]) + (f"#{anchor}" if anchor else "")


def _percent(part: int, whole: int) -> str:
    return number_format(100 * part / whole, 0) if whole else "0"


def _verdict(reasons: list[str], any_evidence: bool, missing_why: str, present_why: str) -> tuple[str, str]:
    if not any_evidence:
        return Status.MISSING, missing_why
    if reasons:
        return Status.ATTENTION, " ".join(reasons)
    return Status.PRESENT, present_why


@dataclass(frozen=True, slots=True)
class _JobCounts:
    """Jobs of one kind (multi-card, multi-node): submitted, that ran, that succeeded, that ran and finished,
    and that ran and failed with an infrastructure fault (node, GPU, communication)."""

    submitted: int
    ran: int
    succeeded: int
    finished: int
    infrastructure: int


@dataclass(frozen=True, slots=True)
class _RecentJob:
    """A job that ran, as its evidence line names it."""

    pk: int
    name: str
    gpu_model: str
    gpus_per_node: int
    node_count: int
    status: str
    tenant: str


def _job_counts(jobs) -> _JobCounts:
    ran = Q(started_at__isnull=False)
    return _JobCounts(**jobs.aggregate(
        submitted=Count("pk"), ran=Count("pk", filter=ran),
        succeeded=Count("pk", filter=Q(status=JobStatus.SUCCEEDED)),
        finished=Count("pk", filter=ran & Q(status__in=TERMINAL_STATUSES)),
        infrastructure=Count("pk", filter=ran & Q(status=JobStatus.FAILED,
                                                  failure_category__in=INFRASTRUCTURE_FAILURES))))


def _recent_jobs(jobs) -> list[_RecentJob]:
    return [_RecentJob(*values) for values in jobs.filter(started_at__isnull=False).order_by(
        "-started_at", "-pk").values_list("pk", "name", "gpu_model", "gpus_per_node", "node_count", "status",
                                          "tenant__name")[:EVIDENCE_LINKS]]


def _job_text(job: _RecentJob) -> str:
    return _("Job #%(pk)d %(name)s (%(tenant)s): %(nodes)d × %(gpus)d %(model)s, %(status)s") % {
        "pk": job.pk, "name": job.name, "tenant": job.tenant, "nodes": job.node_count,
        "gpus": job.gpus_per_node, "model": job.gpu_model, "status": JobStatus(job.status).label}


def _multi_card(now: datetime) -> tuple[list[Evidence], str, str]:
    jobs = Job.objects.filter(node_count=1, gpus_per_node__gte=2, submitted_at__lte=now)
    counts = _job_counts(jobs)
    succeeded_by_model = list(jobs.filter(status=JobStatus.SUCCEEDED).values("gpu_model").annotate(
        n=Count("pk"), gpus=Max("gpus_per_node")).order_by("-n", "gpu_model").values_list("gpu_model", "gpus"))
    catalogue = gpu_model_catalogue()
    unlabelled = list(Node.objects.filter(Q(rack="") | Q(network_domain="")).values_list("name", flat=True)[:5])
    evidence = [_item(_("%(model)s: %(nodes)d nodes, up to %(gpus)d per node, %(memory)s GB each, %(link)s") % {
        "model": name, "nodes": c.nodes, "gpus": c.max_gpus_per_node, "memory": c.memory_gb or "?",
        "link": c.interconnect or _("interconnect unknown")}, reverse("fleet:inventory"))
        for name, c in sorted(catalogue.items())[:10]]
    evidence += [_item(_job_text(job), _job_url(job.pk)) for job in _recent_jobs(jobs)]

    reasons = []
    if counts.ran and not counts.succeeded:
        reasons.append(ngettext("%(n)d multi-card job ran but it did not succeed.",
                                "%(n)d multi-card jobs ran but none succeeded.", counts.ran) % {"n": counts.ran})
    unknown = sorted(name for name, c in catalogue.items() if not c.memory_gb or not c.interconnect)
    if unknown:
        reasons.append(_("The catalogue lacks the memory or interconnect of %(models)s.") % {
            "models": list_text(unknown)})
    if unlabelled:
        reasons.append(_("Nodes without a rack or network domain (topology unknown): %(nodes)s.") % {
            "nodes": list_text(unlabelled)})
    infra, finished = counts.infrastructure, counts.finished
    if finished and infra / finished >= INFRA_ATTENTION_SHARE:
        reasons.append(_("Node, GPU or communication faults ended %(n)d of %(total)d finished multi-card jobs "
                         "(%(pct)s %%).") % {"n": infra, "total": finished, "pct": _percent(infra, finished)})
    models = list_text(_("%(model)s (%(gpus)d GPUs, %(link)s)") % {
        "model": model, "gpus": gpus, "link": catalogue[model].interconnect if model in catalogue else "?"}
        for model, gpus in succeeded_by_model)
    present = ngettext("%(n)d multi-card job succeeded on %(models)s", "%(n)d multi-card jobs succeeded on %(models)s",
                       counts.succeeded) % {"n": counts.succeeded, "models": models}
    present += "; " + (ngettext("%(n)d failed with a node, GPU or communication fault.",
                                "%(n)d failed with a node, GPU or communication fault.", infra) % {"n": infra}
                       if infra else _("none failed with a node, GPU or communication fault."))
    if counts.submitted and not counts.ran:
        missing = ngettext("%(n)d multi-card job was submitted but none has run yet.",
                           "%(n)d multi-card jobs were submitted but none has run yet.",
                           counts.submitted) % {"n": counts.submitted}
    else:
        missing = _("No multi-card job (one node, 2 or more GPUs) has run yet.")
    return (evidence, *_verdict(reasons, bool(counts.ran), missing, present))


# Jobs whose diagnosis (final, or of an attempt that was retried) says cross-node communication failed. Such a
# failure is localised when every communication attempt names a node or, for a job that recorded no attempt of
# it (only its final diagnosis), when that diagnosis names one. "Names" means a non-empty value: a key that is
# missing, JSON null and "" all leave the fault unlocalised. All of it is SQL on the JSON, so the row's
# counts stay one aggregate query whatever the number of jobs.
_COMMUNICATION_ATTEMPT = Q(executor_state__attempts__contains=[{"category": FailureCategory.COMMUNICATION.value}])
_COMMUNICATION = Q(failure_category=FailureCategory.COMMUNICATION) | _COMMUNICATION_ATTEMPT


class _JsonPathExists(Func):
    """``jsonb_path_exists(column, path)``: containment (``@>``) cannot ask for a missing key, a path can."""

    function = "jsonb_path_exists"
    output_field = BooleanField()

    def __init__(self, column: str, path: str):
        super().__init__(F(column), Func(Value(path), template="(%(expressions)s)::jsonpath",
                                         output_field=TextField()))


#: A communication attempt whose node is missing, null or "".
_ATTEMPT_WITHOUT_NODE = _JsonPathExists(
    "executor_state", f'$.attempts[*] ? (@.category == "{FailureCategory.COMMUNICATION.value}" '
                      '&& (!exists(@.node) || @.node == null || @.node == ""))')
#: The final diagnosis names no node (missing, null or "": ``#>>`` gives SQL NULL for the first two).
_DIAGNOSIS_WITHOUT_NODE = Exact(
    Coalesce(KT("executor_state__diagnosis__node"), Value(""), output_field=TextField()), "")
#: Whether any attempt is a communication failure, as a path: false, not NULL, when "attempts" is absent (the
#: negated containment test would be NULL there and drop the job from the count).
_ANY_COMMUNICATION_ATTEMPT = _JsonPathExists(
    "executor_state", f'$.attempts[*] ? (@.category == "{FailureCategory.COMMUNICATION.value}")')
_UNLOCALISED = _COMMUNICATION & (Q(_ATTEMPT_WITHOUT_NODE)
                                 | (~Q(_ANY_COMMUNICATION_ATTEMPT) & Q(_DIAGNOSIS_WITHOUT_NODE)))


def _communication_attempt(state: dict) -> dict:
    """The newest diagnosis of a communication failure of a job (its retried attempts included)."""
    attempts = [a for a in (state or {}).get("attempts", []) if a.get("category") == FailureCategory.COMMUNICATION]
    return attempts[-1] if attempts else ((state or {}).get("diagnosis") or {})


@dataclass(frozen=True, slots=True)
class _CommunicationCounts:
    """Multi-node jobs that ran and hit a communication failure, and those of them whose failure names no node."""

    communication: int
    unlocalised: int


@dataclass(frozen=True, slots=True)
class _CommunicationFailure:
    """A job that hit a communication failure, with its executor state (the diagnoses name the node)."""

    pk: int
    name: str
    executor_state: dict


def _communication_failures(ran) -> tuple[_CommunicationCounts, list[_CommunicationFailure]]:
    """How many multi-node jobs that ran hit a communication failure and how many of those name no node, and
    the newest such jobs for the evidence.

    On PostgreSQL the rule is SQL on the JSON (one aggregate, one short list). SQLite — the embedded demo — has
    no JSON containment or paths: there the same rule runs in Python over the jobs' states."""
    if connection.vendor == "postgresql":
        counts = ran.aggregate(communication=Count("pk", filter=_COMMUNICATION),
                               unlocalised=Count("pk", filter=_UNLOCALISED))
        return _CommunicationCounts(**counts), [
            _CommunicationFailure(*values) for values in ran.filter(_COMMUNICATION).order_by(
                "-started_at", "-pk").values_list("pk", "name", "executor_state")[:EVIDENCE_LINKS]]
    communication, unlocalised, failures = 0, 0, []
    for pk, name, state, category in ran.order_by("-started_at", "-pk").values_list(
            "pk", "name", "executor_state", "failure_category"):
        state = state or {}
        attempts = [a for a in state.get("attempts") or [] if a.get("category") == FailureCategory.COMMUNICATION]
        if category != FailureCategory.COMMUNICATION and not attempts:
            continue
        communication += 1
        named = [a.get("node") for a in attempts] if attempts else [(state.get("diagnosis") or {}).get("node")]
        unlocalised += not all(named)
        if len(failures) < EVIDENCE_LINKS:
            failures.append(_CommunicationFailure(pk, name, state))
    return _CommunicationCounts(communication, unlocalised), failures


def _attempt_nodes(job_ids: list[int]) -> dict[int, list[list[str]]]:
    """The nodes of each attempt of each job, oldest attempt first: an attempt's GPUs are allocated at one
    moment (the pass that admitted it), so a retry elsewhere is a later group, not more nodes of one run."""
    by_moment: dict[int, dict] = {}
    for job_id, moment, node in JobAllocation.objects.filter(job__in=job_ids).values_list(
            "job_id", "allocated_at", "gpu__node__name").distinct().order_by("job_id", "allocated_at",
                                                                             "gpu__node__name"):
        by_moment.setdefault(job_id, {}).setdefault(moment, []).append(node)
    return {job_id: list(moments.values()) for job_id, moments in by_moment.items()}


def _placement_text(job: _RecentJob, attempts: list[list[str]] | None) -> str:
    """A multi-node job and where its last attempt ran; where earlier attempts ran too, when it was retried."""
    if not attempts:
        return _job_text(job)
    text = _("%(job)s, on %(nodes)s") % {"job": _job_text(job), "nodes": list_text(attempts[-1])}
    if len(attempts) > 1:
        text += " " + _("(earlier attempts on %(nodes)s)") % {
            "nodes": list_text((list_text(nodes) for nodes in attempts[:-1]), clauses=True)}
    return text


def _multi_node(now: datetime) -> tuple[list[Evidence], str, str]:
    jobs = Job.objects.filter(node_count__gte=2, submitted_at__lte=now)
    ran = jobs.filter(started_at__isnull=False)
    communication, failures = _communication_failures(ran)
    counts = _job_counts(jobs)
    widest = ran.aggregate(widest=Max("node_count", filter=Q(status=JobStatus.SUCCEEDED)))["widest"]
    recent = _recent_jobs(jobs)
    attempts = _attempt_nodes([job.pk for job in recent])
    evidence = [_item(_placement_text(job, attempts.get(job.pk)), _job_url(job.pk)) for job in recent]

    faulty_nodes = []
    for job in failures:
        diagnosis = _communication_attempt(job.executor_state)
        node = diagnosis.get("node") or ""
        line = (diagnosis.get("evidence") or {}).get("log_line") or diagnosis.get("message") or ""
        if node:
            faulty_nodes.append(node)
            text = _("Job #%(pk)d %(name)s: communication failure localised to %(node)s") % {
                "pk": job.pk, "name": job.name, "node": node}
        else:
            text = _("Job #%(pk)d %(name)s: communication failure, no node named") % {"pk": job.pk,
                                                                                     "name": job.name}
        evidence.append(_item(f"{text} — {line[:200]}" if line else text, _job_url(job.pk, "job-log")))
    events = NodeEvent.objects.select_related("node").order_by("-at", "-id")
    shown = list(events.filter(node__name__in=faulty_nodes)[:EVIDENCE_LINKS]) if faulty_nodes else []
    if not shown and counts.ran:
        shown = list(events.filter(kind=NodeEvent.Kind.HEALTH, at__lte=now)[:EVIDENCE_LINKS])
    evidence += [_item(_("%(at)s %(node)s: %(from)s → %(to)s — %(reason)s") % {
        "at": timezone.localtime(e.at).strftime("%Y-%m-%d %H:%M"), "node": e.node.name,
        "from": e.from_state_label or "—", "to": e.to_state_label or "—", "reason": e.reason[:200]},
        reverse("fleet:node-detail", args=[e.node.name])) for e in shown]

    reasons = []
    if counts.ran and not counts.succeeded:
        reasons.append(ngettext("%(n)d multi-node job ran but it did not succeed.",
                                "%(n)d multi-node jobs ran but none succeeded.", counts.ran) % {"n": counts.ran})
    if communication.unlocalised:
        reasons.append(ngettext(
            "%(n)d communication failure names no node: the fault was not localised.",
            "%(n)d communication failures name no node: the faults were not localised.",
            communication.unlocalised) % {"n": communication.unlocalised})
    comm, total = communication.communication, counts.ran
    if total and comm / total >= COMMUNICATION_ATTENTION_SHARE:
        reasons.append(_("%(n)d of %(total)d multi-node jobs (%(pct)s %%) hit a communication failure: check the "
                         "network between nodes before growing.") % {"n": comm, "total": total,
                                                                    "pct": _percent(comm, total)})
    present = ngettext("%(n)d multi-node job succeeded", "%(n)d multi-node jobs succeeded",
                       counts.succeeded) % {"n": counts.succeeded}
    present += " " + _("(up to %(nodes)d nodes); ") % {"nodes": widest or 0}
    present += (ngettext("%(n)d communication failure, localised to its node.",
                         "%(n)d communication failures, each localised to a node.", comm) % {"n": comm}
                if comm else _("no communication failure so far."))
    if counts.submitted and not counts.ran:
        missing = ngettext("%(n)d multi-node job was submitted but none has run yet.",
                           "%(n)d multi-node jobs were submitted but none has run yet.",
                           counts.submitted) % {"n": counts.submitted}
    else:
        missing = _("No multi-node job has run yet.")
    return (evidence, *_verdict(reasons, bool(counts.ran), missing, present))


def _audit_url(actions) -> str:
    return reverse("audit:log") + "?" + urlencode([("action", str(a)) for a in actions])


def _multi_tenant(now: datetime) -> tuple[list[Evidence], str, str]:
    usage = list(UsageMonthly.objects.filter(month__lte=now.date()).values("tenant__name").annotate(
        seconds=Sum("allocated_gpu_seconds"), last=Max("month")).order_by("-seconds", "tenant__name").values_list(
        "tenant__name", "seconds", "last"))
    quotas = dict(Quota.objects.values("tenant__name").annotate(n=Count("pk")).values_list("tenant__name", "n"))
    audited = list(AuditRecord.objects.filter(action__in=TENANCY_ACTIONS, at__lte=now).values("action").annotate(
        n=Count("pk")).order_by("-n", "action").values_list("action", "n"))
    without_quota = list(UsageMonthly.objects.filter(allocated_gpu_seconds__gt=0).annotate(quota=Exists(
        Quota.objects.filter(tenant=OuterRef("tenant"), gpu_model=OuterRef("gpu_model")))).filter(
        quota=False).values_list("tenant__name", "gpu_model").distinct().order_by("tenant__name", "gpu_model")[:5])
    crossed = Job.objects.exclude(project__tenant=F("tenant")).count()

    evidence = [_item(_("%(tenant)s: %(hours)s GPU-hours allocated, quotas on %(quotas)d models") % {
        "tenant": tenant, "hours": number_format(seconds / 3600, 1), "quotas": quotas.get(tenant, 0)},
        reverse("metering:tenant-report", kwargs={"month": f"{last:%Y-%m}", "tenant": tenant}))
        for tenant, seconds, last in usage[:EVIDENCE_LINKS]]
    evidence += [_item(ngettext("%(n)d audit record: %(action)s", "%(n)d audit records: %(action)s", n) % {
        "n": n, "action": AuditAction(action).label}, _audit_url([action]))
        for action, n in audited[:EVIDENCE_LINKS]]
    audit_total = sum(n for _action, n in audited)

    reasons = []
    if len(usage) == 1:
        reasons.append(_("Only one tenant (%(tenant)s) has usage: isolation between tenants is not shown yet.") % {
            "tenant": usage[0][0]})
    elif not usage:
        reasons.append(_("No tenant has metered usage yet."))
    if without_quota:
        reasons.append(_("Used a model without a quota for it (tenants may only use models they have a quota "
                         "for): %(pairs)s.") % {"pairs": list_text(f"{t}/{m}" for t, m in without_quota)})
    if crossed:
        reasons.append(ngettext("%(n)d job belongs to a project of another tenant.",
                                "%(n)d jobs belong to a project of another tenant.", crossed) % {"n": crossed})
    if not audit_total:
        reasons.append(_("The audit log has no quota, membership, approval or reservation record yet."))
    hours = sum(seconds for _tenant, seconds, _last in usage) / 3600
    present = _("%(tenants)d tenants used %(hours)s GPU-hours, each only on models it has a quota for; ") % {
        "tenants": len(usage), "hours": number_format(hours, 1)}
    present += ngettext("%(n)d audit record of quota, membership, approval or reservation changes.",
                        "%(n)d audit records of quota, membership, approval or reservation changes.",
                        audit_total) % {"n": audit_total}
    missing = _("No tenant usage has been metered and the audit log has no quota, membership, approval or "
                "reservation record yet.")
    return (evidence, *_verdict(reasons, bool(usage or audit_total), missing, present))


@dataclass(frozen=True, slots=True)
class _FrozenReport:
    """What the operations row reads of a frozen platform report (``MonthlyReportData``'s figures)."""

    month: date
    recommendations: list[Advice]
    efficiency: float | None
    wait_p95: float | None
    jobs: JobOutcomes


def _operations(now: datetime) -> tuple[list[Evidence], str, str]:
    today = local_day(now)
    # Without the models' default ordering: SQLite refuses ORDER BY inside a UNION's parts.
    days = sorted(set(UsageDaily.objects.filter(day__lte=today).order_by().values_list("day", flat=True).union(
        CapacityDaily.objects.filter(day__lte=today).order_by().values_list("day", flat=True))))
    current = MonthlyReport.objects.filter(tenant__isnull=True, superseded_at__isnull=True, month__lte=today)
    reports = [_FrozenReport(month, recommendations or [], efficiency, wait_p95, jobs or {})
               for month, recommendations, efficiency, wait_p95, jobs in current.order_by("-month").annotate(
                   recommendations=KeyTransform("recommendations", "data"),
                   efficiency=KeyTransform("efficiency", "data"), wait_p95=KeyTransform("wait_seconds_p95", "data"),
                   jobs=KeyTransform("jobs", "data")).values_list(
                   "month", "recommendations", "efficiency", "wait_p95", "jobs")[:EVIDENCE_LINKS]]
    # The platform report's advice is followed by platform actions: a tenant's own action answers its report.
    actions = dict(ImprovementAction.objects.filter(tenant__isnull=True).values("month").annotate(
        n=Count("pk")).values_list("month", "n"))

    evidence = []
    if days:
        evidence.append(_item(ngettext("%(n)d day of usage or capacity data, from %(first)s to %(last)s",
                                       "%(n)d days of usage or capacity data, from %(first)s to %(last)s",
                                       len(days)) % {"n": len(days), "first": days[0], "last": days[-1]},
                              reverse("metering:operations")))
    for report in reports:
        month = f"{report.month:%Y-%m}"
        figures = _("platform report %(month)s: efficiency %(eff)s %%, p95 wait %(wait)s h, %(failed)s of "
                    "%(submitted)s jobs failed") % {
            "month": month, "eff": number_format(100 * (report.efficiency or 0), 0),
            "wait": number_format((report.wait_p95 or 0) / 3600, 1), "failed": report.jobs.get("failed", 0),
            "submitted": report.jobs.get("submitted", 0)}
        url = reverse("metering:platform-report", kwargs={"month": month})
        evidence.append(_item(figures, url))
        if report is reports[0]:
            evidence += [_item(advice_text(advice), url) for advice in report.recommendations[:EVIDENCE_LINKS]]
    closed = month_start(today) - timedelta(days=1)
    if not reports and days and days[0] <= closed:
        month = f"{closed:%Y-%m}"
        evidence.append(_item(_("platform report %(month)s (live figures, not frozen yet)") % {"month": month},
                              reverse("metering:platform-report", kwargs={"month": month})))
    if actions:
        evidence.append(_item(ngettext("%(n)d improvement action follows the reports' advice",
                                       "%(n)d improvement actions follow the reports' advice",
                                       sum(actions.values())) % {"n": sum(actions.values())},
                              reverse("metering:action-list")))

    reasons = []
    if days and len(days) < MIN_TRIAL_DAYS:
        reasons.append(ngettext(
            "Only %(n)d day of data: keep at least %(min)d days (a month) of trial data before deciding to grow.",
            "Only %(n)d days of data: keep at least %(min)d days (a month) of trial data before deciding to grow.",
            len(days)) % {"n": len(days), "min": MIN_TRIAL_DAYS})
    elif not days:
        reasons.append(_("No usage or capacity data has been rolled up yet."))
    if not reports:
        reasons.append(_("No closed month has a frozen platform report yet (each month is frozen after it "
                         "closes; a platform admin can regenerate one)."))
    latest = reports[0] if reports else None
    to_change = [a for a in latest.recommendations if a.get("action") != CapacityAction.KEEP] if latest else []
    if to_change and not actions.get(latest.month):
        reasons.append(_("The %(month)s report advises %(advice)s, but no improvement action records what was "
                         "decided.") % {"month": f"{latest.month:%Y-%m}", "advice": list_text(
                             f"{a.get('gpu_model')}: {CapacityAction(a['action']).label}" for a in to_change
                             if a.get("action") in CapacityAction.values)})
    present = ngettext("%(n)d day of data; ", "%(n)d days of data; ", len(days)) % {"n": len(days)}
    if latest:
        present += _("the latest frozen report (%(month)s) concludes: %(advice)s") % {
            "month": f"{latest.month:%Y-%m}",
            "advice": list_text((advice_text(a) for a in latest.recommendations), clauses=True)
            or _("no capacity advice")}
    missing = _("No usage or capacity data and no frozen report yet: the operations review has nothing to read.")
    return (evidence, *_verdict(reasons, bool(days or reports), missing, present))


# --- notes -------------------------------------------------------------------------------------------------


def _notes() -> dict[str, list[Note]]:
    """Every note by area, oldest first, without loading the screenshots' bytes."""
    rows = AcceptanceNote.objects.select_related("author").defer("screenshot").annotate(
        has_shot=ExpressionWrapper(Q(screenshot__isnull=False), output_field=BooleanField()))
    notes: dict[str, list[Note]] = {}
    for note in rows.order_by("created_at", "pk"):
        notes.setdefault(note.area, []).append(Note(
            id=note.pk, text=note.text, configuration=note.configuration, has_screenshot=note.has_shot,
            screenshot_url=reverse("acceptance:screenshot", args=[note.pk]) if note.has_shot else None,
            screenshot_name=note.screenshot_name,
            author=note.author.get_username() if note.author else "", created_at=note.created_at))
    return notes


def add_note(user, area: str, text: str = "", configuration: str = "", screenshot: bytes | None = None,
             screenshot_name: str = "", screenshot_type: str = "") -> AcceptanceNote:
    """Store a pilot's note on a row and audit it (the screenshot's name and size, not its bytes).

    The caller (the form) has checked the fields; the permission is checked here so no other path skips it."""
    if not can_add_notes(user):
        raise PermissionDenied(_("Only platform admins add acceptance evidence."))
    with transaction.atomic():
        note = AcceptanceNote.objects.create(
            area=area, text=text, configuration=configuration, screenshot=screenshot or None,
            screenshot_name=screenshot_name[:200] if screenshot else "",
            screenshot_type=screenshot_type[:50] if screenshot else "", author=user)
        audit.record(AuditAction.ACCEPTANCE_NOTE, note, actor=user, after={
            "area": area, "text": text[:500], "configuration": configuration[:500],
            "screenshot": {"name": note.screenshot_name, "type": note.screenshot_type, "bytes": len(screenshot)}
            if screenshot else None})
    return note


def screenshot_of(user, pk: int) -> AcceptanceNote | None:
    """The note with its screenshot for a reader of the checklist (None when there is none)."""
    if not can_read(user):
        raise PermissionDenied(_("The acceptance checklist is for platform admins and managers."))
    return AcceptanceNote.objects.filter(pk=pk, screenshot__isnull=False).first()
