"""Key the chain without losing or re-hashing a record.

Records already written keep their plain SHA-256 (``key_version`` 0, what ``AddField``'s default gives them)
and are verified as before; the head remembers that keyed records begin after them (``keyed_from_seq``)
and gets its MAC, so that nobody without the key can later pass re-hashed records off as old ones. Run it
with ``GPUPORTAL_AUDIT_KEY`` set to the production key: the MAC is made with the key this process has.
"""

import hashlib
import hmac

from django.conf import settings
from django.db import migrations, models


def head_mac(head) -> str:
    """The head's MAC as verify() checked it at this migration: over the three fields the head had then.
    (Migration 0011 checks it and seals the record count and time it adds.)"""
    message = f"audit-head:{head.last_seq}:{head.last_hash}:{head.keyed_from_seq}".encode()
    return hmac.new(settings.AUDIT["KEY"], message, hashlib.sha256).hexdigest()


def seal_head(apps, schema_editor):
    head_model = apps.get_model("audit", "AuditChainHead")
    for head in head_model.objects.using(schema_editor.connection.alias).all():
        head.keyed_from_seq = head.last_seq + 1
        head.mac = head_mac(head)
        head.save(update_fields=["keyed_from_seq", "mac"])


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0002_append_only_trigger'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditchainhead',
            name='keyed_from_seq',
            field=models.PositiveBigIntegerField(default=1),
        ),
        migrations.AddField(
            model_name='auditchainhead',
            name='mac',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='auditrecord',
            name='key_version',
            field=models.PositiveSmallIntegerField(default=0, verbose_name='key version'),
        ),
        migrations.RunPython(seal_head, migrations.RunPython.noop),
    ]
