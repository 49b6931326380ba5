"""Templates belong to an API client; names are unique per client (decision 50)."""

import django.db.models.deletion
from django.db import migrations, models

from clients.legacy_owner import owner_backfill


def backfill(apps, schema_editor):
    owner_backfill(apps, "templates", ["Template"])


class Migration(migrations.Migration):
    # Its owner backfill writes API clients as they were before services (decision 102).
    run_before = [('clients', '0004_services')]

    dependencies = [
        ('clients', '0003_idempotency_record'),
        ('templates', '0002_template_locales'),
    ]

    operations = [
        migrations.AddField(
            model_name='template',
            name='client',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name='+', to='clients.apiclient'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='template',
            name='client',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+',
                                    to='clients.apiclient'),
        ),
        migrations.AlterField(
            model_name='template',
            name='name',
            field=models.SlugField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name='template',
            constraint=models.UniqueConstraint(fields=('client', 'name'), name='template_client_name_unique'),
        ),
    ]
