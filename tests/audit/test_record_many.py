"""A batch append (``record_many``) writes the records that as many ``record`` calls would, in one chain."""

import pytest
from django.utils.translation import gettext_noop

from audit import log
from audit.models import AuditAction, AuditChainHead, AuditRecord
from gpuportal.text.phrases import Phrase
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

#: What the chain does not hold the same for two appends of the same content: their place in it.
PLACE = {"id", "seq", "at", "prev_hash", "hash"}


def _content(entry: AuditRecord) -> dict:
    return {f.attname: getattr(entry, f.attname) for f in AuditRecord._meta.concrete_fields if f.attname not in PLACE}


def test_a_batch_is_the_chain_that_one_by_one_appends_make():
    tenants = [make_tenant(f"batch-{i}", {}, {}) for i in range(3)]
    reason = Phrase(gettext_noop("Preempted by a job of tenant %(tenant)s (%(rule)s)."), {"tenant": "x", "rule": "y"})
    asks = [log.Entry(AuditAction.JOB_PREEMPT, tenant, reason=reason, after={"rule": "y", "n": i})
            for i, tenant in enumerate(tenants)]
    before = AuditChainHead.objects.get(pk=1).last_seq if AuditChainHead.objects.exists() else 0

    one_by_one = [log.record(a.action, a.obj, reason=a.reason, after=a.after) for a in asks]
    batch = log.record_many(asks)

    assert [_content(e) for e in batch] == [_content(e) for e in one_by_one]
    assert [e.seq for e in one_by_one + batch] == list(range(before + 1, before + 7))
    stored = list(AuditRecord.objects.filter(seq__gt=before).order_by("seq"))
    assert [(e.seq, e.hash, e.prev_hash) for e in stored] == [(e.seq, e.hash, e.prev_hash) for e in one_by_one + batch]
    assert all(later.prev_hash == earlier.hash for earlier, later in zip(stored, stored[1:], strict=False))
    head = AuditChainHead.objects.get(pk=1)
    assert (head.last_seq, head.last_hash, head.last_at) == (batch[-1].seq, batch[-1].hash, batch[-1].at)
    assert log.verify().ok
    assert log.record_many([]) == [] and AuditChainHead.objects.get(pk=1).last_seq == head.last_seq
