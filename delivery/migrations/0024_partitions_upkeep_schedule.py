"""Schedule the day partitions' upkeep (beat, hourly, on the maintenance queue): decision 122."""

import json

from django.db import migrations

TASK = "delivery.partitions_upkeep"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=3600, period="seconds")
    PeriodicTask.objects.get_or_create(
        name="delivery: day partitions ahead, expired days dropped",
        defaults={"task": TASK, "interval": every, "queue": "maintenance", "kwargs": json.dumps({})},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("delivery", "0023_day_partitions"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
