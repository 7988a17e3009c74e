"""Cluster, Node, GPU, GpuReading, NodeReading and NodeEvent now belong to the fleet app (fleet 0001). Their
tables keep their names, so this changes only Django's state: nothing is dropped, nothing moves."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0001_initial'),
        ('governance', '0002_idlepolicy_cluster_in_fleet'),
        ('metering', '0002_counter_to_gpuportal_cluster_to_fleet'),
        ('scheduling', '0004_kubernetes_dispatch'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name='job',
                name='cluster',
                field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='fleet.cluster'),
            ),
            migrations.RemoveField(
                model_name='node',
                name='cluster',
            ),
            migrations.RemoveField(
                model_name='gpu',
                name='node',
            ),
            migrations.RemoveField(
                model_name='nodeevent',
                name='gpu',
            ),
            migrations.AlterField(
                model_name='joballocation',
                name='gpu',
                field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='allocations', to='fleet.gpu'),
            ),
            migrations.RemoveField(
                model_name='gpureading',
                name='gpu',
            ),
            migrations.RemoveField(
                model_name='nodereading',
                name='node',
            ),
            migrations.RemoveField(
                model_name='nodeevent',
                name='node',
            ),
            migrations.RemoveField(
                model_name='nodeevent',
                name='actor',
            ),
            migrations.DeleteModel(
                name='Cluster',
            ),
            migrations.DeleteModel(
                name='GPU',
            ),
            migrations.DeleteModel(
                name='GpuReading',
            ),
            migrations.DeleteModel(
                name='NodeReading',
            ),
            migrations.DeleteModel(
                name='Node',
            ),
            migrations.DeleteModel(
                name='NodeEvent',
            ),
        ]),
    ]
