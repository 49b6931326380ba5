"""The campaigns' minute tally of ESP events (decision 125), filled by 0010."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ('feedback', '0008_day_partitions'),
    ]

    operations = [
        migrations.CreateModel(
            name='CampaignEventMinute',
            fields=[
                ('pk', models.CompositePrimaryKey('campaign_id', 'minute', 'provider', 'kind', blank=True, editable=False, primary_key=True, serialize=False)),
                ('campaign_id', models.BigIntegerField()),
                ('minute', models.DateTimeField()),
                ('provider', models.CharField(blank=True, default='', max_length=20)),
                ('kind', models.CharField(max_length=16)),
                ('events', models.IntegerField(default=0)),
                ('firsts', models.IntegerField(default=0)),
            ],
        ),
    ]
