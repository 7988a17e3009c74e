"""On PostgreSQL, refuse TRUNCATE of the audit tables too (row triggers do not see it).

The table's owner can still switch the trigger off, which is why the portal runs as a role that owns no
table and has no TRUNCATE right (``manage.py audit_db_roles``); this trigger stops the owner's mistakes and
``manage.py flush``. A superuser session that sets ``gpuportal.audit_allow_truncate = on`` may truncate:
the test suite does so between tests (gpuportal/settings/test.py).
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_refuse_truncate() RETURNS trigger AS $$
BEGIN
    IF coalesce(current_setting('gpuportal.audit_allow_truncate', true), '') = 'on'
            AND (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit records are append-only: TRUNCATE refused on %', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_record_refuse_truncate BEFORE TRUNCATE ON audit_auditrecord
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_truncate();
CREATE TRIGGER audit_head_refuse_truncate BEFORE TRUNCATE ON audit_auditchainhead
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_truncate();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_record_refuse_truncate ON audit_auditrecord;
DROP TRIGGER IF EXISTS audit_head_refuse_truncate ON audit_auditchainhead;
DROP FUNCTION IF EXISTS audit_refuse_truncate();
"""


def _run(sql):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(sql)  # no parameters: the % of RAISE stay as they are
    return apply


class Migration(migrations.Migration):
    dependencies = [("audit", "0003_keyed_chain")]
    operations = [migrations.RunPython(_run(CREATE), _run(DROP))]
