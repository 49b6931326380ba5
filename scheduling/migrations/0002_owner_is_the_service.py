"""The owner column names the service (decision 102): only the foreign key is re-pointed."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    # Before the model the field pointed at is renamed ApiClient -> ApiKey.
    run_before = [('clients', '0005_apikey')]

    dependencies = [
        ('clients', '0004_services'),
        ('scheduling', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='schedule',
            name='client',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='clients.service'),
        ),
    ]
