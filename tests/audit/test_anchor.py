"""Truncation of the newest records, played by the audit tables' owner (a PostgreSQL role that owns them and is no
superuser): triggers off, the newest records deleted, an older head row put back (its MAC is valid), triggers on.
The chain alone still verifies; ``verify_audit`` fails against the anchor — the head file, or the syslog lines —
naming the records that are gone, and the head row's count and time are under its MAC."""

import hashlib
import hmac
import importlib
import os
import socket
import threading
import time
from pathlib import Path

import psycopg
import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit import log
from audit.models import AuditAction, AuditChainHead, AuditRecord
from audit.tasks import export_head
from fleet.models import Node

pytestmark = pytest.mark.django_db(transaction=True)

TABLES = ("audit_auditrecord", "audit_auditchainhead")
#: Every column of the head row but its id: what the attacker's copy of an older head holds.
HEAD_FIELDS = [f.attname for f in AuditChainHead._meta.concrete_fields if not f.primary_key]


def connect(user, **options):
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, dbname=db["NAME"], user=user,
                           **options)


@pytest.fixture
def owner(users):
    """A login that owns the audit tables and is no superuser: what the migrating role is to a deployment."""
    role = f"gpuportal_audit_owner_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableowner FROM pg_tables WHERE tablename = %s", [TABLES[0]])
        original = cursor.fetchone()[0]
        cursor.execute(f"CREATE ROLE {role} LOGIN")
        for table in TABLES:
            cursor.execute(f"ALTER TABLE {table} OWNER TO {role}")
    try:
        yield role
    finally:
        with connection.cursor() as cursor:
            for table in TABLES:
                cursor.execute(f'ALTER TABLE {table} OWNER TO "{original}"')
            cursor.execute(f"DROP ROLE {role}")


def write(count, reason):
    node = Node.objects.first()
    for n in range(count):
        log.record(AuditAction.NODE_ADMIN, node, reason=f"{reason} {n}")


def older_head_put_back(role, kept_head):
    """The attack, on the owner's own connection: it may switch the triggers of its tables off."""
    with connect(role, autocommit=True) as owner_session:
        assert not owner_session.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        with owner_session.transaction():
            owner_session.execute("ALTER TABLE audit_auditrecord DISABLE TRIGGER USER")
            owner_session.execute("DELETE FROM audit_auditrecord WHERE seq > %s", [kept_head["last_seq"]])
            columns = ", ".join(f"{field} = %({field})s" for field in HEAD_FIELDS)
            owner_session.execute(f"UPDATE audit_auditchainhead SET {columns} WHERE id = 1", kept_head)
            owner_session.execute("ALTER TABLE audit_auditrecord ENABLE TRIGGER USER")


@pytest.fixture
def history(users):
    """Records up to a head the attacker keeps a copy of, then four more: (the kept head row, the newest record)."""
    write(3, "kept")
    kept_head = AuditChainHead.objects.values(*HEAD_FIELDS).get(pk=1)
    write(4, "removed later")
    return kept_head, AuditRecord.objects.order_by("-seq").first()


def assert_names_what_is_gone(err, kept_head, newest):
    assert f"records #{kept_head['last_seq'] + 1} to #{newest.seq} are gone" in err
    assert f"is #{newest.seq}, {newest.seq} records, the last written at {log.instant(newest.at)}" in err
    assert f"ends at #{kept_head['last_seq']}, {kept_head['last_seq']} records" in err


def test_older_head_put_back_is_caught_by_the_head_file(history, owner, settings, tmp_path, capsys):
    kept_head, newest = history
    settings.AUDIT = {**settings.AUDIT, "HEAD_FILE": str(tmp_path / "heads.jsonl")}
    export_head.apply(throw=True)  # the beat task: the anchor now knows the newest record

    older_head_put_back(owner, kept_head)
    assert AuditRecord.objects.count() == kept_head["last_seq"]
    assert log.verify().ok  # on its own the chain cannot tell: the head row is a genuine one

    with pytest.raises(SystemExit) as exited:
        call_command("verify_audit")
    err = capsys.readouterr().err
    assert exited.value.code == 1 and "audit chain broken" in err
    assert_names_what_is_gone(err, kept_head, newest)
    assert len((tmp_path / "heads.jsonl").read_text().splitlines()) == 1  # the forged head is not exported


