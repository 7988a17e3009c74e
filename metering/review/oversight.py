"""The oversight groups of the review pack (governance, improvements) and its appendix (the acceptance
checklist): are the rules used, who answers for what, what changes next and is the next expansion backed by
data. Like ``groups``, each adds a fixed number of aggregate queries to the month's report.

Approvals are counted from the audit log, not from governance's tables: metering sits beside governance in
the layers and may not import it, and the audit log is the record an auditor trusts anyway.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from audit.log import verify
from audit.models import AuditAction, AuditRecord
from gpuportal.text.dates import day_start, next_month
from gpuportal.text.formatting import list_text
from metering.acceptance.checklist import Status, checklist
from metering.improvements.queries import ActionRow, actions_for_review
from metering.models import CapacityAction, WhatIfRun
from metering.reports import capacity_plan
from metering.reports.contract import Advice, CapacityPlan
from metering.review.contract import Chart, Section, Table
from metering.review.parts import (
    ReviewContext,
    chart,
    choice_label,
    figure,
    group,
    hours,
    percent_text,
    share,
    table,
    whole,
)
from tenants.models import Membership, PlatformRole, Role, Tenant

#: Audit actions that change how work is run: templates, reservations (rules) and quotas.
CHANGE_ACTIONS = (AuditAction.TEMPLATE_CREATE, AuditAction.TEMPLATE_VERSION, AuditAction.TEMPLATE_ARCHIVE,
                  AuditAction.QUOTA_CHANGE, AuditAction.RESERVATION_CREATE, AuditAction.RESERVATION_CHANGE,
                  AuditAction.RESERVATION_DELETE)
APPROVAL_ACTIONS = (AuditAction.REQUEST_APPROVE, AuditAction.REQUEST_DENY, AuditAction.REQUEST_EXPIRE)
#: Changes listed in the pack, oldest first; more are counted but not listed.
MAX_CHANGES_LISTED = 200

# --- governance ------------------------------------------------------------------------------------------


def _audit_counts(ctx: ReviewContext, start: date | None = None) -> dict[str, int]:
    """Audit records by action in ``ctx``'s month, or in the month starting ``start`` (the previous one)."""
    start, end = ctx.window if start is None else (start, next_month(start))
    records = AuditRecord.objects.filter(at__gte=day_start(start), at__lt=day_start(end))
    if ctx.tenant is not None:
        records = records.filter(tenant=ctx.tenant)
    return dict(records.values_list("action").annotate(n=Count("id")).order_by("-n", "action"))


def _people(ctx: ReviewContext) -> tuple[dict, dict, list[str]]:
    """Who holds which role: {(tenant, role): [usernames]}, {platform role: [usernames]}, the tenants in scope."""
    members = Membership.objects.values_list("tenant__name", "role", "user__username").order_by(
        "tenant__name", "role", "user__username")
    if ctx.tenant is not None:
        members = members.filter(tenant=ctx.tenant)
    people: dict[tuple[str, str], list[str]] = defaultdict(list)
    for tenant_name, role, username in members:
        people[(tenant_name, role)].append(username)
    platform: dict[str, list[str]] = defaultdict(list)
    for role, username in PlatformRole.objects.values_list("role", "user__username").order_by("role",
                                                                                            "user__username"):
        platform[role].append(username)
    names = ([ctx.tenant.name] if ctx.tenant is not None
             else list(Tenant.objects.order_by("name").values_list("name", flat=True)))
    return people, platform, names


def _role_tables(ctx: ReviewContext, people: dict, platform: dict, names: list[str]) -> list[Table]:
    rows = [[tenant_name, choice_label(Role, role), len(users)]
            for (tenant_name, role), users in sorted(people.items())]
    if ctx.platform:
        rows += [[_("platform"), choice_label(PlatformRole.Kind, role), len(users)]
                 for role, users in sorted(platform.items())]
    permissions = table("permissions", _("Permissions"), [_("Scope"), _("Role"), _("Members")], rows)
    duties = [[name, _("administers the tenant"), list_text(people.get((name, Role.TENANT_ADMIN.value), [])) or "—"]
              for name in names]
    duties += [[name, _("approves requests"), list_text(people[(name, Role.APPROVER.value)])]
               for name in names if people.get((name, Role.APPROVER.value))]
    if ctx.platform:  # a tenant's pack names that tenant's people only
        duties += [[_("platform"), choice_label(PlatformRole.Kind, role), list_text(platform.get(role, [])) or "—"]
                   for role in (PlatformRole.Kind.PLATFORM_ADMIN, PlatformRole.Kind.AUDITOR)]
    return [permissions, table("responsibilities", _("Responsibilities"), [_("Scope"), _("Responsibility"),
                                                                            _("Who")], duties)]


