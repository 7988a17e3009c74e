"""On PostgreSQL, refuse UPDATE and DELETE of audit records in the database itself."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_record_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only: % refused on audit_auditrecord', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_record_append_only BEFORE UPDATE OR DELETE ON audit_auditrecord
    FOR EACH ROW EXECUTE FUNCTION audit_record_append_only();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_record_append_only ON audit_auditrecord;
DROP FUNCTION IF EXISTS audit_record_append_only();
"""


def _run(sql):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(sql)  # no parameters: the % of RAISE stay as they are
    return apply


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(_run(CREATE), _run(DROP))]
