"""OperationalCounter now belongs to gpuportal, Cluster to fleet: state only, the tables stay."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gpuportal', '0001_initial'),
        ('fleet', '0001_initial'),
        ('metering', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.DeleteModel(
                name='OperationalCounter',
            ),
            migrations.AlterField(
                model_name='usagedaily',
                name='cluster',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
            ),
            migrations.AlterField(
                model_name='usagemonthly',
                name='cluster',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
            ),
        ]),
    ]
