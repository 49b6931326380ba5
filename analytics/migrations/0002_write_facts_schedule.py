"""Schedule the daily facts' writer (beat, every 10 minutes, on the maintenance queue): decision 118."""

import json

from django.db import migrations

TASK = "analytics.write_facts"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=600, period="seconds")
    PeriodicTask.objects.get_or_create(
        name="analytics: write the daily facts",
        defaults={"task": TASK, "interval": every, "queue": "maintenance", "kwargs": json.dumps({})},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0001_daily_facts"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