def governance(ctx: ReviewContext) -> Section:
    """Permissions, approvals, audit, cost attribution, responsibilities: are the rules really used?"""
    report = ctx.report
    counts = _audit_counts(ctx)
    counted_before = _audit_counts(ctx, ctx.previous_month) if ctx.previous else None  # None: no data then
    approvals = [counts.get(str(a), 0) for a in APPROVAL_ACTIONS]
    before = [counted_before.get(str(a), 0) for a in APPROVAL_ACTIONS] if counted_before is not None else [None] * 3
    people, platform, names = _people(ctx)
    audit_table = table("audit", _("Audit records of the month by action"), [_("Action"), _("Records")], [
        [choice_label(AuditAction, action), n] for action, n in counts.items()])
    cost_rows = (report.get("by_tenant") if ctx.platform else report.get("by_project")) or []
    total_cost, currency = report.get("cost") or 0, report.get("currency", "")
    cost = table("cost", _("Cost attribution (%(currency)s)") % {"currency": currency}, [
        _("Tenant") if ctx.platform else _("Project"), _("GPU-hours allocated"), _("Cost"), _("Share of cost (%)")], [
        [r["name"], r["gpu_hours_allocated"], r["cost"], share(r["cost"], total_cost)] for r in cost_rows])
    figures = [
        figure("approved", _("Requests approved"), approvals[0], "", before[0]),
        figure("denied", _("Requests denied"), approvals[1], "", before[1]),
        figure("expired", _("Requests expired"), approvals[2], "", before[2]),
        figure("audit_records", _("Audit records"), sum(counts.values()), "",
               sum(counted_before.values()) if counted_before is not None else None),
        figure("cost", _("Cost"), report.get("cost"), currency, ctx.previous.get("cost")),
    ]
    lines = _approval_lines(ctx, approvals) + _chain_lines(ctx)
    if cost_rows and total_cost:
        top = max(cost_rows, key=lambda r: r["cost"])
        lines.append(_("%(name)s carried %(share)s %% of the cost (%(cost)s %(currency)s of %(total)s).") % {
            "name": top["name"], "share": percent_text(top["cost"] / total_cost), "cost": whole(top["cost"]),
            "currency": currency, "total": whole(total_cost)})
    orphans = [name for name in names if not people.get((name, Role.TENANT_ADMIN.value))]
    if orphans:
        lines.append(_("No tenant admin for: %(tenants)s.") % {"tenants": list_text(orphans)})
    elif ctx.tenant is not None:  # a tenant's pack speaks of that tenant only
        admins = people[(ctx.tenant.name, Role.TENANT_ADMIN.value)]
        lines.append(ngettext("%(tenant)s's tenant admin: %(people)s.", "%(tenant)s's tenant admins: %(people)s.",
                              len(admins)) % {"tenant": ctx.tenant.name, "people": list_text(admins)})
    elif names:
        lines.append(_("Every tenant has a tenant admin."))
    charts = [chart("cost", _("Cost per tenant") if ctx.platform else _("Cost per project"), "bar",
                    _("Tenant") if ctx.platform else _("Project"), currency, [r["name"] for r in cost_rows],
                    [(_("cost"), [r["cost"] for r in cost_rows])])]
    return group("governance", _("Governance"), _("Are the rules really used, and who answers for what?"), lines,
                 figures, [*_role_tables(ctx, people, platform, names), audit_table, cost], charts)


def _approval_lines(ctx: ReviewContext, approvals: list[int]) -> list[str]:
    approved, denied, expired = approvals
    if not any(approvals):
        return [_("No request needed approval in %(month)s.") % {"month": ctx.month_text}]
    return [ngettext("%(a)s request approved, %(d)s denied and %(e)s expired in %(month)s (from the audit log).",
                     "%(a)s requests approved, %(d)s denied and %(e)s expired in %(month)s (from the audit log).",
                     approved) % {
        "a": whole(approved), "d": whole(denied), "e": whole(expired), "month": ctx.month_text}]


