"""Writing and checking the audit chain. ``record()`` is the one way in.

The actor and the source address come from the request (``AuditContextMiddleware`` stores them for the
thread) unless the caller passes them; Celery tasks and the scheduler write as "the portal" (no actor). The
actor is read when the record is written, not when the request arrives: an API request is authenticated by
DRF inside the view (a bearer token), after the middleware ran.
The source address is ``gpuportal.web.clients.client_address``: ``REMOTE_ADDR``, or what ``X-Forwarded-For`` says
only when the peer is one of the ``TRUSTED_PROXIES``.
Appends are serialised with a PostgreSQL advisory lock so the chain has one order.

Hashes are keyed (HMAC-SHA256 with ``settings.AUDIT["KEY"]``, which lives outside the database): the
database's owner can switch the triggers off and edit rows, but cannot compute the hashes that would hide
it. Records from before the chain was keyed (``key_version`` 0) are checked with the plain SHA-256 they
were written with; the head row says, under its own MAC, from which record on every record must be keyed,
how many records there are and when the last was written.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import hashlib
import hmac
import json
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from gpuportal.storage.db import bulk_insert_with_ids
from gpuportal.text.phrases import Phrase
from gpuportal.web.clients import client_address
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


def _signed_in(user):
    return user if user is not None and user.is_authenticated else None


class AuditContextMiddleware:
    """Remembers who is asking, and from where, for records written while the request runs.

    Who is asking is looked up when a record is written: DRF sets ``request.user`` only once the view has
    authenticated an API token, so a user read here would be anonymous for every API call."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _context.set((lambda: _signed_in(getattr(request, "user", None)), client_address(request.META)))
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


def _payload(prev_hash: str, fields: dict) -> bytes:
    return json.dumps({**fields, "prev_hash": prev_hash}, sort_keys=True, separators=(",", ":"),
                      cls=_Encoder).encode()


def content_hash(prev_hash: str, fields: dict) -> str:
    """The unkeyed SHA-256 of records written before the chain was keyed (``key_version`` 0)."""
    return hashlib.sha256(_payload(prev_hash, fields)).hexdigest()


def keyed_hash(prev_hash: str, fields: dict, key: bytes) -> str:
    return hmac.new(key, _payload(prev_hash, fields), hashlib.sha256).hexdigest()


def _key(version: int) -> bytes | None:
    """The key of a version, if this server holds it (only the current one, for now)."""
    return settings.AUDIT["KEY"] if version == settings.AUDIT["KEY_VERSION"] else None


def record_hash(entry: AuditRecord) -> str | None:
    """What ``entry.hash`` must be; None when its key version is not one this server holds."""
    if entry.key_version == 0:
        return content_hash(entry.prev_hash, _hashed_fields(entry))
    key = _key(entry.key_version)
    return None if key is None else keyed_hash(entry.prev_hash, _hashed_fields(entry), key)


def instant(value: dt.datetime | None) -> str:
    """A time as the head's MAC and its exports write it: UTC, to the microsecond ("" for none)."""
    return "" if value is None else value.astimezone(dt.UTC).isoformat(timespec="microseconds")


def head_mac(head: AuditChainHead) -> str:
    """The head's own MAC: without the key nobody can move its last record, where keyed records begin, the
    record count or the last record's time (migration 0011 sealed heads of the previous rule with it)."""
    message = (f"audit-head:{head.last_seq}:{head.last_hash}:{head.keyed_from_seq}:{head.record_count}:"
               f"{instant(head.last_at)}").encode()
    return hmac.new(settings.AUDIT["KEY"], message, hashlib.sha256).hexdigest()


def _hashed_fields(record: AuditRecord) -> dict:
    fields = {"seq": record.seq, "at": record.at.isoformat(), "actor_id": record.actor_id,
              "actor_name": record.actor_name, "action": record.action, "object_type": record.object_type,
              "object_id": record.object_id, "object_repr": record.object_repr, "tenant_id": record.tenant_id,
              "before": record.before, "after": record.after, "reason": record.reason,
              "source_address": record.source_address}
    if record.key_version:  # unkeyed records keep the content they were hashed with
        fields["key_version"] = record.key_version
    if record.reason_phrase is not None:  # records written before reasons were kept as phrases have none
        fields["reason_phrase"] = record.reason_phrase
    return fields


@dataclass(frozen=True)
class Entry:
    """One record to append, as ``record`` takes it (``record_many`` appends several under one lock)."""

    action: str
    obj: object = None
    before: object = None
    after: object = None
    reason: str = ""
    actor: object = None
    tenant: object = None
    object_type: str = ""
    object_id: object = ""
    object_repr: str = ""
    address: str | None = None


def record(action: str, obj=None, *, before=None, after=None, reason: str = "", actor=None, tenant=None,
           object_type: str = "", object_id="", object_repr: str = "", address: str | None = None) -> AuditRecord:
    """Append one record. ``obj`` (a model instance) fills the object fields and, if it has one, the tenant."""
    return record_many([Entry(action, obj, before=before, after=after, reason=reason, actor=actor, tenant=tenant,
                              object_type=object_type, object_id=object_id, object_repr=object_repr,
                              address=address)])[0]


