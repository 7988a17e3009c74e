"""DRF's ``authtoken`` app stored API tokens in plain text; it is no longer installed and its tokens no longer
authenticate. Delete them so that no usable secret stays in the database (the emptied table is left in place:
dropping it would contradict the migration history ``authtoken`` recorded)."""

from django.db import migrations


def forget_plaintext_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" in connection.introspection.table_names():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]
    operations = [migrations.RunPython(forget_plaintext_tokens, migrations.RunPython.noop)]
