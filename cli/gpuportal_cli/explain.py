"""A job's state in sentences: why it waits (reason, queue positions, when it should start and end), how it
runs, why it failed (category, advice, evidence) or how it ended. Built only from the job's API JSON."""

from __future__ import annotations

from datetime import timedelta

from . import render
from .i18n import gettext_ as _

WAITING = ("pending", "queued")
STARTING = ("admitted", "dispatching")


def _last_event(job: dict) -> dict | None:
    events = job.get("events") or []
    return events[-1] if events else None


def _end_by(start_text: str | None, job: dict) -> str | None:
    """When the job ends at the latest if it starts at ``start_text``: its max runtime stops it."""
    start = render.parse_time(start_text)
    if start is None or not job.get("max_runtime_minutes"):
        return None
    return (start + timedelta(minutes=job["max_runtime_minutes"])).isoformat()


def _waiting(job: dict) -> list[str]:
    reason = job.get("wait_reason")
    lines = [_("Why it waits: %(message)s [%(code)s]") % {"message": reason["message"], "code": reason["code"]}
             if reason else _("Why it waits: not decided yet; the next scheduling pass gives the reason.")]
    if job.get("queue_position"):
        lines.append(_("Queue position: %(cluster)s in the cluster, %(tenant_position)s in tenant %(tenant)s.") % {
            "cluster": job["queue_position"], "tenant_position": render.cell(job.get("tenant_queue_position")),
            "tenant": job.get("tenant")})
    if job.get("earliest_start") and job.get("latest_start"):
        lines.append(_("Likely start: between %(early)s and %(late)s (estimate %(start)s).") % {
            "early": render.when(job["earliest_start"]), "late": render.when(job["latest_start"]),
            "start": render.when(job["estimated_start"])})
    if job.get("estimated_start"):
        lines.append(_("Estimated start: about %(start)s; it ends by %(end)s at the latest (max runtime %(max)s "
                       "min).") % {"start": render.when(job["estimated_start"]),
                                   "end": render.when(_end_by(job["estimated_start"], job)),
                                   "max": job.get("max_runtime_minutes")})
    else:
        lines.append(_("Estimated start: not known yet."))
    return lines


def _dependencies(job: dict) -> list[str]:
    """The jobs it waits for, each with its condition and whether it is met."""
    found = job.get("depends_on") or []
    if not found:
        return []
    return [_("Waits for: %(jobs)s.") % {"jobs": ", ".join(
        (_("#%(job)s %(condition)s (met)") if d.get("satisfied") else _("#%(job)s %(condition)s (not yet met)"))
        % {"job": d.get("job"), "condition": d.get("condition")} for d in found)}]


def _failure(job: dict) -> list[str]:
    failure = job.get("failure") or {}
    lines = [_("Why it failed: %(message)s [%(category)s]") % {
        "message": failure.get("message") or render.EMPTY, "category": failure.get("category") or render.EMPTY}]
    if job.get("exit_code") is not None:
        lines.append(_("Exit code: %(code)s") % {"code": job["exit_code"]})
    if failure.get("node"):
        lines.append(_("Node: %(node)s") % {"node": failure["node"]})
    if failure.get("advice"):
        lines.append(_("What to do: %(advice)s") % {"advice": failure["advice"]})
    evidence = failure.get("evidence") or {}
    if evidence:
        lines.append(_("Evidence:"))
        for key, value in evidence.items():
            if isinstance(value, list):
                lines.append(f"  {key}:")
                lines += [f"    {item}" for item in value]
            else:
                lines.append(f"  {key}: {render.cell(value)}")
    return lines


def explain(job: dict) -> str:
    """``gpuportal why``: the one answer to "what is my job doing and why"."""
    status = job.get("status", "")
    lines = [_("Job %(id)s (%(name)s, %(size)s, tenant %(tenant)s) is %(status)s.") % {
        "id": job.get("id"), "name": job.get("name"), "size": render.size(job), "tenant": job.get("tenant"),
        "status": status}]
    if status in WAITING:
        lines += _waiting(job) + _dependencies(job)
    elif status in STARTING:
        lines.append(_("Admitted %(at)s on %(where)s; it is being started on the cluster.") % {
            "at": render.when(job.get("admitted_at")), "where": render.placement(job)})
    elif status == "running":
        lines.append(_("Running since %(start)s on %(where)s; its max runtime stops it by %(end)s.") % {
            "start": render.when(job.get("started_at")), "where": render.placement(job),
            "end": render.when(_end_by(job.get("started_at"), job))})
    elif status == "failed" or job.get("failure"):
        lines += _failure(job)
    elif status == "succeeded":
        lines.append(_("Finished %(at)s.") % {"at": render.when(job.get("finished_at"))})
    last = _last_event(job)
    if last and status not in WAITING:
        lines.append(_("Last event: %(at)s %(kind)s%(actor)s: %(reason)s") % {
            "at": render.when(last.get("at")), "kind": last.get("kind"),
            "actor": _(" by %(actor)s") % {"actor": last["actor"]} if last.get("actor") else "",
            "reason": last.get("reason") or render.EMPTY})
    return "\n".join(lines)


def details(job: dict) -> str:
    """``gpuportal show``: every field worth reading, the explanation, then the timeline."""
    fields = [(_("Project"), f"{job.get('tenant')}/{job.get('project')}"), (_("Owner"), job.get("owner")),
              (_("Task type"), _("%(type)s (priority %(priority)s)") % {"type": job.get("task_type"),
                                                                      "priority": job.get("priority")}),
              (_("Size"), render.size(job)), (_("Topology"), job.get("topology")),
              (_("CPUs / memory per node"), _("%(cpus)s / %(memory)s GB") % {
                  "cpus": job.get("cpus_per_node"), "memory": job.get("memory_gb_per_node")}),
              (_("Image"), job.get("image")), (_("Command"), job.get("command")),
              (_("Max runtime"), _("%(m)s min") % {"m": job.get("max_runtime_minutes")}),
              (_("Placement"), render.placement(job)), (_("Retries"), job.get("retry_count")),
              (_("Ports"), ", ".join(f"{p['name']}:{p['port']}" for p in job.get("ports") or [])),
              (_("Submitted"), render.when(job.get("submitted_at"))),
              (_("Started"), render.when(job.get("started_at"))),
              (_("Finished"), render.when(job.get("finished_at")))]
    width = max(len(label) for label, _value in fields)
    lines = [explain(job), ""] + [f"{label.ljust(width)}  {render.cell(value)}" for label, value in fields]
    events = job.get("events") or []
    if events:
        lines += ["", _("Timeline:"), render.table(
            [_("AT"), _("EVENT"), _("STATUS"), _("BY"), _("REASON")],
            [[render.when(e.get("at"), relative=False), e.get("kind"),
              f"{e.get('from_status') or ''}->{e['to_status']}" if e.get("to_status") not in (None, "",
                                                                                  e.get("from_status")) else "",
              e.get("actor"), e.get("reason")] for e in events])]
    return "\n".join(lines)
