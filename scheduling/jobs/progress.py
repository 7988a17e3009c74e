"""What a running program reports about itself: progress, checkpoints, artifacts (``POST /api/jobs/{id}/report/``).

The program authenticates with its job token (``GPUPORTAL_JOB_TOKEN`` in its environment); the token
works for that job's current attempt only and stops working when the job ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from gpuportal.validation import whole_number
from scheduling.models import FailureCategory, Job, JobArtifact, JobCheckpoint

MAX_ARTIFACTS_PER_REPORT = 50


def _count(data, name, errors, label):
    """An optional whole number of at least 0."""
    if data.get(name) in (None, ""):
        return None
    return whole_number(errors, data, name, 0, 2 ** 63 - 1, label)


def record_report(job: Job, data: dict) -> Job:
    """Store a report; errors are keyed by field and nothing is stored when one is wrong."""
    errors: dict[str, str] = {}
    step, total = _count(data, "step", errors, _("step")), _count(data, "total", errors, _("total"))
    if step is not None and total is not None and step > total:
        errors["step"] = _("step (%(s)d) is beyond total (%(t)d).") % {"s": step, "t": total}
    message = str(data.get("message", "") or "")
    if len(message) > 500:
        errors["message"] = _("message: at most 500 characters.")
    checkpoint = data.get("checkpoint") or None
    if checkpoint is not None:
        if not isinstance(checkpoint, dict) or not str(checkpoint.get("path", "")).strip():
            errors["checkpoint"] = _("checkpoint needs a path (and may give size_bytes and step).")
        elif len(str(checkpoint["path"])) > 1000:
            errors["checkpoint"] = _("checkpoint path: at most 1000 characters.")
        else:
            for key in ("size_bytes", "step"):
                _count(checkpoint, key, errors, f"checkpoint {key}")
    artifacts = data.get("artifacts") or []
    if not isinstance(artifacts, list) or len(artifacts) > MAX_ARTIFACTS_PER_REPORT or not all(
            isinstance(a, dict) and str(a.get("name", "")).strip() and str(a.get("uri", "")).strip()
            for a in artifacts):
        errors["artifacts"] = _("artifacts: a list of at most %(n)d items, each with a name and a uri.") % {
            "n": MAX_ARTIFACTS_PER_REPORT}
    if errors:
        raise ValidationError(errors)
    now = timezone.now()
    with transaction.atomic():
        fields = {"progress_at": now}
        if step is not None:
            fields["progress_step"] = step
        if total is not None:
            fields["progress_total"] = total
        if "message" in data:
            fields["progress_message"] = message
        Job.objects.filter(pk=job.pk).update(**fields)
        if checkpoint is not None:
            JobCheckpoint.objects.create(job=job, path=str(checkpoint["path"]).strip(),
                                         size_bytes=checkpoint.get("size_bytes"),
                                         step=checkpoint.get("step", step), at=now)
        for artifact in artifacts:
            JobArtifact.objects.update_or_create(job=job, name=str(artifact["name"]).strip()[:200], defaults={
                "uri": str(artifact["uri"]).strip()[:1000], "size_bytes": artifact.get("size_bytes"), "at": now})
    job.refresh_from_db()
    return job


def estimated_finish(job: Job, now: datetime | None = None) -> datetime | None:
    """Linear from the start of the run: steps done so far over the time they took."""
    now = now or timezone.now()
    if not (job.progress_step and job.progress_total and job.started_at) or job.is_terminal:
        return None
    elapsed = ((job.progress_at or now) - job.started_at).total_seconds()
    if elapsed <= 0:
        return None
    remaining = (job.progress_total - job.progress_step) * elapsed / job.progress_step
    return (job.progress_at or now) + timedelta(seconds=remaining)


@dataclass(frozen=True)
class RunDeadline:
    """When a run must end by its max runtime, and whether that is what ended it."""

    ends_at: datetime
    limit_minutes: int
    stopped_by_limit: bool


def run_deadline(job: Job) -> RunDeadline | None:
    """The end the max runtime sets for the current (or last) run; None before it started."""
    if not job.started_at or job.max_runtime_minutes is None:
        return None  # not started, or no max runtime (a service runs until stopped)
    ends_at = job.started_at + timedelta(minutes=job.max_runtime_minutes)
    return RunDeadline(ends_at, job.max_runtime_minutes, job.failure_category == FailureCategory.TIMEOUT)
