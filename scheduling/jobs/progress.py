"""What a running program reports about itself: progress, checkpoints, artifacts (``POST /api/jobs/{id}/report/``).

The program authenticates with its job token (``GPUPORTAL_JOB_TOKEN`` in its environment); the token
works for that job's current attempt only and stops working when the job ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from gpuportal.web.validation import Refusals, keyed, parse_whole_number, refuse
from scheduling.models import FailureCategory, Job, JobArtifact, JobCheckpoint

#: What one report may carry: its artifacts, and the texts as long as the columns that keep them (the API's
#: serializer, and so the schema, reads these).
MAX_ARTIFACTS_PER_REPORT = 50
MAX_MESSAGE = Job._meta.get_field("progress_message").max_length
MAX_CHECKPOINT_PATH = JobCheckpoint._meta.get_field("path").max_length
MAX_ARTIFACT_NAME = JobArtifact._meta.get_field("name").max_length
MAX_ARTIFACT_URI = JobArtifact._meta.get_field("uri").max_length
#: The largest step, total or size a report may give (the columns' bigint).
MAX_COUNT = 2 ** 63 - 1


def _count(data, name, label) -> int | None:
    """An optional whole number of at least 0."""
    if data.get(name) in (None, ""):
        return None
    return keyed(name, parse_whole_number, data.get(name), 0, MAX_COUNT, label)


def _steps(step: int, total: int) -> None:
    if step > total:
        refuse("step", _("step (%(s)d) is beyond total (%(t)d).") % {"s": step, "t": total})


def _message(data) -> str:
    message = str(data.get("message", "") or "")
    if len(message) > MAX_MESSAGE:
        refuse("message", _("message: at most %(max)d characters.") % {"max": MAX_MESSAGE})
    return message


def _checkpoint_path(checkpoint) -> str:
    if not isinstance(checkpoint, dict) or not str(checkpoint.get("path", "")).strip():
        refuse("checkpoint", _("checkpoint needs a path (and may give size_bytes and step)."))
    if len(str(checkpoint["path"])) > MAX_CHECKPOINT_PATH:
        refuse("checkpoint", _("checkpoint path: at most %(max)d characters.") % {"max": MAX_CHECKPOINT_PATH})
    return str(checkpoint["path"])


def _artifacts(artifacts) -> None:
    if not isinstance(artifacts, list) or len(artifacts) > MAX_ARTIFACTS_PER_REPORT or not all(
            isinstance(a, dict) and str(a.get("name", "")).strip() and str(a.get("uri", "")).strip()
            for a in artifacts):
        refuse("artifacts", _("artifacts: a list of at most %(n)d items, each with a name and a uri.") % {
            "n": MAX_ARTIFACTS_PER_REPORT})


def record_report(job: Job, data: dict) -> Job:
    """Store a report; refusals are keyed by field and nothing is stored when one is wrong."""
    refusals = Refusals()
    step = refusals.attempt(_count, data, "step", _("step"))
    total = refusals.attempt(_count, data, "total", _("total"))
    if step is not None and total is not None:
        refusals.attempt(_steps, step, total)
    message = refusals.attempt(_message, data)
    checkpoint = data.get("checkpoint") or None
    if checkpoint is not None and refusals.attempt(_checkpoint_path, checkpoint):
        for key in ("size_bytes", "step"):
            refusals.attempt(_count, checkpoint, key, f"checkpoint {key}")
    artifacts = data.get("artifacts") or []
    refusals.attempt(_artifacts, artifacts)
    refusals.raise_any()
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
            JobArtifact.objects.update_or_create(
                job=job, name=str(artifact["name"]).strip()[:MAX_ARTIFACT_NAME], defaults={
                    "uri": str(artifact["uri"]).strip()[:MAX_ARTIFACT_URI], "size_bytes": artifact.get("size_bytes"),
                    "at": now})
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
