"""Reads for the request pages: the impact preview as the reader may see it.

The preview (``impact.what_if``) is plain JSON stored with the request: job ids of the request's own
tenant, only tenant, size and reason for other tenants' jobs. The page links each job the reader may see,
with its name, owner and size, and shows times in the reader's time zone; codes become labels."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext_lazy as _

from scheduling.models import Job, WaitReason, label_of

#: The engine's preemption rules (``scheduling.engine``), as the page names them.
PREEMPTION_RULES = {
    "reclaim within guarantee": _("reclaims capacity within its tenant's guarantee"),
    "higher priority class": _("a higher priority class"),
}


@dataclass(frozen=True)
class ImpactEntry:
    """One job named by the preview. ``job`` is None for a job the reader may not see (another tenant's)."""

    job: Job | None
    tenant: str
    size: str
    why: str
    before: datetime | str | None = None  # a time, "now", or None when unknown
    after: datetime | str | None = None


def _moment(value) -> datetime | str | None:
    if not value or value == "now":
        return value or None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def _why(entry: dict) -> str:
    if entry.get("rule"):
        return str(PREEMPTION_RULES.get(entry["rule"], entry["rule"]))
    reason = entry.get("reason", "")
    return "" if reason == "admitted" else label_of(WaitReason, reason)


def impact_sections(impact: dict, user) -> dict[str, list[ImpactEntry]]:
    """``preempts``, ``delays`` and ``starts`` of a stored preview, each job resolved for ``user``."""
    named = {entry.get("job") for key in ("preempts", "delays", "starts") for entry in impact.get(key, ())}
    jobs = Job.objects.visible_to(user).filter(pk__in=[pk for pk in named if isinstance(pk, int)]).select_related(
        "owner")
    by_id = {job.pk: job for job in jobs}
    return {key: [ImpactEntry(job=by_id.get(entry.get("job")), tenant=entry.get("tenant", ""),
                              size=entry.get("size", ""), why=_why(entry), before=_moment(entry.get("before")),
                              after=_moment(entry.get("after")))
                  for entry in impact.get(key, ())]
            for key in ("preempts", "delays", "starts")}
