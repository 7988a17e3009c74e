"""Governance in the demo: a request waiting for carol, and an approved reservation on the calendar."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from governance import services
from scheduling.models import Job


def seed_governance(users: dict) -> dict:
    job = Job.objects.filter(owner=users["alice"], status="queued").order_by("pk").first()
    pending = None
    if job is not None:
        pending = services.submit_request(users["alice"], {
            "kind": "runtime_extension", "job": job.pk, "max_runtime_minutes": job.max_runtime_minutes * 3,
            "justification": "The full 90-epoch schedule needs three times the default runtime."})
    start = (timezone.localtime() + timedelta(days=2)).replace(hour=9, minute=0, second=0, microsecond=0)
    reservation = services.submit_request(users["erin"], {
        "kind": "reservation", "tenant": "speech", "gpu_model": "L40S", "gpus": 8, "start": start.isoformat(),
        "end": (start + timedelta(hours=8)).isoformat(),
        "justification": "Live demo of the ASR system to the funding agency."})
    services.decide(users["admin"], reservation, True, "Approved: the L40S pool is mostly idle that day.")
    return {"pending_request": pending.pk if pending else None, "reservation_request": reservation.pk}
