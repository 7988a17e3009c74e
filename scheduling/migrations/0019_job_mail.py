# Mail when a job begins, ends, fails or is requeued.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0018_job_dependencies'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='mail_type',
            field=models.CharField(blank=True, help_text="The events its owner is mailed about (MailType values, comma-separated, as Slurm's --mail-type); empty: as the owner's notification preferences say; NONE: never.", max_length=40, verbose_name='mail when'),
        ),
    ]
