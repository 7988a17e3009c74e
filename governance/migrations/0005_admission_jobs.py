"""An admission request may decide the jobs submitted together with its job (an array's tasks)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0004_mail_delivery'),
    ]

    operations = [
        migrations.AddField(
            model_name='priorityrequest',
            name='jobs',
            field=models.PositiveIntegerField(default=1, help_text='How many jobs an admission decides: the tasks of an array or the replicas of a service submitted together are decided at once.', verbose_name='jobs'),
        ),
    ]