def _chain_lines(ctx: ReviewContext) -> list[str]:
    """Whether the whole audit chain verifies (one pass over it, as ``manage.py verify_audit`` makes) — in the
    platform pack only: the chain is the platform's, its problems name other tenants' records, and a tenant
    member downloading a pack should not make the server walk the whole log."""
    if not ctx.platform:
        return []
    chain = verify()
    if not chain.ok:
        return [_("The audit chain does not verify: %(problem)s.") % {"problem": chain.problem}]
    return [_("The audit chain verifies: %(n)s records, none altered or missing.") % {"n": whole(chain.checked)}]


# --- improvements ----------------------------------------------------------------------------------------


def _changes(ctx: ReviewContext) -> tuple[list[tuple], int]:
    """The month's changes to how work is run (the first ``MAX_CHANGES_LISTED``) and how many there were."""
    start, end = ctx.window
    records = AuditRecord.objects.filter(at__gte=day_start(start), at__lt=day_start(end), action__in=CHANGE_ACTIONS)
    if ctx.tenant is not None:
        records = records.filter(tenant=ctx.tenant)
    listed = list(records.order_by("at", "seq").values_list("at", "action", "object_repr", "actor_name", "reason")[
        :MAX_CHANGES_LISTED])
    return listed, (len(listed) if len(listed) < MAX_CHANGES_LISTED else records.count())


def improvements(ctx: ReviewContext) -> Section:
    """Recommendations, actions and whether their metric moved, the capacity plan, the month's changes to
    templates, rules and quotas: is the next expansion backed by data?"""
    advice = ctx.report.get("recommendations") or []
    actions = actions_for_review(ctx.month, ctx.tenant, report=ctx.report, now=ctx.now)
    plan = capacity_plan.with_advice(capacity_plan.plan(ctx.month, now=ctx.now), advice) if ctx.platform else None
    changes, change_count = _changes(ctx)
    recommendations = table("recommendations", _("Recommendations of the month so far (%(n)d of %(total)d days)") % {
        "n": ctx.days_elapsed, "total": ctx.days_in_month} if ctx.is_open else _("Recommendations of the month"), [
        _("GPU model"), _("Advice"), _("Evidence")], [
        [r["gpu_model"], choice_label(CapacityAction, r.get("action", "")), r.get("evidence", "")] for r in advice])
    follow_up = table("actions", _("Improvement actions"), [
        pgettext("improvement action", "Action"), _("Owner"), _("Due"), _("Status"), _("Baseline"), _("Now"),
        _("Target"), _("Follow-up")], [
        [a["title"], a["owner"] or "—", a["due_month"],
         a["status_text"] + (" " + _("(overdue)") if a.get("overdue") else ""), a["baseline"], a["current"],
         a["target"], a["moved_text"]] for a in actions])
    change_table = table("changes", _("Changes to templates, rules and quotas"), [
        _("Time"), _("Change"), _("Object"), pgettext("done by", "By"), _("Reason")], [
        [at.isoformat(timespec="minutes"), choice_label(AuditAction, action), what, who or "—", reason]
        for at, action, what, who, reason in changes])
    # Capacity advice is the platform's (a tenant's report has none): a tenant's pack says so instead of "No data".
    tables = [recommendations, _what_if_table(ctx, advice), follow_up] if ctx.platform else [follow_up]
    charts = []
    models = (plan or {}).get("models") or []
    if plan is not None:
        tables += _plan_tables(plan)
        charts.append(_plan_chart(plan))
    tables.append(change_table)
    judged = [a for a in actions if a.get("moved") is not None]
    figures = [
        *([figure("recommendations", _("Recommendations"), len(advice), "")] if ctx.platform else []),
        figure("actions", _("Improvement actions followed"), len(actions), ""),
        figure("actions_moved", _("Actions whose metric moved as expected"),  # None: no verdict to count
               sum(1 for a in judged if a["moved"]) if judged else None, ""),
        figure("changes", _("Changes to templates, rules and quotas"), change_count, ""),
    ]
    if plan is not None:
        figures.append(figure("add_gpus", _("GPUs to add (capacity plan)"),
                              sum(m.get("add_gpus") or 0 for m in models), ""))
    return group("improvements", _("Improvements"), _("What changes next month, and is the next expansion backed "
                                                      "by data?"),
                 _improvement_conclusions(ctx, advice, actions, plan, change_count), figures, tables, charts)


