"""Writing improvement actions: a report's recommendation turned into work someone owns.

Only platform admins write; every write is one audit record with the fields before and after and the
reason, in the same transaction as the write. The baseline is read from the report of the action's month
with ``improvement_queries.metric_value``, the rule the review pack uses to read the metric later, so the
two are comparable. Errors are ``ValidationError``s keyed by the field, for the form and any API alike.
The reads live in ``improvement_queries`` and are re-exported here for callers that want one module.
"""

from __future__ import annotations

import math
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit import log as audit
from audit.models import AuditAction
from fleet.catalogue import gpu_model_catalogue
from gpuportal.text.dates import month_start
from gpuportal.web.validation import Refusals, refuse, text_problem
from metering.improvements.queries import (
    CAPACITY_METRICS,
    PLATFORM_ONLY_METRICS,
    SHARE_METRICS,
    metric_value,
)
from metering.models import ImprovementAction, ImprovementDirection, ImprovementMetric, ImprovementStatus
from metering.reports import monthly as reports
from tenants import access
from tenants.models import Tenant

__all__ = ["EDITABLE_FIELDS", "create_action", "delete_action",
           "update_action"]

#: What an edit may change; the month, metric, model and baseline define what is measured and stay.
EDITABLE_FIELDS = ("title", "owner", "due_month", "target", "status", "notes")
#: The longest texts an action takes (the model's columns where it has them; the forms and messages read these).
MAX_TITLE = ImprovementAction._meta.get_field("title").max_length
MAX_RECOMMENDATION = ImprovementAction._meta.get_field("recommendation").max_length
MAX_GPU_MODEL = ImprovementAction._meta.get_field("gpu_model").max_length
MAX_NOTES, MAX_REASON = 5000, 500
#: Largest target accepted (GPU-hours in a month, seconds of wait): far above any real figure.
MAX_TARGET = 1e12


def _require_admin(actor, what: str) -> None:
    if actor is None or not access.is_platform_admin(actor):
        raise PermissionDenied(_("Only platform admins %(what)s improvement actions.") % {"what": what})


def _stripped(value) -> str:
    return "" if value is None else str(value).strip()


def _text(field: str, value: str, limit: int, required: bool = False) -> str:
    """``value`` (stripped) when it is storable text within ``limit`` (and given, when ``required``)."""
    problem = text_problem(value)
    if problem:
        refuse(field, f"{field}: {problem}")
    if required and not value:
        refuse(field, _("%(f)s: this field is required.") % {"f": field})
    if len(value) > limit:
        refuse(field, _("%(f)s: at most %(n)d characters (%(got)d given).") % {
            "f": field, "n": limit, "got": len(value)})
    return value


def _month(field: str, value) -> date:
    if isinstance(value, date):
        return month_start(value)
    refuse(field, _("%(f)s: give a month (YYYY-MM).") % {"f": field})


def _due_month(value, month: date | None) -> date:
    """The due month: a month, not before the report month (when that one is known)."""
    due = _month("due_month", value)
    if month and due < month:
        refuse("due_month", _("due_month: %(due)s is before the report month %(month)s.") % {
            "due": f"{due:%Y-%m}", "month": f"{month:%Y-%m}"})
    return due


def _target(metric: str, value) -> float | None:
    if value is None or value == "":
        return None
    try:
        target = float(value)
        if not math.isfinite(target) or target < 0 or target > MAX_TARGET:
            raise ValueError
    except (TypeError, ValueError):
        refuse("target", _("target: give a number from 0 to %(max)s, or leave it empty.") % {"max": f"{MAX_TARGET:g}"})
    if metric in SHARE_METRICS and target > 1:
        refuse("target", _("target: a share is at most 100 %."))
    return target


def _owner(owner):
    if owner is None or owner == "":
        return None
    if not isinstance(owner, get_user_model()) or not owner.is_active:
        refuse("owner", _("owner: choose an active user, or nobody."))
    return owner


