# The job list's columns a person chose.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_preference_language'),
    ]

    operations = [
        migrations.AddField(
            model_name='preference',
            name='job_columns',
            field=models.JSONField(blank=True, default=list, verbose_name='job list columns'),
        ),
        migrations.AddField(
            model_name='preference',
            name='job_sort',
            field=models.CharField(blank=True, max_length=32, verbose_name='job list order'),
        ),
    ]
