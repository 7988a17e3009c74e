# A job's dependencies on other jobs.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0017_job_asked_cluster'),
    ]

    operations = [
        migrations.AlterField(
            model_name='jobevent',
            name='kind',
            field=models.CharField(choices=[('status', 'Status change'), ('wait_reason', 'Wait reason'), ('fault', 'Hardware fault'), ('hold', 'Hold'), ('approval', 'Approval'), ('reclamation', 'Idle reclamation'), ('executor', 'Cluster action'), ('retry', 'Automatic retry'), ('reconcile', 'Reconciliation'), ('preemption', 'Preemption'), ('dependency', 'Dependency')], default='status', max_length=20, verbose_name='kind'),
        ),
        migrations.AlterField(
            model_name='jobqueuestate',
            name='wait_reason',
            field=models.CharField(blank=True, choices=[('awaiting_approval', 'Awaiting approval'), ('held', 'Held'), ('quota_exhausted', 'Quota exhausted'), ('borrowing_limit', 'Borrowing limit reached'), ('department_quota', 'Department quota exhausted'), ('no_quota', 'No quota for this GPU model'), ('insufficient_gpus', 'Not enough free GPUs'), ('topology', 'Topology constraint cannot be met now'), ('gang_unplaceable', 'Multi-node job cannot be placed whole'), ('no_healthy_node', 'No healthy node matches'), ('never_fits', 'Larger than this cluster can ever hold'), ('priority', 'Higher-priority or fairer job ahead'), ('reserved', 'Capacity reserved for another tenant'), ('preemption_pending', 'Waiting for preempted jobs to release GPUs'), ('host_resources', 'Not enough CPU or memory beside free GPUs'), ('array_limit', 'Its array runs as many tasks as it may'), ('fragmented', 'Enough free GPUs, but scattered over nodes'), ('avoids_all_nodes', 'Every node that could hold it failed it before'), ('avoided_nodes', 'Free GPUs only on nodes it avoids after faults'), ('dependency', 'Waits for another job'), ('dependency_never', 'Dependency never satisfied')], max_length=32, verbose_name='wait reason'),
        ),
        migrations.CreateModel(
            name='JobDependency',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('condition', models.CharField(choices=[('afterok', 'after it succeeds'), ('afterany', 'after it ends, however'), ('afternotok', 'after it fails'), ('aftercorr', 'after the same task of the other array succeeds')], max_length=12, verbose_name='condition')),
                ('whole_array', models.BooleanField(default=False, verbose_name='every task of its array')),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='dependencies', to='scheduling.job')),
                ('on_job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='dependents', to='scheduling.job')),
            ],
            options={
                'verbose_name': 'dependency',
                'verbose_name_plural': 'dependencies',
                'ordering': ['job', 'id'],
                'constraints': [models.UniqueConstraint(fields=('job', 'on_job', 'condition'), name='dependency_unique')],
            },
        ),
    ]
