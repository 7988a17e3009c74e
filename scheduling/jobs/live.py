"""What the job page's refresh in place compares (``static/js/live.js``): a version of everything the page's live
regions show, so that a poll where nothing changed is answered 204 without drawing the page."""

from __future__ import annotations

import hashlib

from scheduling.executors import LiveState
from scheduling.jobs.queries import Timeline
from scheduling.models import Job


def page_version(job: Job, timeline: Timeline, live: LiveState | None = None) -> str:
    """Changes when the job's state, attempt, progress, queue place or estimate, GPUs or timeline do (every status
    change and new wait reason is an event, ``timeline.version``), or what a running notebook or service replica
    shows (``live``: ready, restarts, its problem, the last activity); read from what the page loads anyway."""
    shown = (timeline.version, job.status, job.retry_count, job.progress_step, job.progress_total,
             job.progress_message, job.failure_category, job.exit_code, job.held_by, job.queue_position,
             job.tenant_queue_position, job.estimated_start, job.earliest_start, job.latest_start,
             job.started_at, job.finished_at, tuple(gpu.pk for gpu in job.held_gpus()),
             (live.ready, live.restarts, live.problem, live.last_activity) if live else None)
    return hashlib.sha256(repr(shown).encode()).hexdigest()[:16]
