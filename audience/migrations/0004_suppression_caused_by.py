"""Suppressions record the client that caused them: it (or the admin scope) lists and removes them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audience', '0003_audience_owner'),
        ('clients', '0003_idempotency_record'),
    ]

    operations = [
        migrations.AddField(
            model_name='suppression',
            name='client',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='clients.apiclient'),
        ),
        migrations.AddIndex(
            model_name='suppression',
            index=models.Index(fields=['client', 'email'], name='suppression_client_email_idx'),
        ),
    ]
