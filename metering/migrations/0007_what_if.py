# What-if runs: a month's demand replayed with one change.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('metering', '0006_slurm_accounting'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='WhatIfRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateField(help_text='First day of the month replayed.', verbose_name='month')),
                ('kind', models.CharField(choices=[('change', 'Change'), ('sizing', 'Capacity sizing'), ('backtest', 'Backtest')], default='change', max_length=16, verbose_name='kind')),
                ('change', models.JSONField(blank=True, default=dict, verbose_name='change')),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=16, verbose_name='status')),
                ('progress', models.FloatField(default=0, help_text='Share done, 0 to 1.', verbose_name='progress')),
                ('result', models.JSONField(blank=True, null=True, verbose_name='result')),
                ('error', models.TextField(blank=True, verbose_name='error')),
                ('created', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('started_at', models.DateTimeField(blank=True, null=True, verbose_name='started')),
                ('finished_at', models.DateTimeField(blank=True, null=True, verbose_name='finished')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'what-if run',
                'verbose_name_plural': 'what-if runs',
                'ordering': ['-created', '-id'],
                'indexes': [models.Index(fields=['month', 'kind', 'status'], name='metering_wh_month_f7755e_idx')],
            },
        ),
    ]