def _what_if_table(ctx: ReviewContext, advice: list[Advice]) -> Table:
    """The what-if the capacity advice cites (``metering.whatif``): per GPU model, the month replayed through the
    scheduler, its error against the real month, and what the advised addition does to production waits."""
    cited = {r.get("figures", {}).get("what_if") for r in advice} - {None}
    run = WhatIfRun.objects.filter(pk__in=cited, kind=WhatIfRun.Kind.SIZING).order_by("-pk").first() if cited else None
    result = (run.result or {}) if run else {}
    errors = result.get("baseline_error", {}).get("by_model", {})
    title = (_("The advice's what-if: %(month)s replayed through the scheduler (run #%(id)d)") % {
        "month": result.get("month", ctx.month_text), "id": run.pk} if run else _("The advice's what-if"))
    return table("what_if", title, [
        _("GPU model"), _("p95 wait of production jobs, replay (h)"), _("p95 wait, real month (h)"),
        _("Replay error, all jobs' p95 (h)"), _("GPUs to add"), _("p95 wait after (h)")], [
        [model, hours(m.get("p95_wait_seconds")), hours(m.get("actual_p95_wait_seconds")),
         hours((errors.get(model) or {}).get("p95_wait_seconds", {}).get("error")), m.get("add_gpus"),
         hours(m.get("p95_wait_seconds_after"))] for model, m in (result.get("models") or {}).items()])


def _improvement_conclusions(ctx: ReviewContext, advice: list[Advice], actions: list[ActionRow],
                             plan: CapacityPlan | None, change_count: int) -> list[str]:
    models = (plan or {}).get("models") or []
    lines = [] if ctx.platform else [_("Capacity advice is made for the whole platform, in its report and pack; "
                                       "this pack follows the tenant's own improvement actions.")]
    planned = [a for a in actions if a["month_from"] == ctx.month_text]
    if planned:
        lines.append(ngettext("%(n)d action was planned from %(month)s's recommendations.",
                              "%(n)d actions were planned from %(month)s's recommendations.", len(planned)) % {
            "n": len(planned), "month": ctx.month_text})
    judged = [a for a in actions if a.get("moved") is not None]  # no verdict on an open or baseline month
    if judged:
        lines.append(ngettext("%(moved)d of %(n)d action moved its metric as expected.",
                              "%(moved)d of %(n)d actions moved their metric as expected.", len(judged)) % {
            "moved": sum(1 for a in judged if a["moved"]), "n": len(judged)})
    waiting = len(actions) - len(judged) - len(planned)  # a planned action starts from this month: no verdict due
    if waiting:
        lines.append(ngettext("%(n)d action is followed without a verdict yet (its table row says why).",
                              "%(n)d actions are followed without a verdict yet (their table rows say why).",
                              waiting) % {"n": waiting})
    if actions:
        overdue = sum(1 for a in actions if a.get("overdue"))
        if overdue:
            lines.append(ngettext("%(n)d action is overdue.", "%(n)d actions are overdue.", overdue) % {"n": overdue})
    else:
        lines.append(_("No improvement action follows this month's or earlier months' recommendations."))
    if plan and plan.get("note"):
        lines.append(plan["note"])
    for entry in models:
        if entry.get("add_gpus"):
            lines.append(_("Add %(n)s %(model)s GPUs before %(when)s: %(why)s") % {
                "n": whole(entry["add_gpus"]), "model": entry["gpu_model"], "when": entry.get("add_by") or "—",
                "why": entry.get("why", "")})
        if entry.get("beside_advice"):
            lines.append(entry["beside_advice"])
    if ctx.is_open and advice:  # hours of a new month are no ground for buying or lending: said, not concluded
        lines.append(_("The advice of %(month)s so far rests on %(n)d of %(total)d days; it is final only once the "
                       "month closes.") % {"month": ctx.month_text, "n": ctx.days_elapsed, "total": ctx.days_in_month})
    else:
        lines += [r.get("evidence", "") for r in advice
                  if r.get("action") in (CapacityAction.ADD, CapacityAction.SPREAD, CapacityAction.LEND_OR_MOVE)]
    lines.append(ngettext("%(n)d change to templates, rules and quotas was made in %(month)s.",
                          "%(n)d changes to templates, rules and quotas were made in %(month)s.", change_count) % {
        "n": change_count, "month": ctx.month_text})
    return lines