def record_many(entries: list[Entry]) -> list[AuditRecord]:
    """Append ``entries`` in their order, as that many ``record`` calls would (the same fields, sequence numbers,
    times and hash links), but taking the lock and writing the head once and inserting the rows in one statement:
    a pass that preempts a hundred jobs appends a hundred records without a hundred round trips under the lock."""
    if not entries:
        return []
    context_actor, context_address = _context.get()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [AUDIT_LOCK_KEY])
        head, _created = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
        written = []
        for entry in entries:
            row = _unsaved(entry, context_actor, context_address)
            row.seq, row.at, row.prev_hash = head.last_seq + 1, timezone.now(), head.last_hash or GENESIS
            row.hash = record_hash(row)
            head.last_seq, head.last_hash, head.last_at = row.seq, row.hash, row.at
            head.record_count += 1
            written.append(row)
        bulk_insert_with_ids(AuditRecord, written)  # COPY: a pass's hundred records without escaping arrays
        head.mac = head_mac(head)
        head.save(update_fields=["last_seq", "last_hash", "last_at", "record_count", "mac"])
    return written


def _unsaved(entry: Entry, context_actor, context_address: str) -> AuditRecord:
    """The record of ``entry`` before its place in the chain (sequence, time, links) is known."""
    actor, tenant, obj = entry.actor, entry.tenant, entry.obj
    object_type, object_id, object_repr = entry.object_type, entry.object_id, entry.object_repr
    if actor is None:
        actor = context_actor() if callable(context_actor) else context_actor
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id or str(obj.pk)
        object_repr = object_repr or str(obj)[:300]
        if tenant is None:
            tenant = obj if isinstance(obj, Tenant) else (obj.tenant if getattr(obj, "tenant_id", None) else None)
    reason = entry.reason
    return AuditRecord(
        actor=actor, actor_name=actor.get_username() if actor is not None else "", action=entry.action,
        object_type=object_type, object_id=str(object_id), object_repr=object_repr[:300], tenant=tenant,
        before=_plain(entry.before), after=_plain(entry.after), reason=reason or "",
        reason_phrase=_plain(reason.stored()) if isinstance(reason, Phrase) else None,
        source_address=(entry.address if entry.address is not None else context_address)[:64],
        key_version=settings.AUDIT["KEY_VERSION"])


@dataclass
class Verification:
    ok: bool
    checked: int
    problem: str = ""
    bad_seq: int | None = None


def verify() -> Verification:
    """Walk the chain in order: every record's hash must match its content and link to the one before, every
    record from the head's ``keyed_from_seq`` on must be keyed, the head must name the last record, its time
    and the count, and carry its MAC. An older head put back with the records after it passes here: only the
    exported heads show that (``audit.heads.check_heads``)."""
    head = AuditChainHead.objects.filter(pk=1).first()
    keyed_from = head.keyed_from_seq if head else 1
    expected_prev, expected_seq, checked, last_at = GENESIS, 1, 0, None
    for entry in AuditRecord.objects.order_by("seq").iterator(chunk_size=2000):
        problem = _check(entry, expected_seq, expected_prev, keyed_from)
        if problem:
            return Verification(False, checked, problem, min(entry.seq, expected_seq))
        expected_prev, expected_seq, checked, last_at = entry.hash, expected_seq + 1, checked + 1, entry.at
    last_seq = head.last_seq if head else 0
    if last_seq != checked or (head and head.last_hash and head.last_hash != expected_prev):
        return Verification(False, checked, _("the chain ends at #%(end)s but #%(last)s was written last") % {
            "end": checked, "last": last_seq}, checked + 1)
    if head and head.record_count != checked:
        return Verification(False, checked, _("the head counts %(head)s records but the chain holds %(chain)s") % {
            "head": head.record_count, "chain": checked}, None)
    if head and head.last_at != last_at:
        return Verification(False, checked, _("the head says the last record was written at %(head)s, record "
                                              "#%(seq)s says %(chain)s") % {
            "head": instant(head.last_at) or "-", "seq": checked, "chain": instant(last_at) or "-"}, checked or None)
    if head and (head.last_seq or head.mac) and not hmac.compare_digest(head.mac, head_mac(head)):
        return Verification(False, checked, _("the chain head was rewritten without the audit key"), None)
    return Verification(True, checked)


def _check(entry: AuditRecord, expected_seq: int, expected_prev: str, keyed_from: int) -> str:
    """What is wrong with one record in its place in the chain ("" when nothing is)."""
    if entry.seq != expected_seq:
        return _("record #%(seq)s is missing (next is #%(next)s)") % {"seq": expected_seq, "next": entry.seq}
    if entry.prev_hash != expected_prev:
        return _("record #%(seq)s does not link to the record before it") % {"seq": entry.seq}
    if (entry.key_version == 0) != (entry.seq < keyed_from):
        if entry.key_version == 0:
            return _("record #%(seq)s is not keyed (records from #%(from)s on must be)") % {
                "seq": entry.seq, "from": keyed_from}
        return _("record #%(seq)s is keyed but precedes #%(from)s, where keyed records begin") % {
            "seq": entry.seq, "from": keyed_from}
    expected = record_hash(entry)
    if expected is None:
        return _("record #%(seq)s was signed with key version %(version)s, which this server lacks") % {
            "seq": entry.seq, "version": entry.key_version}
    if not hmac.compare_digest(expected, entry.hash):
        return _("record #%(seq)s was altered (its hash does not match)") % {"seq": entry.seq}
    return ""
