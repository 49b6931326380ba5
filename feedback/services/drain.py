"""One webhook task drains many deliveries: fewer broker round trips, bigger batches.

Mailgun and SNS POST one event per request. Publishing one task per request cost ~9 ms of the
request (measured) and left each task a batch of one. Instead the view publishes a task only
when none is waiting to start, and a task drains pending deliveries in coalesced batches.

    notifier:feedback:webhook-task-scheduled   set (NX, TTL) by the view when it publishes;
                                               deleted by the task when it starts

Why nothing is missed: a view that finds the key set knows a task has been published and has
not started yet; that task starts after this row committed, so it sees the row. If the task is
lost, the key expires (TTL) and the requeue sweep publishes pending rows again after 60 s.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

import redis
from django.db import transaction

from core.redis_client import get_redis, redis_key
from feedback.models import WebhookDelivery
from feedback.services.webhooks import webhook_delivery_enqueue, webhook_delivery_process

logger = logging.getLogger(__name__)
SCHEDULE_TTL_SECONDS = 30
MAX_BATCHES_PER_TASK = 20  # then hand over to a fresh task, so other work on the queue runs


@dataclass
class DrainReport:
    batches: int = 0
    total: int = 0
    new: int = 0
    unknown: int = 0
    still_sending: list[int] = field(default_factory=list)


def _scheduled_key() -> str:
    return redis_key("feedback", "webhook-task-scheduled")


def webhook_task_schedule(*, delivery_id: int) -> bool:
    """Make sure a task will process this (committed) delivery; publish only if none waits."""
    try:
        if not get_redis().set(_scheduled_key(), delivery_id, nx=True, ex=SCHEDULE_TTL_SECONDS):
            return True
    except redis.RedisError:
        logger.warning("webhook task flag unavailable; publishing anyway")
    published = webhook_delivery_enqueue(delivery_id=delivery_id)
    if not published:
        with contextlib.suppress(redis.RedisError):
            get_redis().delete(_scheduled_key())
    return published


def webhook_task_started() -> None:
    """Called first by the task: rows committed from now on need (and get) a new task."""
    with contextlib.suppress(redis.RedisError):
        get_redis().delete(_scheduled_key())


def _next_pending() -> int | None:
    with transaction.atomic():
        row = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(status=WebhookDelivery.Status.PENDING).order_by("id").values_list("id", flat=True).first()
        )
    return row


def webhook_deliveries_drain(*, delivery_id: int, max_batches: int = MAX_BATCHES_PER_TASK) -> DrainReport:
    """Process this delivery and then whatever is pending, batch by batch (bounded)."""
    report = DrainReport()
    next_id: int | None = delivery_id
    while next_id is not None and report.batches < max_batches:
        batch = webhook_delivery_process(delivery_id=next_id)
        report.batches += 1
        if batch is not None:
            report.total += batch.total
            report.new += batch.new
            report.unknown += batch.unknown
            report.still_sending += batch.still_sending
        next_id = _next_pending()
    if next_id is not None:
        # More to do: a fresh task continues (published unconditionally, so tasks running in
        # parallel each keep a successor and the pool stays busy).
        webhook_delivery_enqueue(delivery_id=next_id)
    return report
