"""Celery tasks of the delivery app: thin wrappers that take ids and call one service."""

from __future__ import annotations

import logging
import random

from celery import shared_task

from delivery.services.dispatch import messages_enqueue
from delivery.services.sending import message_batch_send

logger = logging.getLogger(__name__)

# Retry delays stay far below the broker's visibility timeout (1 h): a task held longer
# than that is delivered again (celery#2599). Capped exponential backoff with full jitter.
RETRY_BASE_SECONDS = 2.0
RETRY_CAP_SECONDS = 120.0


def retry_delay(attempt: int, retry_after: float | None = None) -> float:
    backoff = random.uniform(0, min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** attempt))
    return min(RETRY_CAP_SECONDS, max(backoff, retry_after or 0))


@shared_task(name="delivery.send_batch", bind=True, ignore_result=True)
def send_batch(self, message_ids: list[int], priority: int, attempt: int = 0) -> dict:
    """Send a batch; transient failures come back as a new task after a short backoff."""
    report = message_batch_send(message_ids=message_ids, token=self.request.id)
    if report.retry_ids:
        delay = retry_delay(attempt, report.retry_after_seconds)
        messages_enqueue(
            message_ids=report.retry_ids, priority=priority, countdown=delay, attempt=attempt + 1
        )
    return {"sent": report.sent, "failed": report.failed, "retry": len(report.retry_ids)}
