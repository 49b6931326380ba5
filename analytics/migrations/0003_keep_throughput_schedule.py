"""Schedule the throughput minutes' keeper (beat, every minute, on the maintenance queue):
decision 135."""

import json

from django.db import migrations

TASK = "analytics.keep_throughput_minutes"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.get_or_create(
        name="analytics: keep the dashboard's throughput minutes",
        # A run missed is made up by the next (it counts from the first minute not kept): one
        # that waited longer than the interval is dropped rather than queued behind the others.
        defaults={"task": TASK, "interval": every, "queue": "maintenance", "kwargs": json.dumps({}),
                  "expire_seconds": 60},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0002_write_facts_schedule"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
