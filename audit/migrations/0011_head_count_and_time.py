"""The chain head carries the record count and the last record's time under its MAC.

An older copy of the head row, put back by whoever owns the tables after deleting the newest records, has a
valid MAC; the count and the time make it differ from the heads exported since (``audit.heads``). An existing
head is sealed again only if its MAC is the one the previous rule gives: a head rewritten before the upgrade
keeps its bad MAC, so ``verify_audit`` still reports it instead of this migration laundering it. Run it with
``GPUPORTAL_AUDIT_KEY`` set to the production key, as migration 0003.
"""

import hmac
import importlib

from django.db import migrations, models

#: The MAC rule before this migration: sequence, hash and keyed-from only.
_previous_mac = importlib.import_module("audit.migrations.0003_keyed_chain").head_mac


def seal_count_and_time(apps, schema_editor):
    # The MAC rule verify() checks now; it reads the five fields this migration completes.
    from audit.log import head_mac

    alias = schema_editor.connection.alias
    head_model = apps.get_model("audit", "AuditChainHead")
    records = apps.get_model("audit", "AuditRecord").objects.using(alias)
    for head in head_model.objects.using(alias).all():
        head.record_count = records.filter(seq__lte=head.last_seq).count()
        head.last_at = records.filter(seq=head.last_seq).values_list("at", flat=True).first()
        fields = ["record_count", "last_at"]
        if head.mac and hmac.compare_digest(head.mac, _previous_mac(head)):
            head.mac = head_mac(head)
            fields.append("mac")
        head.save(update_fields=fields)


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0010_security_actions"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditchainhead",
            name="record_count",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="auditchainhead",
            name="last_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(seal_count_and_time, migrations.RunPython.noop),
    ]