def _status(value) -> str:
    if value not in ImprovementStatus.values:
        refuse("status", _("status: one of %(choices)s.") % {"choices": ", ".join(ImprovementStatus.values)})
    return value


def _closed(month: date, now: datetime) -> None:
    """The report month must be closed: an open month's report holds partial figures, a future one nothing."""
    if not reports.is_closed(month, now):
        refuse("month", _("month: only a closed month's report can be the baseline: %(month)s is still "
                          "open.") % {"month": f"{month:%Y-%m}"})


def _metric(metric: str, tenant, gpu_model: str) -> str:
    if metric not in ImprovementMetric.values:
        refuse("metric", _("metric: one of %(choices)s.") % {"choices": ", ".join(ImprovementMetric.values)})
    if gpu_model and metric in PLATFORM_ONLY_METRICS:
        refuse("metric", _("metric: %(m)s has no per-model figure; leave the GPU model empty.") % {
            "m": ImprovementMetric(metric).label})
    if tenant is not None and metric in CAPACITY_METRICS:
        refuse("metric", _("metric: %(m)s is a capacity figure of the platform report; a tenant report "
                           "has none.") % {"m": ImprovementMetric(metric).label})
    return metric


def _direction(direction: str) -> str:
    if direction not in ImprovementDirection.values:
        refuse("direction", _("direction: one of %(choices)s.") % {
            "choices": ", ".join(ImprovementDirection.values)})
    return direction


def _tenant(tenant) -> Tenant | None:
    if tenant is not None and not isinstance(tenant, Tenant):
        refuse("tenant", _("tenant: choose a tenant, or none for the platform."))
    return tenant


def _report(month: date, tenant: Tenant | None, gpu_model: str, now: datetime) -> dict:
    """The report of ``month`` (the baseline's), which must know ``gpu_model`` when one is named."""
    report = reports.report_for(month, tenant, now)[0]
    if gpu_model and gpu_model not in _models_of(report):
        refuse("gpu_model", _("gpu_model: no GPU model %(m)r in the fleet or in %(month)s's report.") % {
            "m": gpu_model, "month": f"{month:%Y-%m}"})
    return report


def _state(action: ImprovementAction) -> dict:
    """The fields an audit record shows, as plain values."""
    return {"month": f"{action.month:%Y-%m}", "tenant": action.tenant.name if action.tenant_id else None,
            "gpu_model": action.gpu_model, "title": action.title,
            "owner": action.owner.get_username() if action.owner_id else None,
            "due_month": f"{action.due_month:%Y-%m}", "metric": action.metric, "direction": action.direction,
            "baseline": action.baseline, "target": action.target, "status": action.status,
            "recommendation": action.recommendation, "notes": action.notes}


