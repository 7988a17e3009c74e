"""Backup and restore as docs/operations.md tells operators: scripts/backup-db.sh, a new
empty database, scripts/restore-db.sh — which refuses a database with tables and ends with verify_audit, so a
restore that lost or changed an audit record is caught. Real pg_dump and pg_restore on this machine's server."""

import os
import subprocess
import sys

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from audit.models import AuditRecord
from fleet import services as fleet_services
from fleet.models import Node
from gpuportal.storage.db import database_url
from scheduling.jobs import submission
from scheduling.models import Job
from tests.conftest import job_payload

pytestmark = pytest.mark.django_db(transaction=True)


def _server(sql: str) -> None:
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname="postgres",
                         autocommit=True) as admin:
        admin.execute(sql)


@pytest.fixture
def restored_url():
    name = f"{connection.settings_dict['NAME']}_restored"
    _server(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _server(f'CREATE DATABASE "{name}"')
    yield database_url().rsplit("/", 1)[0] + f"/{name}"
    _server(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _script(name: str, url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": url, "TEST_DATABASE_URL": url, "PY": sys.executable,
           "DJANGO_SETTINGS_MODULE": "gpuportal.settings.test"}
    return subprocess.run([str(settings.BASE_DIR / "scripts" / name), *args], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=120)


def test_backup_restore_into_an_empty_database_keeps_jobs_and_a_verifiable_audit_chain(users, restored_url,
                                                                                        tmp_path):
    for i in range(3):
        submission.submit_job(users["alice"], job_payload(name=f"kept-{i}"))
    fleet_services.set_node_admin_state(users["admin"], Node.objects.order_by("name").first(), "cordoned",
                                        "maintenance before the backup")
    records, jobs = AuditRecord.objects.count(), Job.objects.count()
    assert records >= 1 and jobs == 3
    dump = tmp_path / "portal.dump"

    backup = _script("backup-db.sh", database_url(), str(dump))
    assert backup.returncode == 0, backup.stderr
    assert dump.stat().st_size > 0 and "backed up" in backup.stdout

    restore = _script("restore-db.sh", restored_url, str(dump))
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert f"audit chain intact: {records} records" in restore.stdout
    with psycopg.connect(restored_url) as restored:
        assert restored.execute("SELECT count(*) FROM scheduling_job").fetchone()[0] == jobs
        assert restored.execute("SELECT count(*) FROM scheduling_job WHERE name LIKE 'kept-%'").fetchone()[0] == 3

    again = _script("restore-db.sh", restored_url, str(dump))  # never merged into a database with data
    assert again.returncode == 2 and "refusing to restore" in again.stderr

    with psycopg.connect(restored_url, autocommit=True) as restored:  # a record changed after the backup
        restored.execute("SET session_replication_role = replica")  # past the append-only trigger, as an attacker
        restored.execute("UPDATE audit_auditrecord SET reason = 'rewritten' WHERE id = "
                         "(SELECT min(id) FROM audit_auditrecord)")
    verify = subprocess.run([sys.executable, "manage.py", "verify_audit"], cwd=settings.BASE_DIR,
                            env={**os.environ, "TEST_DATABASE_URL": restored_url,
                                 "DJANGO_SETTINGS_MODULE": "gpuportal.settings.test"},
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 1 and "audit chain broken" in verify.stderr
