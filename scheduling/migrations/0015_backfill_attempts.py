"""Each existing job's attempts, read back from its timeline: an admission opens one, entering ``running``
starts it, leaving the statuses that hold GPUs ends it (how, by the status it went to; the kept log lines from
the failure's diagnosis). A job that waits in the queue again has no current run: its admission and start times
are cleared, as a requeue now does, so the page does not show its last attempt's times as the current ones.
Reversing it leaves the rows and times as they are (the schema migration before it drops the table)."""

from django.db import migrations

ACTIVE = ("admitted", "dispatching", "running")
WAITING = ("pending", "queued")
OUTCOME = {"succeeded": "succeeded", "failed": "failed", "queued": "retried", "preempted": "preempted",
           "cancelled": "cancelled"}


def attempts_of(events, job_id, Attempt):
    attempts, current = [], None
    for event in events:
        if event.kind != "status":
            continue
        if event.to_status == "admitted":
            current = Attempt(job_id=job_id, number=len(attempts) + 1, admitted_at=event.at)
            attempts.append(current)
        elif current is not None and event.to_status == "running":
            current.started_at = event.at
        elif current is not None and event.from_status in ACTIVE and event.to_status not in ACTIVE:
            data = event.data or {}
            current.ended_at, current.end_event_id = event.at, event.pk
            current.outcome = OUTCOME.get(event.to_status, "")
            current.failure_category = ("preempted" if event.to_status == "preempted"
                                        else str(data.get("category") or "")[:20])
            current.log_tail = list((data.get("evidence") or {}).get("log_tail") or [])
            current = None
    return attempts


def backfill(apps, schema_editor):
    Job, JobEvent, Attempt = (apps.get_model("scheduling", name) for name in ("Job", "JobEvent", "JobAttempt"))
    admitted = Job.objects.filter(events__to_status="admitted").values_list("pk", flat=True).distinct()
    ids = sorted(set(admitted))
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        by_job = {}
        for event in JobEvent.objects.filter(job_id__in=chunk).order_by("job_id", "at", "id"):
            by_job.setdefault(event.job_id, []).append(event)
        Attempt.objects.bulk_create([a for job_id, events in by_job.items()
                                     for a in attempts_of(events, job_id, Attempt)], batch_size=2000)
    Job.objects.filter(status__in=WAITING).exclude(admitted_at=None, started_at=None).update(admitted_at=None,
                                                                                             started_at=None)


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0014_job_attempts"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
