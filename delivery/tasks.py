"""Celery tasks of the delivery app: thin wrappers that take ids and call one service."""

from __future__ import annotations

import logging
import random

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from clients.history_expiry import history_expire
from core import live_counts
from core.live_counts import live_series_add
from core.partitions.upkeep import partitions_ahead
from core.priorities import Priority
from delivery.services.dispatch import messages_enqueue
from delivery.services.send_one import message_send_one
from delivery.services.sending import BatchReport, message_batch_send

logger = logging.getLogger(__name__)


def retry_delay(attempt: int, retry_after: float | None = None) -> float:
    """Capped exponential backoff with full jitter, never sooner than the ESP's Retry-After.

    The cap stays far below the broker's visibility timeout (1 h): a task held longer than that
    is delivered again (celery#2599).
    """
    cap = settings.NOTIFIER_RETRY_CAP_SECONDS
    backoff = random.uniform(0, min(cap, settings.NOTIFIER_RETRY_BASE_SECONDS * 2 ** attempt))
    return min(cap, max(backoff, retry_after or 0))


def defer_delay(wait: float | None, priority: int = 0) -> float:
    """A throttled message comes back when a token or the breaker's probe is due, plus jitter.

    Lower priorities come back later (x1 for P0 up to x2.5 for P3), so when a throttle or an
    outage ends, P0 recovers first instead of racing a wave of bulk batches.
    """
    base = (wait if wait else settings.NOTIFIER_DEFER_SECONDS) * (1 + 0.5 * priority)
    return min(settings.NOTIFIER_RETRY_CAP_SECONDS, base + random.uniform(0, base * 0.2))


def _follow_up(report: BatchReport, priority: int, attempt: int, pinned: str = "") -> None:
    """What the batch left over comes back as new tasks, keeping the batch's pin."""
    if report.retry_ids:
        delay = retry_delay(attempt, report.retry_after_seconds)
        messages_enqueue(message_ids=report.retry_ids, priority=priority, countdown=delay,
                         attempt=attempt + 1, pinned=pinned)
    if report.deferred_ids:
        messages_enqueue(message_ids=report.deferred_ids, priority=priority,
                         countdown=defer_delay(report.defer_seconds, priority), attempt=attempt,
                         pinned=pinned)
    for message_id in report.split_ids:
        messages_enqueue(message_ids=[message_id], priority=priority, attempt=attempt, pinned=pinned)
    if report.republish_ids:
        messages_enqueue(message_ids=report.republish_ids, priority=priority, attempt=attempt,
                         pinned=pinned)


@shared_task(name="delivery.send_batch", bind=True, ignore_result=True)
def send_batch(self, message_ids: list[int], priority: int, attempt: int = 0, pinned: str = "") -> str:
    """Send a batch; transient failures come back as a new task after a short backoff.
    `pinned` names the only provider to use (the re-send of an AMBIGUOUS row: decision 89).

    The summary is a string: Celery reprs every return value for its log line, and its repr
    of a dict cost ~0.1 ms per task in the critical pool (docs/decisions.md 55)."""
    lean = len(message_ids) == 1 and priority <= Priority.HIGH and settings.NOTIFIER_SEND_ONE_LEAN
    if lean and not pinned:
        report = message_send_one(message_id=message_ids[0], token=self.request.id)
    else:
        report = message_batch_send(message_ids=message_ids, token=self.request.id,
                                    priority=priority, pinned=pinned)
    _follow_up(report, priority, attempt, pinned)
    live_series_add({live_counts.SENDS: {Priority(priority).label: report.live_sent},
                     live_counts.PROVIDER_CALLS: report.provider_calls})
    return (f"sent={report.sent} failed={report.failed} retry={len(report.retry_ids)} "
            f"deferred={len(report.deferred_ids)} dead={report.dead_lettered}")


# Beat, hourly (migration 0024), on the maintenance queue: the coming week's day partitions,
# and the days past every service's metadata retention detached and dropped (decision 122).
@shared_task(name="delivery.partitions_upkeep", ignore_result=True)
def partitions_upkeep() -> dict[str, list[str]]:
    created = partitions_ahead()
    dropped = history_expire(timezone.now())
    for kept in (d for d in dropped if d.kept_in_flight):
        logger.warning("partition %s is past retention but holds a message in flight: kept", kept.partition)
    return {"created": created, "dropped": [d.partition for d in dropped if not d.kept_in_flight]}
