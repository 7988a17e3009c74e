"""The portal's database role (``manage.py audit_db_roles``): it owns no table and may only insert and read
audit records; TRUNCATE is refused to it by rights and to the owner by a trigger."""

import os

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit import log
from audit.models import AuditAction
from fleet.models import Node

pytestmark = pytest.mark.django_db(transaction=True)

INSERT = ("INSERT INTO audit_auditrecord (seq, at, actor_name, action, object_type, object_id, object_repr, reason, "
          "source_address, prev_hash, hash, key_version) VALUES (999999, now(), '', 'node.admin', 'x', '', 'x', '', "
          "'', '', '', 1)")


def connect(user, **options):
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, dbname=db["NAME"], user=user,
                           **options)


@pytest.fixture
def app_role(users):
    role = f"gpuportal_audit_app_{os.getpid()}"
    try:
        call_command("audit_db_roles", app_role=role)
    except Exception as error:  # noqa: BLE001 - any failure here means the test cannot play the attack
        pytest.fail(f"could not create the PostgreSQL role {role} (the test user must be allowed to CREATE ROLE, "
                    f"and 127.0.0.1 must trust it): {error}")
    yield role
    with connection.cursor() as cursor:
        cursor.execute(f"DROP OWNED BY {role}")
        cursor.execute(f"DROP ROLE {role}")


def refused(conn, sql):
    with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
        conn.execute(sql)
    return True


def test_app_role_can_only_insert_and_read_audit_records(app_role):
    log.record(AuditAction.NODE_ADMIN, Node.objects.first(), reason="before the attack")
    with connect(app_role, autocommit=True) as app:
        assert app.execute("SELECT count(*) FROM audit_auditrecord").fetchone()[0] > 0
        with app.transaction():  # may append and move the head (rolled back to keep the chain)
            assert app.execute(INSERT).rowcount == 1
            assert app.execute("UPDATE audit_auditchainhead SET mac = mac").rowcount == 1
            raise psycopg.Rollback
        for sql in ("TRUNCATE audit_auditrecord", "TRUNCATE audit_auditchainhead",
                    "UPDATE audit_auditrecord SET reason = 'x'", "DELETE FROM audit_auditrecord",
                    "DELETE FROM audit_auditchainhead", "ALTER TABLE audit_auditrecord DISABLE TRIGGER USER",
                    "SET session_replication_role = replica"):
            assert refused(app, sql), sql
        owned = app.execute("SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
                            "WHERE r.rolname = current_user").fetchone()[0]
        assert owned == 0
        assert app.execute("SELECT count(*) FROM tenants_tenant").fetchone()[0] == 3  # the rest of the portal works
    assert log.verify().ok


def test_truncate_trigger_refuses_even_the_owner(users):
    with (connect(connection.settings_dict["USER"] or "postgres", autocommit=True) as owner,
          pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only")):
        owner.execute("TRUNCATE audit_auditrecord, audit_auditchainhead")
    assert log.verify().ok and log.verify().checked > 0


def test_bad_role_name_is_refused_with_its_rule(db):
    with pytest.raises(CommandError, match="--app-role must be 1 to 63"):
        call_command("audit_db_roles", app_role="x; DROP TABLE y")
    sql = []
    call_command("audit_db_roles", app_role="gpuportal_app", sql=True, stdout=type("W", (), {"write": sql.append})())
    assert "REVOKE UPDATE, DELETE, TRUNCATE ON \"audit_auditrecord\" FROM \"gpuportal_app\"" in sql[0]
