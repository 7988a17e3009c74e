"""The tampering attack played with the owner's rights: triggers off, a record edited, every hash and the
head recomputed without the key, or the log truncated and started afresh; ``verify_audit`` catches each."""

import hashlib
import hmac
import json

import pytest
from django.core.management import call_command
from django.db import connection

from audit import heads, log
from audit.models import AuditAction, AuditChainHead, AuditRecord
from audit.tasks import export_head
from fleet.models import Node
from gpuportal.celery import beat_schedule

pytestmark = pytest.mark.django_db(transaction=True)


def owner_sql(*statements):
    """Run statements as the tables' owner would, with the audit triggers switched off."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditrecord DISABLE TRIGGER USER")
        cursor.execute("ALTER TABLE audit_auditchainhead DISABLE TRIGGER USER")
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.execute("ALTER TABLE audit_auditrecord ENABLE TRIGGER USER")
        cursor.execute("ALTER TABLE audit_auditchainhead ENABLE TRIGGER USER")


def rehash_from(seq, sign, key_version=None, keyed_from=None):
    """Recompute every hash from ``seq`` on and the head, as an attacker who knows the code but not the key."""
    prev = AuditRecord.objects.get(seq=seq - 1).hash if seq > 1 else log.GENESIS
    updates = []
    for entry in AuditRecord.objects.filter(seq__gte=seq).order_by("seq"):
        entry.prev_hash = prev
        entry.key_version = entry.key_version if key_version is None else key_version
        entry.hash = prev = sign(entry)
        updates.append(("UPDATE audit_auditrecord SET prev_hash = %s, hash = %s, key_version = %s WHERE id = %s",
                        [entry.prev_hash, entry.hash, entry.key_version, entry.pk]))
    head = AuditChainHead.objects.get(pk=1)
    head.last_hash, head.keyed_from_seq = prev, keyed_from or head.keyed_from_seq
    forged_mac = hmac.new(b"guess", f"audit-head:{head.last_seq}:{prev}:{head.keyed_from_seq}".encode(),
                          hashlib.sha256).hexdigest()
    updates.append(("UPDATE audit_auditchainhead SET last_hash = %s, keyed_from_seq = %s, mac = %s WHERE id = 1",
                    [prev, head.keyed_from_seq, forged_mac]))
    owner_sql(*updates)


def with_key(key):
    return lambda entry: log.keyed_hash(entry.prev_hash, log._hashed_fields(entry), key)


def unkeyed(entry):
    return log.content_hash(entry.prev_hash, log._hashed_fields(entry))


@pytest.fixture
def chain(users):
    node = Node.objects.first()
    for n in range(4):
        log.record(AuditAction.NODE_ADMIN, node, reason=f"check {n}")
    assert log.verify().ok and AuditRecord.objects.filter(key_version=0).count() == 0
    return AuditRecord.objects.order_by("seq")[AuditRecord.objects.count() - 3]


@pytest.mark.parametrize("sign", [with_key(b"an attacker's guess"), with_key(b"")], ids=["guessed key", "no key"])
def test_edit_rehashed_without_the_key_is_caught(chain, sign, capsys):
    owner_sql(("UPDATE audit_auditrecord SET reason = 'nothing to see' WHERE id = %s", [chain.pk]))
    rehash_from(chain.seq, sign)
    result = log.verify()
    assert not result.ok and result.bad_seq == chain.seq and "altered" in result.problem
    with pytest.raises(SystemExit) as exited:
        call_command("verify_audit")
    assert exited.value.code == 1 and f"#{chain.seq} was altered" in capsys.readouterr().err


def test_downgrade_to_unkeyed_sha256_is_caught(chain):
    owner_sql(("UPDATE audit_auditrecord SET reason = 'nothing to see' WHERE id = %s", [chain.pk]))
    rehash_from(1, unkeyed, key_version=0)  # the old algorithm, consistently, head kept where it was
    result = log.verify()
    assert not result.ok and result.bad_seq == 1 and "not keyed" in result.problem
    last = AuditRecord.objects.order_by("-seq").first().seq
    rehash_from(1, unkeyed, key_version=0, keyed_from=last + 1)  # ... and the head moved to pass them as old
    result = log.verify()
    assert not result.ok and "head was rewritten" in result.problem


def test_legacy_records_verify_as_before_and_keyed_ones_follow(users):
    """The migration path: records written unkeyed stay as they are; the head says where keyed ones begin."""
    first = AuditRecord.objects.order_by("seq").first()
    rehash_from(1, unkeyed, key_version=0)  # as if every record so far predates the keyed chain
    head = AuditChainHead.objects.get(pk=1)
    head.keyed_from_seq = head.last_seq + 1
    head.mac = log.head_mac(head)
    head.save()
    entry = log.record(AuditAction.NODE_ADMIN, Node.objects.first(), reason="after the upgrade")
    assert entry.key_version == 1 and AuditRecord.objects.get(seq=first.seq).key_version == 0
    assert log.verify().ok


def test_truncated_and_restarted_log_is_caught_by_the_exported_head(chain, settings, tmp_path, capsys):
    settings.AUDIT = {**settings.AUDIT, "HEAD_FILE": str(tmp_path / "heads.jsonl")}
    assert "export-audit-head" in beat_schedule()
    export_head.apply(throw=True)
    call_command("verify_audit")  # intact, and exports the head once more
    assert "head exported" in capsys.readouterr().out
    exported = [json.loads(line) for line in (tmp_path / "heads.jsonl").read_text().splitlines()]
    last = AuditRecord.objects.order_by("-seq").first()
    assert [(h["seq"], h["hash"]) for h in exported] == [(last.seq, last.hash)] * 2 and exported[0]["at"]

    owner_sql(("TRUNCATE audit_auditrecord, audit_auditchainhead", []))
    node = Node.objects.first()
    for n in range(2):  # the portal goes on writing: a new chain from #1, perfectly keyed
        log.record(AuditAction.NODE_ADMIN, node, reason=f"fresh {n}")
    assert log.verify().ok
    result = heads.check_heads()
    assert not result.ok and result.bad_seq == 3 and "are gone" in result.problem

    while AuditRecord.objects.count() < last.seq:  # rewritten up to and beyond the exported head
        log.record(AuditAction.NODE_ADMIN, node, reason="filler")
    assert log.verify().ok
    with pytest.raises(SystemExit) as exited:
        call_command("verify_audit")
    err = capsys.readouterr().err
    assert exited.value.code == 1 and f"#{last.seq} differs from the head exported" in err
    assert len((tmp_path / "heads.jsonl").read_text().splitlines()) == 2  # a broken chain's head is not exported
