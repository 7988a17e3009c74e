# Mail sent for an event, once.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

KINDS = [('request_submitted', 'A request waits for my decision'), ('request_decided', 'My request was decided or expired'), ('job_started', 'My job started'), ('job_failed', 'My job failed'), ('job_preempted', 'My job was preempted'), ('job_succeeded', 'My job succeeded'), ('job_requeued', 'My job was requeued'), ('job_cancelled', 'Someone else cancelled my job'), ('reclamation_warning', 'My idle job will be reclaimed'), ('reclamation_action', 'My idle job was reclaimed')]


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0003_notification_kind_job_succeeded'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
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
        migrations.CreateModel(
            name='MailDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(max_length=120, verbose_name='event')),
                ('address', models.EmailField(max_length=254, verbose_name='address')),
                ('subject', models.CharField(max_length=250, verbose_name='subject')),
                ('body', models.TextField(verbose_name='body')),
                ('created', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('sent_at', models.DateTimeField(blank=True, null=True, verbose_name='sent')),
                ('tries', models.PositiveSmallIntegerField(default=0, verbose_name='tries')),
                ('last_error', models.TextField(blank=True, verbose_name='last error')),
                ('notification', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='governance.notification')),
                ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'mail delivery',
                'verbose_name_plural': 'mail deliveries',
                'constraints': [models.UniqueConstraint(fields=('event', 'recipient'), name='mail_delivery_once_per_event')],
            },
        ),
    ]
