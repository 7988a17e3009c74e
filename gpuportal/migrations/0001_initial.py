"""OperationalCounter, moved from metering into the project app (below every other layer). The table keeps its
name: state only."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('metering', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='OperationalCounter',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100)),
                    ('labels', models.CharField(blank=True, help_text='Prometheus label text, e.g. cluster="sim".', max_length=200)),
                    ('value', models.FloatField(default=0)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                ],
                options={
                    'db_table': 'metering_operationalcounter',
                    'constraints': [models.UniqueConstraint(fields=('name', 'labels'), name='operational_counter_unique')],
                },
            ),
        ]),
    ]
