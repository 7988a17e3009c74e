"""Reads for the request pages: the impact preview as the reader may see it.

The preview (``impact.what_if``) is plain JSON stored with the request: job ids of the request's own
tenant, only tenant, size and reason for other tenants' jobs. The page links each job the reader may see,
with its name, owner and size, and shows times in the reader's time zone; codes become labels."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext

from governance.models import PriorityRequest, RequestKind
from scheduling.engine import render_reason
from scheduling.models import Job, WaitReason, label_of, rule_words


@dataclass(frozen=True)
class ImpactEntry:
    """One job named by the preview. ``job`` is None for a job the reader may not see (another tenant's)."""

    job: Job | None
    tenant: str
    size: str
    why: str
    before: datetime | str | None = None  # a time, "now", or None when unknown
    after: datetime | str | None = None
    by: int | None = None  # a delay: seconds later than before (None: unknown)
    when: str = ""  # a start: "now", or "after_preemption" (the pass right after it stops its victims)
    victims: int = 0  # a start after preemption: how many running jobs it stops


@dataclass(frozen=True)
class SubjectOutcome:
    """What the next pass does with the request's own job: ``starts`` is "now", "after_preemption" (after
    stopping ``victims``), "waits" (``why``, its positions, its likely start), or "running"."""

    starts: str
    victims: list[ImpactEntry]
    why: str = ""
    position: int | None = None
    tenant_position: int | None = None
    estimated_start: datetime | None = None
    earliest_start: datetime | None = None
    latest_start: datetime | None = None


@dataclass(frozen=True)
class SubjectPreview:
    """The request's job, as things are and if approved now."""

    job: Job | None
    before: SubjectOutcome | None
    after: SubjectOutcome | None


def _moment(value) -> datetime | str | None:
    if not value or value == "now":
        return value or None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def _why(entry: dict) -> str:
    if entry.get("rule"):
        return rule_words(entry["rule"])
    reason = entry.get("reason", "")
    return "" if reason == "admitted" else label_of(WaitReason, reason)


def _entry(entry: dict, by_id: dict) -> ImpactEntry:
    by = entry.get("by")
    return ImpactEntry(job=by_id.get(entry.get("job")), tenant=entry.get("tenant", ""), size=entry.get("size", ""),
                       why=_why(entry), before=_moment(entry.get("before")), after=_moment(entry.get("after")),
                       by=by if isinstance(by, int) else None, when=str(entry.get("when", "")),
                       victims=entry.get("victims", 0) if isinstance(entry.get("victims"), int) else 0)


def _outcome(outcome: dict | None, by_id: dict) -> SubjectOutcome | None:
    if not isinstance(outcome, dict) or not outcome.get("starts"):
        return None
    why = ""
    if outcome.get("code") in WaitReason.values:
        try:
            why = render_reason(outcome["code"], outcome.get("params") or {}, translate=gettext)
        except (KeyError, TypeError, ValueError):  # a preview stored before a reason's numbers changed
            why = label_of(WaitReason, outcome["code"])
    return SubjectOutcome(
        starts=str(outcome["starts"]), victims=[_entry(v, by_id) for v in outcome.get("victims", ())], why=why,
        position=outcome.get("position"), tenant_position=outcome.get("tenant_position"),
        estimated_start=_moment(outcome.get("estimated_start")), earliest_start=_moment(outcome.get("earliest_start")),
        latest_start=_moment(outcome.get("latest_start")))


def impact_sections(impact: dict, user) -> dict:
    """``preempts``, ``delays`` and ``starts`` of a stored preview, each job resolved for ``user``, and
    ``subject``: what happens to the request's own job (None for a request about no job)."""
    subject = impact.get("subject") if isinstance(impact.get("subject"), dict) else None
    named = {entry.get("job") for key in ("preempts", "delays", "starts") for entry in impact.get(key, ())}
    if subject:
        named |= {subject.get("job")} | {v.get("job") for side in ("before", "after")
                                         for v in (subject.get(side) or {}).get("victims", ())}
    jobs = Job.objects.visible_to(user).filter(pk__in=[pk for pk in named if isinstance(pk, int)]).select_related(
        "owner")
    by_id = {job.pk: job for job in jobs}
    sections: dict = {key: [_entry(entry, by_id) for entry in impact.get(key, ())]
                      for key in ("preempts", "delays", "starts")}
    sections["subject"] = SubjectPreview(
        job=by_id.get(subject.get("job")), before=_outcome(subject.get("before"), by_id),
        after=_outcome(subject.get("after"), by_id)) if subject else None
    return sections


def requests_about(job: Job) -> list[PriorityRequest]:
    """The requests about ``job``: its own, and the admission request of the array's tasks (a service's replicas)
    it was submitted with, which is made for the first of them and decides them all (``services.jobs_of``)."""
    found = list(job.requests.all())
    if job.group_id and not any(r.kind == RequestKind.ADMISSION for r in found):
        shared = (PriorityRequest.objects.filter(kind=RequestKind.ADMISSION, job__group_id=job.group_id,
                                                 job_id__lt=job.pk, jobs__gt=1).order_by("-job_id").first())
        if shared and Job.objects.filter(group_id=job.group_id, pk__gte=shared.job_id,
                                         pk__lte=job.pk).count() <= shared.jobs:
            found.append(shared)
    return found
