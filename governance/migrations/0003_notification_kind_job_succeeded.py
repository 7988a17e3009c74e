# A notification for a job that succeeded: a new choice, opt-in (governance.models.OPT_IN_KINDS).

from django.db import migrations, models

KINDS = [('request_submitted', 'A request waits for my decision'), ('request_decided', 'My request was decided or expired'), ('job_started', 'My job started'), ('job_failed', 'My job failed'), ('job_preempted', 'My job was preempted'), ('job_succeeded', 'My job succeeded'), ('reclamation_warning', 'My idle job will be reclaimed'), ('reclamation_action', 'My idle job was reclaimed')]


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0002_idlepolicy_cluster_in_fleet'),
    ]

    operations = [
        migrations.AlterField(
            model_name='notification',
            name='kind',
            field=models.CharField(choices=KINDS, max_length=24, verbose_name='kind'),
        ),
        migrations.AlterField(
            model_name='notificationpreference',
            name='kind',
            field=models.CharField(choices=KINDS, max_length=24),
        ),
    ]
