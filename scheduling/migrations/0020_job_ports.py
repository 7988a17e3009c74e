# Named ports of a running job.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0019_job_mail'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='ports',
            field=models.JSONField(blank=True, default=list, help_text='Ports the job\'s program serves (TensorBoard, a web UI), each opened through the portal: a list of {"name", "port"} (NamedPort).', verbose_name='named ports'),
        ),
    ]
