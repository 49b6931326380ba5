"""Schedules: recurring ones mirrored as django-celery-beat periodic tasks; pause/resume/cancel.

Each beat fire calls `schedule_run`, which first moves `next_run` forward with one guarded
UPDATE (active, and due within RUN_SLACK): a duplicate fire for the same slot, or a fire for a
paused or cancelled schedule, changes nothing and launches nothing.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone as django_timezone
from django_celery_beat.models import CrontabSchedule, PeriodicTask
from rest_framework.exceptions import ValidationError

from clients.key_types import KeyType
from clients.models import Service
from scheduling import extensions, timing
from scheduling.models import Schedule
from scheduling.services.cancel import campaign_messages_cancel

logger = logging.getLogger(__name__)
RUN_SLACK = timedelta(seconds=5)
TASK_NAME = "scheduling.run_recurring"


def next_run_after(schedule: Schedule, now: datetime) -> datetime | None:
    if schedule.type != Schedule.Type.RECURRING:
        return None
    return timing.cron_next_runs(schedule.cron, timing.zone(schedule.timezone), after=now, count=1)[0]


def _crontab(cron: str, tz_name: str) -> CrontabSchedule:
    minute, hour, day_of_month, month_of_year, day_of_week = cron.split(" ")
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year,
        day_of_week=day_of_week, timezone=tz_name,
    )
    return crontab


def schedule_create_recurring(
    *, client: Service | None, name: str, cron: str, timezone: str, definition: dict, now: datetime,
    key_type: str = KeyType.LIVE,
) -> Schedule:
    """Validate (TimingError on `cron` / `timezone`; ValidationError on `definition`, by the
    rules its runs will launch with), then store the schedule (with the definition as the
    validator returns it) and its beat task. `key_type`:
    the creator's key's; every run launches its campaign with it."""
    cron = timing.cron_validate(cron)
    timing.zone(timezone)
    try:
        definition = extensions.validate_definition(definition, client.pk if client else None)
    except ValidationError as exc:
        raise ValidationError({"definition": exc.detail}) from exc
    with transaction.atomic():
        schedule = Schedule.objects.create(
            client=client, name=name, type=Schedule.Type.RECURRING, cron=cron, timezone=timezone,
            definition=definition, key_type=key_type,
        )
        schedule.next_run = next_run_after(schedule, now)
        schedule.periodic_task = PeriodicTask.objects.create(
            name=f"schedule {schedule.pk}: {name}"[:200], task=TASK_NAME, args=json.dumps([schedule.pk]),
            crontab=_crontab(cron, timezone), queue="maintenance", enabled=True,
        )
        schedule.save(update_fields=["next_run", "periodic_task"])
    return schedule


def _set_task_enabled(schedule: Schedule, enabled: bool) -> None:
    task = PeriodicTask.objects.filter(pk=schedule.periodic_task_id).first()
    if task:
        task.enabled = enabled
        task.save()  # save() (not update()) bumps PeriodicTasks.last_update, so beat reloads


def schedule_pause(*, schedule: Schedule) -> Schedule:
    if schedule.status == Schedule.Status.ACTIVE:
        schedule.status = Schedule.Status.PAUSED
        schedule.save(update_fields=["status", "updated_at"])
        _set_task_enabled(schedule, False)
    return schedule


def schedule_resume(*, schedule: Schedule, now: datetime) -> Schedule:
    if schedule.status == Schedule.Status.PAUSED:
        schedule.status = Schedule.Status.ACTIVE
        schedule.next_run = next_run_after(schedule, now) or schedule.next_run
        schedule.save(update_fields=["status", "next_run", "updated_at"])
        _set_task_enabled(schedule, True)
    return schedule


def schedule_cancel(*, schedule: Schedule) -> Schedule:
    """Cancelled for good: the beat task goes, a one-off's waiting messages are cancelled."""
    with transaction.atomic():
        if schedule.status != Schedule.Status.CANCELLED:
            schedule.cancelled_at = django_timezone.now()  # a second cancel keeps the first's clock
        schedule.status = Schedule.Status.CANCELLED
        schedule.next_run = None
        task_id = schedule.periodic_task_id
        schedule.periodic_task = None
        schedule.save(update_fields=["status", "next_run", "periodic_task", "cancelled_at", "updated_at"])
        if task_id:
            PeriodicTask.objects.filter(pk=task_id).delete()
        if schedule.campaign_id and schedule.type != Schedule.Type.RECURRING:
            campaign_messages_cancel(campaign_id=schedule.campaign_id)
            # The one-off schedule's campaign is cancelled with it (extensions.py).
            extensions.cancel_target(schedule.campaign_id)
    return schedule


def _claim_run(schedule_id: int, now: datetime) -> Schedule | None:
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(pk=schedule_id).first()
        if schedule is None or schedule.status != Schedule.Status.ACTIVE:
            return None
        if schedule.next_run and schedule.next_run > now + RUN_SLACK:
            return None  # a duplicate or early fire for a slot already run
        schedule.last_run = now
        schedule.next_run = next_run_after(schedule, now + RUN_SLACK)
        schedule.runs += 1
        schedule.save(update_fields=["last_run", "next_run", "runs", "updated_at"])
        return schedule


def schedule_run(*, schedule_id: int, now: datetime) -> object | None:
    """One run of a recurring schedule: a new campaign from its stored definition."""
    schedule = _claim_run(schedule_id, now)
    if schedule is None:
        logger.info("schedule %s not run (inactive, or this slot already ran)", schedule_id)
        return None
    definition = {**schedule.definition, "schedule_run": {"schedule_id": schedule.pk, "run": schedule.runs,
                                                          "at": now.isoformat()}}
    try:
        # campaigns registers it; the run is of the schedule's key type (a test schedule's
        # campaigns are test campaigns)
        campaign = extensions.launch_run(definition, schedule.client_id, schedule.key_type)
    except ValidationError as exc:
        # e.g. the audience is empty this time: this run sends nothing, the next one may.
        logger.warning("schedule %s run %s launched nothing: %s", schedule.pk, schedule.runs, exc.detail)
        return None
    campaign_id = getattr(campaign, "pk", campaign)
    if isinstance(campaign_id, int):
        Schedule.objects.filter(pk=schedule.pk).update(campaign_id=campaign_id)
    return campaign
