"""The owner column names the service (decision 102): only the foreign key is re-pointed."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    # Before the model the field pointed at is renamed ApiClient -> ApiKey.
    run_before = [('clients', '0005_apikey')]

    dependencies = [
        ('clients', '0004_services'),
        ('templates', '0003_template_owner'),
    ]

    operations = [
        migrations.AlterField(
            model_name='template',
            name='client',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clients.service'),
        ),
    ]
