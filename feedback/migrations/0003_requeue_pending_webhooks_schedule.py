"""Schedule the sweep that re-publishes webhook deliveries whose task was lost (beat, every 60 s)."""

import json

from django.db import migrations

TASK = "feedback.requeue_pending_webhooks"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.get_or_create(
        name="feedback: requeue pending webhooks",
        defaults={"task": TASK, "interval": every, "queue": "email-webhook", "kwargs": json.dumps({})},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("feedback", "0002_feedback_loop"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
