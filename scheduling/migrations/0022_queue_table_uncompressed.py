"""The queue table's packed places are stored uncompressed (PostgreSQL's ``STORAGE EXTERNAL``).

The pass writes them as one value of 56 bytes per waiting job (560 kB at 10,000 jobs) nearly every pass, and
PostgreSQL compressed every such value before storing it: at 10,000 jobs the write took 63 ms, 12 ms without.
Readers decode the whole value anyway. Other databases keep their default."""

from django.db import migrations

SQL = 'ALTER TABLE "scheduling_queuetable" ALTER COLUMN "places" SET STORAGE {}'


def storage(kind):
    def alter(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(SQL.format(kind))
    return alter


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0021_queue_order")]

    operations = [migrations.RunPython(storage("EXTERNAL"), storage("EXTENDED"))]
