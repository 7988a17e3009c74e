"""Writing and checking the audit chain. ``record()`` is the one way in.

The actor and the source address come from the request (``AuditContextMiddleware`` stores them for the
thread) unless the caller passes them; Celery tasks and the scheduler write as "the portal" (no actor).
Appends are serialised with a PostgreSQL advisory lock so the chain has one order.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from tenants.models import Tenant

from .models import AuditChainHead, AuditRecord

#: Key of the advisory lock that serialises appends ("GPUAUDIT").
AUDIT_LOCK_KEY = 0x4750554155444954
GENESIS = "0" * 64

_context: contextvars.ContextVar = contextvars.ContextVar("audit_context", default=(None, ""))


def set_context(user, address: str):
    return _context.set((user if user is not None and user.is_authenticated else None, address or ""))


def reset_context(token) -> None:
    _context.reset(token)


class AuditContextMiddleware:
    """Remembers who is asking, and from where, for records written while the request runs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[0].strip()
        token = set_context(getattr(request, "user", None), forwarded or request.META.get("REMOTE_ADDR", ""))
        try:
            return self.get_response(request)
        finally:
            reset_context(token)


class _Encoder(DjangoJSONEncoder):
    def default(self, o):
        if isinstance(o, Decimal):
            return str(o)
        return super().default(o)


def _plain(value):
    """JSON-safe and stable: what is hashed is exactly what is stored."""
    return None if value is None else json.loads(json.dumps(value, cls=_Encoder, sort_keys=True))


def content_hash(prev_hash: str, fields: dict) -> str:
    payload = json.dumps({**fields, "prev_hash": prev_hash}, sort_keys=True, separators=(",", ":"), cls=_Encoder)
    return hashlib.sha256(payload.encode()).hexdigest()


def _hashed_fields(record: AuditRecord) -> dict:
    return {"seq": record.seq, "at": record.at.isoformat(), "actor_id": record.actor_id,
            "actor_name": record.actor_name, "action": record.action, "object_type": record.object_type,
            "object_id": record.object_id, "object_repr": record.object_repr, "tenant_id": record.tenant_id,
            "before": record.before, "after": record.after, "reason": record.reason,
            "source_address": record.source_address}


def record(action: str, obj=None, *, before=None, after=None, reason: str = "", actor=None, tenant=None,
           object_type: str = "", object_id="", object_repr: str = "", address: str | None = None) -> AuditRecord:
    """Append one record. ``obj`` (a model instance) fills the object fields and, if it has one, the tenant."""
    context_actor, context_address = _context.get()
    actor = actor if actor is not None else context_actor
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id or str(obj.pk)
        object_repr = object_repr or str(obj)[:300]
        if tenant is None:
            tenant = obj if isinstance(obj, Tenant) else (obj.tenant if getattr(obj, "tenant_id", None) else None)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [AUDIT_LOCK_KEY])
        head, _created = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
        entry = AuditRecord(
            seq=head.last_seq + 1, at=timezone.now(), actor=actor,
            actor_name=actor.get_username() if actor is not None else "", action=action,
            object_type=object_type, object_id=str(object_id), object_repr=object_repr[:300],
            tenant=tenant, before=_plain(before), after=_plain(after), reason=reason or "",
            source_address=(address if address is not None else context_address)[:64],
            prev_hash=head.last_hash or GENESIS)
        entry.hash = content_hash(entry.prev_hash, _hashed_fields(entry))
        entry.save()
        head.last_seq, head.last_hash = entry.seq, entry.hash
        head.save(update_fields=["last_seq", "last_hash"])
    return entry


@dataclass
class Verification:
    ok: bool
    checked: int
    problem: str = ""
    bad_seq: int | None = None


def verify() -> Verification:
    """Walk the chain in order: every record's hash must match its content and link to the one before."""
    expected_prev, expected_seq, checked = GENESIS, 1, 0
    for entry in AuditRecord.objects.order_by("seq").iterator(chunk_size=2000):
        if entry.seq != expected_seq:
            return Verification(False, checked, f"record #{expected_seq} is missing (next is #{entry.seq})",
                                expected_seq)
        if entry.prev_hash != expected_prev:
            return Verification(False, checked, f"record #{entry.seq} does not link to the record before it",
                                entry.seq)
        if content_hash(entry.prev_hash, _hashed_fields(entry)) != entry.hash:
            return Verification(False, checked, f"record #{entry.seq} was altered (its hash does not match)",
                                entry.seq)
        expected_prev, expected_seq, checked = entry.hash, expected_seq + 1, checked + 1
    head = AuditChainHead.objects.filter(pk=1).first()
    last_seq = head.last_seq if head else 0
    if last_seq != checked or (head and head.last_hash and head.last_hash != expected_prev):
        return Verification(False, checked, f"the chain ends at #{checked} but #{last_seq} was written last",
                            checked + 1)
    return Verification(True, checked)
