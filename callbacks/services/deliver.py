"""Delivering one endpoint's events: batches posted in log order, the cursor moved on a 2xx only.

At most one delivery per endpoint is in flight: it runs under a lease taken by one short UPDATE
(callbacks/models.py says why not a row lock), and every write it makes (the cursor, the
failure count, a disable) names the lease's token, so a delivery whose lease ran out (a
stalled worker) changes nothing. The cursor move also names the cursor it started from: a
replay that moved it meanwhile wins.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Q
from django.utils import timezone

from callbacks.addresses import AddressRefusedError, parse_target
from callbacks.http import PostResult, post
from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.endpoints import endpoint_disable_failing, secrets_in_use
from callbacks.signing import signed_headers
from eventlog.cursor import EventCursor
from eventlog.models import ServiceEvent
from eventlog.payloads import event_payload
from eventlog.selectors import cursor_below, cursor_of, events_after, horizon_xid

logger = logging.getLogger(__name__)

# A recovered receiver waits at most this long for its next try (GOV.UK Notify: 5 minutes apart);
# a day of failures is then ~300 POSTs per endpoint, one batch each.
BACKOFF_CAP_SECONDS = 5 * 60
BUDGET_SECONDS = 10.0  # one task's delivering time; it publishes itself again if more is left


@dataclass
class DeliveryReport:
    posts: int = 0
    delivered: int = 0  # events the receiver took (2xx)
    failed: bool = False
    disabled: bool = False
    more: bool = False  # the budget ran out with events left
    busy: bool = False  # another delivery holds the lease, or the endpoint is disabled


def batch_body(events: list[ServiceEvent], max_bytes: int) -> tuple[bytes, list[ServiceEvent]]:
    """`{"events": [...]}` of the first events that fit in `max_bytes` (always at least one)."""
    parts: list[bytes] = []
    size = len(b'{"events":[]}')
    for event in events:
        part = json.dumps(event_payload(event), cls=DjangoJSONEncoder, separators=(",", ":")).encode()
        if parts and size + len(part) + 1 > max_bytes:
            break
        parts.append(part)
        size += len(part) + 1
    return b'{"events":[' + b",".join(parts) + b"]}", events[:len(parts)]


def backoff_seconds(failures: int) -> float:
    """Exponential from NOTIFIER_CALLBACKS_BACKOFF_SECONDS, capped, with jitter (0.5-1.5x) so
    endpoints that failed together do not all come back in the same second."""
    base = settings.NOTIFIER_CALLBACKS_BACKOFF_SECONDS * 2 ** min(failures - 1, 20)
    return min(BACKOFF_CAP_SECONDS, base) * random.uniform(0.5, 1.5)  # jitter, not a secret


def _lease_take(endpoint_id: int, token: uuid.UUID, budget: float) -> bool:
    now = timezone.now()
    hold = timedelta(seconds=budget + 2 * settings.NOTIFIER_CALLBACKS_TIMEOUT_SECONDS + 30)
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    return bool(WebhookEndpoint.objects.filter(free, pk=endpoint_id, enabled=True).update(
        lease_token=token, lease_until=now + hold))


def _lease_release(endpoint_id: int, token: uuid.UUID) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint_id, lease_token=token).update(
        lease_token=None, lease_until=None)


def _move_cursor(endpoint: WebhookEndpoint, token: uuid.UUID, new: EventCursor, **also: object) -> bool:
    """Fenced by the lease and by the cursor the delivery read from (a replay may have moved it)."""
    return bool(WebhookEndpoint.objects.filter(
        pk=endpoint.pk, lease_token=token, cursor_txid=endpoint.cursor_txid, cursor_id=endpoint.cursor_id,
    ).update(cursor_txid=new.txid, cursor_id=new.id, **also))


def _post_batch(
    endpoint: WebhookEndpoint, body: bytes, batch: list[ServiceEvent], now: datetime,
) -> PostResult:
    try:
        target = parse_target(endpoint.url)
    except AddressRefusedError as refused:
        return PostResult(None, 0, f"refused: {refused}")
    headers = signed_headers(message_id=f"msg_{endpoint.pk}_{batch[0].id}_{batch[-1].id}", at=now, body=body,
                             secrets_in_use=secrets_in_use(endpoint, now))
    return post(target, body, headers, settings.NOTIFIER_CALLBACKS_TIMEOUT_SECONDS)


def _record_failure(endpoint: WebhookEndpoint, token: uuid.UUID, result: PostResult, now: datetime) -> bool:
    """Back off, or disable once the endpoint has failed for the whole retry period. True if disabled."""
    failing_since = endpoint.failing_since or now
    if now - failing_since >= timedelta(hours=settings.NOTIFIER_CALLBACKS_RETRY_HOURS):
        if endpoint_disable_failing(endpoint_id=endpoint.pk, lease_token=token):
            logger.error(
                "CALLBACK ENDPOINT DISABLED: endpoint %s of service %s (%s) failed every delivery since %s "
                "(%d attempts; last: %s); the service re-enables it with PATCH /api/v1/webhooks/%s "
                "{\"enabled\": true} and it catches up from the event log",
                endpoint.pk, endpoint.service_id, endpoint.url, failing_since.isoformat(),
                endpoint.failed_attempts + 1, result.error or result.status_code, endpoint.pk)
            return True
        return False
    failures = endpoint.failed_attempts + 1
    WebhookEndpoint.objects.filter(pk=endpoint.pk, lease_token=token).update(
        failing_since=failing_since, failed_attempts=failures,
        next_attempt_at=now + timedelta(seconds=backoff_seconds(failures)))
    return False


def _skip_ahead(endpoint: WebhookEndpoint, token: uuid.UUID, horizon_xid: int) -> None:
    """Nothing of its types is left: move its cursor to the horizon taken before the read, so
    the next read (and the sweep's check) does not scan other types' events again. Every event
    of a transaction older than that horizon was visible to the read, which found none."""
    horizon = cursor_below(horizon_xid)
    current = EventCursor(endpoint.cursor_txid, endpoint.cursor_id)
    if horizon > current:
        _move_cursor(endpoint, token, horizon, next_attempt_at=None)
    else:
        WebhookEndpoint.objects.filter(pk=endpoint.pk, lease_token=token).update(next_attempt_at=None)


def endpoint_deliver(endpoint_id: int, budget_seconds: float = BUDGET_SECONDS) -> DeliveryReport:
    """Post the endpoint's pending events, batch after batch, until none is left, a POST fails
    or the budget is spent."""
    report = DeliveryReport()
    token = uuid.uuid4()
    if not _lease_take(endpoint_id, token, budget_seconds):
        report.busy = True
        return report
    try:
        _deliver_under_lease(endpoint_id, token, time.monotonic() + budget_seconds, report)
    finally:
        _lease_release(endpoint_id, token)
    return report


def _deliver_under_lease(endpoint_id: int, token: uuid.UUID, deadline: float, report: DeliveryReport) -> None:
    while True:
        endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, lease_token=token, enabled=True).first()
        if endpoint is None:  # deleted, disabled, or the lease ran out
            return
        horizon = horizon_xid()
        cursor = EventCursor(endpoint.cursor_txid, endpoint.cursor_id)
        events = events_after(endpoint.service_id, cursor, settings.NOTIFIER_CALLBACKS_BATCH_EVENTS,
                              endpoint.event_types)
        if not events:
            _skip_ahead(endpoint, token, horizon)
            return
        body, batch = batch_body(events, settings.NOTIFIER_CALLBACKS_BATCH_BYTES)
        now = timezone.now()
        result = _post_batch(endpoint, body, batch, now)
        report.posts += 1
        EndpointDelivery.objects.create(
            endpoint_id=endpoint.pk, attempt=endpoint.failed_attempts + 1, event_ids=[e.id for e in batch],
            status_code=result.status_code, latency_ms=result.latency_ms, error=result.error)
        if not result.ok:
            report.failed = True
            report.disabled = _record_failure(endpoint, token, result, now)
            return
        if not _move_cursor(endpoint, token, cursor_of(batch[-1]), failing_since=None, failed_attempts=0):
            return  # replayed meanwhile: the next delivery starts from the replay's cursor
        report.delivered += len(batch)
        if time.monotonic() >= deadline:
            report.more = True
            return
