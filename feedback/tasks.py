"""Celery tasks of the feedback app, on the webhook queue: thin, take ids, call one service.

Publishers name the queue (core.priorities.WEBHOOK_QUEUE); the ops worker consumes it.
"""

from __future__ import annotations

from celery import shared_task

from core.priorities import WEBHOOK_QUEUE
from feedback.services.drain import webhook_deliveries_drain, webhook_task_started
from feedback.services.sandbox import sandbox_events_apply
from feedback.services.statuses import message_statuses_apply
from feedback.services.webhooks import webhook_deliveries_requeue

# A message still SENDING when its events arrive is re-applied after the worker records the
# acceptance; a few tries over ~2 minutes cover any live worker (the claim lease is 60 s).
REAPPLY_DELAYS_SECONDS = (2, 5, 15, 30, 60)


# A database outage retries it until the database is back (the app's task class,
# core/db_outage.py): the stored delivery is processed then, none is dropped.
@shared_task(name="feedback.process_webhook_delivery", ignore_result=True)
def process_webhook_delivery(delivery_id: int) -> dict:
    """Process this stored delivery and whatever else is pending (see services/drain.py)."""
    webhook_task_started()
    report = webhook_deliveries_drain(delivery_id=delivery_id)
    if report.still_sending:
        reapply_message_statuses.apply_async(
            args=(report.still_sending, 0), countdown=REAPPLY_DELAYS_SECONDS[0], queue=WEBHOOK_QUEUE
        )
    return {"batches": report.batches, "events": report.total, "new": report.new, "unknown": report.unknown}


@shared_task(name="feedback.process_sandbox_events", ignore_result=True)
def process_sandbox_events(items: list[list], step: int) -> int:
    """One step of the sandbox's simulated events ([[message id, recipient], ...], issue 27)."""
    report = sandbox_events_apply(items=items, step=step)
    if report.still_sending:
        reapply_message_statuses.apply_async(
            args=(report.still_sending, 0), countdown=REAPPLY_DELAYS_SECONDS[0], queue=WEBHOOK_QUEUE
        )
    return report.new


@shared_task(name="feedback.reapply_message_statuses", ignore_result=True)
def reapply_message_statuses(message_ids: list[int], attempt: int = 0) -> int:
    still_sending = message_statuses_apply(message_ids=message_ids)
    if still_sending and attempt + 1 < len(REAPPLY_DELAYS_SECONDS):
        reapply_message_statuses.apply_async(
            args=(still_sending, attempt + 1), countdown=REAPPLY_DELAYS_SECONDS[attempt + 1],
            queue=WEBHOOK_QUEUE,
        )
    return len(still_sending)


@shared_task(name="feedback.requeue_pending_webhooks", ignore_result=True)
def requeue_pending_webhooks() -> int:
    return webhook_deliveries_requeue()