def _plan_tables(plan: CapacityPlan) -> list[Table]:
    """The plan's figures (forecast per month as numbers) and, apart, the reasoning in words, so neither table
    is too wide for a page."""
    models = plan.get("models") or []
    horizon = [f["month"] for f in (models[0]["forecast"] if models else [])]
    columns = [_("GPU model"), _("GPUs now"), _("Trend (GPUs per month)")] + [
        _("Forecast %(month)s (GPUs)") % {"month": m} for m in horizon] + [
        _("Add GPUs"), _("Add by"), _("Forecast error (mean, GPUs)")]
    rows = [[m["gpu_model"], m["capacity_gpus"], m.get("trend_per_month")] + [f["demand_gpus"] for f in m["forecast"]]
            + [m.get("add_gpus") or 0, m.get("add_by") or "—", (m.get("error") or {}).get("mae_gpus")]
            for m in models]
    why = [[m["gpu_model"], m.get("method_text", ""), m.get("why", "")] for m in models]
    return [table("capacity_plan", _("Capacity plan"), columns, rows),
            table("capacity_plan_why", _("Capacity plan: method and reasons"), [_("GPU model"), _("Method"), _("Why")],
                  why)]


def _plan_chart(plan: CapacityPlan) -> Chart | None:
    models = plan.get("models") or []
    past = list(plan.get("months") or [])
    future = sorted({f["month"] for m in models for f in m["forecast"]} - set(past))
    months = past + future
    series = []
    for m in models:
        demand = {h["month"]: h.get("demand_p95_gpus") for h in m.get("history") or []}
        forecast = {f["month"]: f["demand_gpus"] for f in m["forecast"]}
        if demand and past:  # the forecast line starts where the history ends, so the two join
            forecast.setdefault(past[-1], demand.get(past[-1]))
        series.append((_("%(model)s demand (p95)") % {"model": m["gpu_model"]}, [demand.get(x) for x in months]))
        series.append((_("%(model)s forecast") % {"model": m["gpu_model"]}, [forecast.get(x) for x in months]))
    return chart("capacity_plan", _("Demand per month and forecast per GPU model"), "line", _("Month"), _("GPUs"),
                 months, series)


# --- appendix --------------------------------------------------------------------------------------------


def acceptance(ctx: ReviewContext) -> Section:
    """The acceptance checklist as of the pack's making: one row per area with its status and evidence. It is
    read live, not per month (a go-live review signs the platform as it is), and says so."""
    rows = checklist(now=ctx.now)
    present = [r for r in rows if r.status == Status.PRESENT]
    missing = [r.area_label for r in rows if r.status != Status.PRESENT]
    lines = [_("%(n)d of %(total)d areas have their evidence.") % {"n": len(present), "total": len(rows)},
             _("The checklist is read live, as of %(moment)s: its evidence covers all the data so far, not only "
               "%(month)s.") % {"moment": f"{timezone.localtime(ctx.now):%Y-%m-%d %H:%M}",
                                "month": ctx.month_text}]
    if missing:
        lines.append(_("Missing or needing attention: %(areas)s.") % {"areas": list_text(map(str, missing))})
    checklist_table = table("acceptance", _("Acceptance checklist"), [
        _("Area"), _("Capability"), _("Status"), _("Why"), _("Evidence"), _("Notes")], [
        [r.area_label, r.capability, r.status_text or r.status, r.why,
         list_text((e.text for e in r.evidence), clauses=True),
         list_text((n.summary for n in r.notes), clauses=True)] for r in rows])
    return group("acceptance", _("Acceptance checklist"), _("Is the platform ready to go live or to grow?"), lines,
                 [figure("areas_present", _("Areas with evidence"), len(present), "")],
                 [checklist_table], [])
