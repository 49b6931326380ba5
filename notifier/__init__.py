"""notifier: a Django + Celery platform that sends email for other services."""

from notifier.celery import app as celery_app

__all__ = ["celery_app"]
