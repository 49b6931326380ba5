"""An ended campaign's sent messages per provider and per minute beside its rows per status, so
the statistics API reads them instead of counting the campaign's rows: decision 141."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("analytics", "0004_ended_campaign_counts")]

    operations = [
        migrations.AddField(
            model_name="endedcampaigncounts",
            name="sent_by_provider",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="endedcampaigncounts",
            name="sent_by_minute",
            field=models.JSONField(blank=True, help_text="{ISO UTC minute: sent}", null=True),
        ),
    ]