@pytest.fixture
def syslog_server(tmp_path):
    """A syslog server on a real UDP socket that files each message as rsyslog does: time, host, message."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.1)
    kept, stop = tmp_path / "syslog.log", threading.Event()

    def serve():
        with kept.open("ab") as out:
            while not stop.is_set():
                try:
                    message = server.recv(65535)
                except TimeoutError:
                    continue
                out.write(b"2026-12-02T05:00:00+00:00 portal-worker " + message.rstrip(b"\x00\n") + b"\n")
                out.flush()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", kept
    stop.set()
    thread.join()
    server.close()


def wait_for_lines(path: Path, count: int) -> list[str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"{path} never held {count} lines")


def test_older_head_put_back_is_caught_by_the_syslog_lines(history, owner, syslog_server, settings, capsys):
    """The Kubernetes deployment's anchor: heads go to syslog only; verify_audit reads the kept lines back."""
    kept_head, newest = history
    address, kept = syslog_server
    settings.AUDIT = {**settings.AUDIT, "HEAD_FILE": "", "HEAD_SYSLOG": address}
    export_head.apply(throw=True)
    assert "gpuportal-audit-head" in wait_for_lines(kept, 1)[0]

    older_head_put_back(owner, kept_head)
    call_command("verify_audit")  # without the syslog lines nothing shows, and it says so
    assert "not compared with an anchor" in capsys.readouterr().err
    wait_for_lines(kept, 2)  # that run exported the head it found, the older one

    with pytest.raises(SystemExit) as exited:
        call_command("verify_audit", heads=[str(kept)])
    err = capsys.readouterr().err
    assert exited.value.code == 1 and f"(anchor: {kept})" in err
    assert_names_what_is_gone(err, kept_head, newest)


@pytest.mark.parametrize("field", ["record_count", "last_at"])
def test_count_and_time_of_a_head_put_back_cannot_be_moved_forward(history, owner, field):
    """The owner puts back the older head row but makes its count or time the newest's, to look level with the
    anchor: without the key that breaks the head (its MAC covers both)."""
    kept_head, newest = history
    older_head_put_back(owner, {**kept_head, field: newest.seq if field == "record_count" else newest.at})
    result = log.verify()
    assert not result.ok and result.problem


def previous_mac(head, key: bytes) -> str:
    """The head's MAC as the rule before migration 0011 made it: sequence, hash and keyed-from only."""
    return hmac.new(key, f"audit-head:{head.last_seq}:{head.last_hash}:{head.keyed_from_seq}".encode(),
                    hashlib.sha256).hexdigest()


def test_migration_seals_count_and_time_only_under_a_valid_head(history):
    """Upgrading: a head sealed by the previous rule gets the count and time under a new MAC; a head that was
    already forged keeps a MAC that does not verify (the migration must not launder it)."""
    migration = importlib.import_module("audit.migrations.0011_head_count_and_time")

    def upgraded(key: bytes) -> AuditChainHead:
        head = AuditChainHead.objects.get(pk=1)
        AuditChainHead.objects.filter(pk=1).update(record_count=0, last_at=None, mac=previous_mac(head, key))
        with connection.schema_editor() as editor:
            migration.seal_count_and_time(apps, editor)
        return AuditChainHead.objects.get(pk=1)

    head = upgraded(django_settings.AUDIT["KEY"])
    assert head.record_count == AuditRecord.objects.count() and head.last_at == history[1].at
    assert log.verify().ok
    upgraded(b"not the audit key")
    result = log.verify()
    assert not result.ok and "head was rewritten" in result.problem


def test_heads_named_on_the_command_line_must_exist(history, tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("verify_audit", heads=[str(tmp_path / "nowhere.log")])
