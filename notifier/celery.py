"""The Celery application. Queues and pool sizes live in notifier/priorities.py."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

from notifier.broker_compat import harden_redis_channel

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")

app = Celery("notifier")
app.config_from_object("django.conf:settings", namespace="CELERY")


def _declare_queues() -> None:
    from notifier.priorities import ALL_QUEUES

    app.conf.task_queues = [Queue(name, routing_key=name) for name in ALL_QUEUES]


_declare_queues()
harden_redis_channel()
app.autodiscover_tasks()
