"""Celery tasks of the scheduling app: thin wrappers that take ids and call one service."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from scheduling.services.recurring import schedule_run


@shared_task(name="scheduling.run_recurring", ignore_result=True)
def run_recurring(schedule_id: int) -> None:
    """Fired by celery beat (django-celery-beat PeriodicTask) for a recurring schedule."""
    schedule_run(schedule_id=schedule_id, now=timezone.now())
