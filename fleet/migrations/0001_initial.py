"""The fleet's models, moved from the scheduling app. Their tables keep their names (db_table), so this
migration changes only Django's state: no table is created, nothing moves."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('scheduling', '0004_kubernetes_dispatch'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='Cluster',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('created', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                    ('last_updated', models.DateTimeField(auto_now=True, verbose_name='last updated')),
                    ('name', models.SlugField(max_length=64, unique=True, verbose_name='name')),
                    ('description', models.TextField(blank=True, verbose_name='description')),
                    ('executor', models.CharField(choices=[('simulated', 'Simulated'), ('kubernetes', 'Kubernetes')], default='simulated', max_length=20, verbose_name='executor')),
                    ('ordering', models.CharField(choices=[('fair_share', 'Priority, then fair share'), ('fifo', 'Arrival order')], default='fair_share', max_length=20, verbose_name='queue order')),
                    ('fair_share_half_life_hours', models.FloatField(default=168, verbose_name='fair-share half-life (hours)')),
                    ('placement', models.CharField(choices=[('pack', 'Pack (tightest domain, fullest nodes)'), ('first_fit', 'First fit')], default='pack', max_length=20, verbose_name='placement')),
                    ('backfill', models.BooleanField(default=True, verbose_name='backfill')),
                    ('preemption', models.BooleanField(default=True, verbose_name='preemption')),
                    ('kubeconfig_path', models.CharField(blank=True, help_text="Empty with 'in cluster' unset: the default kubeconfig.", max_length=500, verbose_name='kubeconfig path')),
                    ('kube_context', models.CharField(blank=True, max_length=200, verbose_name='kubeconfig context')),
                    ('in_cluster', models.BooleanField(default=False, verbose_name='in-cluster service account')),
                    ('namespace_prefix', models.CharField(default='gp-', help_text='One namespace per tenant: prefix + tenant name.', max_length=20, verbose_name='namespace prefix')),
                    ('gpu_share_resources', models.JSONField(blank=True, default=dict, help_text='Extended resources for a share of a GPU, e.g. {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": "{percent}", "nvidia.com/gpucores": "{percent}"} (HAMi).', verbose_name='GPU share resources')),
                    ('tenant_storage_gib', models.PositiveIntegerField(default=0, help_text='0: no per-tenant data claim.', verbose_name='storage claim per tenant (GiB)')),
                    ('storage_class', models.CharField(blank=True, max_length=100, verbose_name='storage class')),
                    ('watch_resource_version', models.CharField(blank=True, editable=False, help_text='Where the pod watch resumes after a restart.', max_length=64)),
                ],
                options={
                    'verbose_name': 'cluster',
                    'verbose_name_plural': 'clusters',
                    'db_table': 'scheduling_cluster',
                    'ordering': ['name'],
                },
            ),
            migrations.CreateModel(
                name='Node',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('created', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                    ('last_updated', models.DateTimeField(auto_now=True, verbose_name='last updated')),
                    ('name', models.CharField(max_length=128, unique=True, verbose_name='name')),
                    ('gpu_model', models.CharField(db_index=True, max_length=64, verbose_name='GPU model')),
                    ('datacenter', models.CharField(max_length=64, verbose_name='datacenter')),
                    ('rack', models.CharField(max_length=64, verbose_name='rack')),
                    ('network_domain', models.CharField(max_length=64, verbose_name='network domain')),
                    ('health', models.CharField(choices=[('healthy', 'Healthy'), ('suspect', 'Suspect'), ('unhealthy', 'Unhealthy')], default='healthy', max_length=20, verbose_name='health')),
                    ('admin_state', models.CharField(choices=[('active', 'Active'), ('cordoned', 'Cordoned'), ('draining', 'Draining')], default='active', max_length=20, verbose_name='admin state')),
                    ('agent_url', models.CharField(blank=True, help_text='Where the node agent answers; empty for a node of the simulated cluster.', max_length=255, verbose_name='agent URL')),
                    ('agent_token_hash', models.CharField(blank=True, editable=False, max_length=64, verbose_name='agent token (SHA-256)')),
                    ('agent_token_version', models.PositiveIntegerField(default=0, editable=False)),
                    ('agent_token_issued_at', models.DateTimeField(blank=True, editable=False, null=True, verbose_name='agent token issued')),
                    ('agent_version', models.CharField(blank=True, max_length=32, verbose_name='agent version')),
                    ('driver_version', models.CharField(blank=True, max_length=32, verbose_name='driver version')),
                    ('cuda_version', models.CharField(blank=True, max_length=16, verbose_name='CUDA version')),
                    ('cpu_milli', models.PositiveIntegerField(default=0, help_text='0: not accounted.', verbose_name='CPU (millicores)')),
                    ('memory_mib', models.PositiveBigIntegerField(default=0, help_text='0: not accounted.', verbose_name='memory (MiB)')),
                    ('last_seen', models.DateTimeField(blank=True, null=True, verbose_name='last seen')),
                    ('last_poll_error', models.TextField(blank=True, verbose_name='last poll error')),
                    ('missed_polls', models.PositiveIntegerField(default=0, verbose_name='missed polls in a row')),
                    ('good_polls', models.PositiveIntegerField(default=0, verbose_name='good polls in a row')),
                    ('last_error_time', models.FloatField(default=0, editable=False, help_text='Time of the newest agent error already processed.')),
                    ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='nodes', to='fleet.cluster')),
                ],
                options={
                    'verbose_name': 'node',
                    'verbose_name_plural': 'nodes',
                    'db_table': 'scheduling_node',
                    'ordering': ['cluster__name', 'datacenter', 'rack', 'name'],
                },
            ),
            migrations.CreateModel(
                name='GPU',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('created', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                    ('last_updated', models.DateTimeField(auto_now=True, verbose_name='last updated')),
                    ('index', models.PositiveSmallIntegerField(verbose_name='index')),
                    ('uuid', models.CharField(max_length=64, unique=True, verbose_name='UUID')),
                    ('model', models.CharField(max_length=64, verbose_name='model')),
                    ('memory_mb', models.PositiveIntegerField(verbose_name='memory (MiB)')),
                    ('health', models.CharField(choices=[('healthy', 'Healthy'), ('suspect', 'Suspect'), ('unhealthy', 'Unhealthy')], default='healthy', max_length=20, verbose_name='health')),
                    ('good_polls', models.PositiveIntegerField(default=0)),
                    ('ecc_dbe', models.PositiveIntegerField(default=0, verbose_name='double-bit ECC errors')),
                    ('ecc_sbe', models.PositiveIntegerField(default=0, verbose_name='single-bit ECC errors')),
                    ('retired_pages', models.PositiveIntegerField(default=0, verbose_name='retired pages')),
                    ('last_xid', models.PositiveIntegerField(blank=True, null=True, verbose_name='last XID')),
                    ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gpus', to='fleet.node')),
                ],
                options={
                    'verbose_name': 'GPU',
                    'verbose_name_plural': 'GPUs',
                    'db_table': 'scheduling_gpu',
                    'ordering': ['node__name', 'index'],
                },
            ),
            migrations.CreateModel(
                name='NodeEvent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField(db_index=True, verbose_name='time')),
                    ('kind', models.CharField(choices=[('health', 'Health'), ('admin', 'Admin action'), ('token', 'Agent token'), ('registration', 'Agent registration')], max_length=20, verbose_name='kind')),
                    ('from_state', models.CharField(blank=True, max_length=20, verbose_name='from')),
                    ('to_state', models.CharField(blank=True, max_length=20, verbose_name='to')),
                    ('reason', models.TextField(verbose_name='reason')),
                    ('data', models.JSONField(blank=True, default=dict)),
                    ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('gpu', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='fleet.gpu')),
                    ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='fleet.node')),
                ],
                options={
                    'db_table': 'scheduling_nodeevent',
                    'ordering': ['-at', '-id'],
                },
            ),
            migrations.CreateModel(
                name='NodeReading',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField()),
                    ('cpu_percent', models.FloatField(null=True)),
                    ('memory_percent', models.FloatField(null=True)),
                    ('net_rx_bytes_per_s', models.BigIntegerField(null=True)),
                    ('net_tx_bytes_per_s', models.BigIntegerField(null=True)),
                    ('ib_rx_bytes_per_s', models.BigIntegerField(null=True)),
                    ('ib_tx_bytes_per_s', models.BigIntegerField(null=True)),
                    ('disk_read_bytes_per_s', models.BigIntegerField(null=True)),
                    ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='readings', to='fleet.node')),
                ],
                options={
                    'db_table': 'scheduling_nodereading',
                },
            ),
            migrations.CreateModel(
                name='GpuReading',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField()),
                    ('utilization_pct', models.PositiveSmallIntegerField(null=True)),
                    ('memory_used_mb', models.PositiveIntegerField(null=True)),
                    ('temperature_c', models.SmallIntegerField(null=True)),
                    ('power_w', models.FloatField(null=True)),
                    ('gpu', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='readings', to='fleet.gpu')),
                ],
                options={
                    'db_table': 'scheduling_gpureading',
                    'indexes': [models.Index(fields=['gpu', 'at'], include=('utilization_pct',), name='gpureading_gpu_at_util'), models.Index(fields=['at'], name='scheduling__at_a059d3_idx')],
                },
            ),
            migrations.AddConstraint(
                model_name='gpu',
                constraint=models.UniqueConstraint(fields=('node', 'index'), name='gpu_unique_index_per_node'),
            ),
            migrations.AddIndex(
                model_name='nodereading',
                index=models.Index(fields=['node', 'at'], name='scheduling__node_id_aa0d53_idx'),
            ),
            migrations.AddIndex(
                model_name='nodereading',
                index=models.Index(fields=['at'], name='scheduling__at_d12d2e_idx'),
            ),
        ]),
    ]
