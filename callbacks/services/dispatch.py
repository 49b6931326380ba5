"""The driver: which endpoints have settled events waiting, and one task for each.

Run by the scheduler's lock holder in its sweep thread every few seconds
(scheduling/extensions.py). One statement finds the enabled endpoints that are not backing off
and have an event of their types past their cursor and below the log's horizon, and holds each
(`next_attempt_at` a little ahead) as it publishes its task, so a backlog of the callbacks pool
is not fed a second task per endpoint every sweep. A task that is lost (a worker killed) is
published again when the hold runs out.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.priorities import CALLBACKS_QUEUE
from core.throttle import AtMostEvery
from eventlog.selectors import HORIZON_SQL

logger = logging.getLogger(__name__)

DISPATCH_HOLD_SECONDS = 60
DELIVER_TASK = "callbacks.deliver_endpoint"

_DUE = f"""
UPDATE callbacks_webhookendpoint AS e SET next_attempt_at = now() + interval '{DISPATCH_HOLD_SECONDS} seconds'
WHERE e.enabled AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= now())
  AND (e.lease_until IS NULL OR e.lease_until < now())
  AND EXISTS (
    SELECT 1 FROM eventlog_serviceevent s
    WHERE s.service_id = e.service_id
      AND (s.txid, s.id) > (e.cursor_txid::text::xid8, e.cursor_id)
      AND s.txid < {HORIZON_SQL}
      AND s.type = ANY(e.event_types))
RETURNING e.id
"""


def endpoints_due_claim() -> list[int]:
    """Endpoints with deliverable events, each held for DISPATCH_HOLD_SECONDS."""
    with connection.cursor() as cur:
        cur.execute(_DUE)
        return [row[0] for row in cur.fetchall()]


def deliver_publish(endpoint_id: int) -> None:
    current_app.send_task(DELIVER_TASK, args=(endpoint_id,), queue=CALLBACKS_QUEUE)


EXPIRY_EVERY_SECONDS = 60.0
EXPIRY_BATCH = 5000
_expiry_throttle = AtMostEvery(EXPIRY_EVERY_SECONDS)

# Oldest first by id (ids grow with time): the scan stops after the batch, so no index on
# created_at is needed and a sweep never deletes more than one batch.
_EXPIRE = """
DELETE FROM callbacks_endpointdelivery WHERE id IN (
  SELECT id FROM callbacks_endpointdelivery WHERE created_at < %s ORDER BY id LIMIT %s)
"""


def deliveries_expire() -> int:
    """Forget delivery-log rows older than NOTIFIER_CALLBACKS_LOG_DAYS, one bounded batch."""
    cutoff = timezone.now() - timedelta(days=settings.NOTIFIER_CALLBACKS_LOG_DAYS)
    with connection.cursor() as cur:
        cur.execute(_EXPIRE, [cutoff, EXPIRY_BATCH])
        return cur.rowcount


def callbacks_dispatch_sweep() -> int:
    """Publish a delivery for every endpoint with events waiting; returns how many. Once a
    minute, also expire a batch of the delivery log."""
    if _expiry_throttle.due():
        deliveries_expire()
    due = endpoints_due_claim()
    for endpoint_id in due:
        deliver_publish(endpoint_id)
    if due:
        logger.debug("published %d callback deliveries", len(due))
    return len(due)