def create_action(actor, *, month: date, tenant: Tenant | None, title: str, owner, due_month: date, metric: str,
                  direction: str, target: float | None = None, gpu_model: str = "", recommendation: str = "",
                  notes: str = "", reason: str = "", now: datetime | None = None) -> ImprovementAction:
    """A new action following ``month``'s report; its baseline is the metric's value in that report.

    ``month`` must be closed (as of ``now``): an open month's report holds partial figures and a future one
    nothing, and a baseline read from either would make every later month look like a change.
    ``target`` is in the report's unit (seconds, fraction). ``reason`` defaults to the recommendation."""
    _require_admin(actor, _("create"))
    refusals = Refusals()
    attempt = refusals.attempt
    now = now or timezone.now()
    month = attempt(_month, "month", month)
    if month:
        attempt(_closed, month, now)
    due_month = attempt(_due_month, due_month, month)
    attempt(_tenant, tenant)
    title = attempt(_text, "title", _stripped(title), MAX_TITLE, True)
    recommendation = _stripped(recommendation)
    attempt(_text, "recommendation", recommendation, MAX_RECOMMENDATION)
    notes = attempt(_text, "notes", _stripped(notes), MAX_NOTES)
    gpu_model = _stripped(gpu_model)
    attempt(_text, "gpu_model", gpu_model, MAX_GPU_MODEL)
    owner = attempt(_owner, owner)
    attempt(_metric, metric, tenant, gpu_model)
    attempt(_direction, direction)
    target = attempt(_target, metric, target)
    report = None
    if month and not refusals.any_of("month", "gpu_model", "tenant"):
        report = attempt(_report, month, tenant, gpu_model, now)
    reason = attempt(_text, "reason", _stripped(reason or recommendation), MAX_REASON)
    refusals.raise_any()
    with transaction.atomic():
        action = ImprovementAction.objects.create(
            month=month, tenant=tenant, gpu_model=gpu_model, recommendation=recommendation, title=title,
            owner=owner, due_month=due_month, metric=metric, direction=direction,
            baseline=metric_value(report, metric, gpu_model), target=target, notes=notes, created_by=actor)
        audit.record(AuditAction.IMPROVEMENT_CREATE, action, actor=actor, reason=reason, after=_state(action))
    return action


def _models_of(report: dict) -> set[str]:
    names = set(gpu_model_catalogue())
    names.update(row.get("gpu_model") for row in report.get("utilisation_by_gpu_model") or [])
    names.update(row.get("name") for row in report.get("by_gpu_model") or [])
    return names


def update_action(actor, action: ImprovementAction, reason: str, **changes) -> ImprovementAction:
    """Change the ``EDITABLE_FIELDS`` given; one audit record with the changed fields before and after.

    Nothing is written (and nothing recorded) when every value given is the one the action has."""
    _require_admin(actor, _("change"))
    refusals = Refusals()
    for field in changes:
        if field not in EDITABLE_FIELDS:
            refusals.attempt(refuse, field, _("%(f)s: cannot be changed; editable: %(fields)s.") % {
                "f": field, "fields": ", ".join(EDITABLE_FIELDS)})
    rules = {"title": lambda value: _text("title", _stripped(value), MAX_TITLE, True),
             "notes": lambda value: _text("notes", _stripped(value), MAX_NOTES),
             "owner": _owner, "status": _status, "target": lambda value: _target(action.metric, value),
             "due_month": lambda value: _due_month(value, action.month)}
    values = {field: refusals.attempt(rule, changes[field]) for field, rule in rules.items() if field in changes}
    reason = refusals.attempt(_text, "reason", _stripped(reason), MAX_REASON, True)
    refusals.raise_any()
    with transaction.atomic():
        current = _locked(action)
        before = _state(current)
        for field, value in values.items():
            setattr(current, field, value)
        after = _state(current)
        changed = [key for key in after if after[key] != before[key]]
        if changed:
            current.save()
            audit.record(AuditAction.IMPROVEMENT_CHANGE, current, actor=actor, reason=reason,
                         before={k: before[k] for k in changed}, after={k: after[k] for k in changed})
    for field in (*EDITABLE_FIELDS, "last_updated"):  # the caller's instance shows what was saved
        setattr(action, field, getattr(current, field))
    return current


def _locked(action: ImprovementAction) -> ImprovementAction:
    """The row as it is now, locked until the transaction ends: the record states what was really there."""
    return ImprovementAction.objects.select_for_update(of=("self",)).select_related("owner", "tenant").get(
        pk=action.pk)


def delete_action(actor, action: ImprovementAction, reason: str) -> None:
    """Remove an action (one made by mistake); the record keeps everything it held, and why it went."""
    _require_admin(actor, _("remove"))
    reason = _text("reason", _stripped(reason), MAX_REASON, True)
    with transaction.atomic():
        current = _locked(action)
        audit.record(AuditAction.IMPROVEMENT_DELETE, current, actor=actor, reason=reason, before=_state(current))
        current.delete()
