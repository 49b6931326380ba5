"""The counts of the campaigns the dashboard shows as ended, and their counter (beat, every
minute, on the maintenance queue): decision 140."""

import json

from django.db import migrations, models

TASK = "analytics.count_ended_campaigns"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.get_or_create(
        name="analytics: count the dashboard's ended campaigns",
        # A run missed is made up by the next (it counts whatever is due then).
        defaults={"task": TASK, "interval": every, "queue": "maintenance", "kwargs": json.dumps({}),
                  "expire_seconds": 60},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0003_keep_throughput_schedule"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.CreateModel(
            name="EndedCampaignCounts",
            fields=[
                ("campaign_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("by_status", models.JSONField(default=dict)),
                ("counted_at", models.DateTimeField()),
            ],
            options={"verbose_name_plural": "ended campaign counts"},
        ),
        migrations.RunPython(schedule, unschedule),
    ]
