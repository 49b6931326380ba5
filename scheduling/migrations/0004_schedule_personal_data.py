"""A cancelled schedule's inline addresses are removed after its service's retention (decision
132): when it was cancelled, and when they were removed, on the row. Nullable columns without a
default: catalog changes, no rewrite."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0003_schedule_key_type'),
    ]

    operations = [
        migrations.AddField(
            model_name='schedule',
            name='cancelled_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='schedule',
            name='personal_data_removed_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
