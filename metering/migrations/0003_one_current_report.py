import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models


def supersede_duplicates(apps, schema_editor):
    """Parallel first reads could freeze several "current" snapshots of one month: keep the newest."""
    MonthlyReport = apps.get_model("metering", "MonthlyReport")
    seen = set()
    for report in MonthlyReport.objects.filter(superseded_at__isnull=True).order_by("-generated_at", "-pk"):
        key = (report.month, report.tenant_id)
        if key in seen:
            MonthlyReport.objects.filter(pk=report.pk).update(superseded_at=report.generated_at)
        seen.add(key)


class Migration(migrations.Migration):

    dependencies = [
        ('metering', '0002_counter_to_gpuportal_cluster_to_fleet'),
        ('tenants', '0003_quotaburst'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(supersede_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='monthlyreport',
            constraint=models.UniqueConstraint(django.db.models.functions.comparison.Coalesce('tenant', models.Value(0)), models.F('month'), condition=models.Q(('superseded_at__isnull', True)), name='metering_one_current_report'),
        ),
    ]
