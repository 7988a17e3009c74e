"""``Idempotency-Key`` for API calls that create something (``POST /api/jobs/``, ``POST /api/priority-requests/``).

A client that did not get the answer (a timeout, a lost connection) sends the same request with the same key
again and gets the first answer back, marked ``Idempotent-Replayed: true``, instead of a duplicate. The
record is written in the same transaction as what the request creates, so either both exist or neither;
a second request with the key waits for the first to commit. The same key with a different body is refused
(422). Keys are remembered for ``IDEMPOTENCY_TTL_HOURS``; errors are not remembered (a retry re-validates).
"""

from __future__ import annotations

import functools
import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import status
from rest_framework.response import Response

from gpuportal.models import IdempotencyRecord

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = IdempotencyRecord._meta.get_field("key").max_length


def _fingerprint(request) -> str:
    try:
        body = json.dumps(request.data, sort_keys=True, default=str)
    except (TypeError, ValueError):
        body = repr(request.data)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def _bad_key(key: str) -> str:
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        return _("The %(header)s header must be 1 to %(max)d printable ASCII characters.") % {
            "header": HEADER, "max": MAX_KEY_LENGTH}
    return ""


def _claim(request, key: str, fingerprint: str) -> tuple[IdempotencyRecord, Response | None]:
    """The record for this key (made now, or the earlier one locked); an answer when it decides the request."""
    ttl = timedelta(hours=settings.IDEMPOTENCY_TTL_HOURS)
    IdempotencyRecord.objects.filter(user=request.user, key=key, path=request.path,
                                     created__lt=timezone.now() - ttl).delete()
    try:
        with transaction.atomic():
            return IdempotencyRecord.objects.create(user=request.user, key=key, path=request.path,
                                                    fingerprint=fingerprint), None
    except IntegrityError:
        record = IdempotencyRecord.objects.select_for_update().get(user=request.user, key=key, path=request.path)
    if record.fingerprint != fingerprint:
        return record, Response({HEADER: [_("This key was used for a different request; use a new key.")]},
                                status=status.HTTP_422_UNPROCESSABLE_ENTITY)
    return record, Response(record.body, status=record.status_code, headers={"Idempotent-Replayed": "true"})


def idempotent(view_method):
    """Wrap a DRF view method that creates something; without the header it runs as before."""

    @functools.wraps(view_method)
    def wrapper(view, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None or not request.user.is_authenticated:
            return view_method(view, request, *args, **kwargs)
        problem = _bad_key(key)
        if problem:
            return Response({HEADER: [problem]}, status=status.HTTP_400_BAD_REQUEST)
        with transaction.atomic():
            record, answer = _claim(request, key, _fingerprint(request))
            if answer is not None:
                return answer
            response = view_method(view, request, *args, **kwargs)
            if status.is_success(response.status_code):
                record.status_code, record.body = response.status_code, response.data
                record.save(update_fields=["status_code", "body"])
            else:  # not remembered: a retry is checked afresh
                record.delete()
        return response

    return wrapper
