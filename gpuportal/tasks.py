"""Housekeeping of the project app's own tables."""

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from gpuportal.models import IdempotencyRecord


@shared_task
def prune_idempotency_records() -> int:
    """Forget Idempotency-Keys older than IDEMPOTENCY_TTL_HOURS."""
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_TTL_HOURS)
    return IdempotencyRecord.objects.filter(created__lt=cutoff).delete()[0]
