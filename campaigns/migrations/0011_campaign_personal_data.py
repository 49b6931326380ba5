"""An ended inline campaign's addresses are removed after its service's retention (decision
130): when, on the row. A nullable column without a default: a catalog change, no rewrite."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0010_campaign_topic'),
    ]

    operations = [
        migrations.AddField(
            model_name='campaign',
            name='personal_data_removed_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
