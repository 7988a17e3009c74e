"""A frozen month's review pack, rendered once and served from the stored bytes.

Building and rendering a pack takes seconds; a frozen month's report does not change, so its pack is rendered
on the first download in each language, format and reader's time zone (the pack names the moment its live
parts were read, in the reader's zone) and kept (``StoredReviewPack``). The key is the digest of
what the pack rests on: the current snapshot's figures and the previous month's snapshot it is compared with.
Regenerating either changes the digest, so the next download renders anew; the superseded rendering stays
with its superseded snapshot. A month without a frozen snapshot (open, or closed but not frozen yet) is built
for every download, as its figures still move.

The stored pack is the document as first rendered: its live parts (improvement actions, the checklist) say
the moment they were read, as they always did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import date, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from gpuportal.text.dates import month_start
from metering.models import MonthlyReport, StoredReviewPack
from metering.reports import monthly as reports
from metering.review.document import build_review
from metering.review.render import formats as review_formats
from tenants.models import Tenant


@dataclass(frozen=True)
class PackFile:
    """A review pack ready to send: its bytes, file name and content type, and whether it was stored."""

    content: bytes
    filename: str
    content_type: str
    stored: bool


def digest(snapshot: MonthlyReport, previous: MonthlyReport | None) -> str:
    """The digest of what a frozen month's pack rests on (the figures, not when they were stored)."""
    material = json.dumps({"data": snapshot.data, "previous": previous.data if previous else None},
                          sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(material.encode()).hexdigest()


def pack_file(month: date, tenant: Tenant | None, fmt: str, language: str) -> PackFile:
    """The pack of ``month`` for ``tenant`` as ``fmt`` in ``language``: the stored rendering of a frozen month
    (made now if this is its first download), else a fresh one. ``fmt`` is a key of ``formats.FORMATS``."""
    month = month_start(month)
    content_type = review_formats.FORMATS[fmt].content_type
    snapshot = reports.current_snapshot(month, tenant) if reports.is_closed(month) else None
    if snapshot is None:
        review = build_review(month, tenant, language=language)
        return PackFile(review_formats.render(review, fmt), review_formats.filename(review, fmt), content_type, False)
    key = digest(snapshot, reports.current_snapshot(month_start(month - timedelta(days=1)), tenant))
    zone = timezone.get_current_timezone_name()
    found = StoredReviewPack.objects.filter(snapshot=snapshot, digest=key, language=language, fmt=fmt,
                                            time_zone=zone).first()
    if found is None:
        found = _render_and_store(snapshot, key, month, tenant, fmt, language, zone)
    return PackFile(bytes(found.content), found.filename, content_type, True)


def _render_and_store(snapshot: MonthlyReport, key: str, month: date, tenant: Tenant | None, fmt: str,
                      language: str, zone: str) -> StoredReviewPack:
    """Render and keep (dropping this snapshot's renderings of an older digest: the previous month was
    regenerated since); when two first downloads race, the one stored first is what both serve."""
    review = build_review(month, tenant, language=language)
    try:
        with transaction.atomic():
            StoredReviewPack.objects.filter(snapshot=snapshot, language=language, fmt=fmt, time_zone=zone).exclude(
                digest=key).delete()
            return StoredReviewPack.objects.create(
                snapshot=snapshot, digest=key, language=language, fmt=fmt, time_zone=zone, rendered_at=timezone.now(),
                filename=review_formats.filename(review, fmt), content=review_formats.render(review, fmt))
    except IntegrityError:
        return StoredReviewPack.objects.get(snapshot=snapshot, digest=key, language=language, fmt=fmt, time_zone=zone)
