"""The Celery application. Queues and pool sizes live in core/priorities.py."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun
from kombu import Queue

from core.broker_compat import harden_redis_channel, reuse_redis_publish_client
from core.pool_shutdown import POOL_PATH

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")

# Every task waits out a database outage instead of being dropped (core/db_outage.py).
app = Celery("notifier", task_cls="core.db_outage:OutageRetryTask")
app.config_from_object("django.conf:settings", namespace="CELERY")


def _declare_queues() -> None:
    from core.priorities import ALL_QUEUES

    app.conf.task_queues = [Queue(name, routing_key=name) for name in ALL_QUEUES]


_declare_queues()
harden_redis_channel()
reuse_redis_publish_client()
# A SIGTERM sent to a whole pool (honcho, systemd, a PaaS) no longer kills its children mid-send:
# `-P prefork` selects this subclass of Celery's prefork pool (core/pool_shutdown.py).
app.conf.worker_pool = POOL_PATH

# Celery's Django fixup closes every database connection before and after each task unless
# CELERY_DB_REUSE_MAX is set, so each task paid a new PostgreSQL backend (a fork, auth, Django's
# session setup): during the million-day run most backends were under 2 s old and 27% of the CPU
# was system time. Connections now live as long as CONN_MAX_AGE says; the handlers below drop
# one that is broken or too old, with CONN_HEALTH_CHECKS, as Django does around a request.
app.conf.CELERY_DB_REUSE_MAX = 2**31


@task_prerun.connect
@task_postrun.connect
def _close_unusable_db_connections(sender: object = None, **_: object) -> None:
    from django.db import close_old_connections

    # Not for a task run eagerly (apply()) inside a caller's transaction, as Celery's fixup.
    if not getattr(getattr(sender, "request", None), "is_eager", False):
        close_old_connections()


app.autodiscover_tasks()
