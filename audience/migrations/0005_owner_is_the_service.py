"""The owner column names the service (decision 102): only the foreign key is re-pointed."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    # Before the model the field pointed at is renamed ApiClient -> ApiKey.
    run_before = [('clients', '0005_apikey')]

    dependencies = [
        ('audience', '0004_suppression_caused_by'),
        ('clients', '0004_services'),
    ]

    operations = [
        migrations.AlterField(
            model_name='contact',
            name='client',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clients.service'),
        ),
        migrations.AlterField(
            model_name='contactlist',
            name='client',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clients.service'),
        ),
        migrations.AlterField(
            model_name='segment',
            name='client',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clients.service'),
        ),
        migrations.AlterField(
            model_name='suppression',
            name='client',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='clients.service'),
        ),
    ]
