"""Changing a service's endpoints, and keeping the event log's recorded types in step with them.

`RecordedEventTypes` (eventlog) holds the union of the types of the service's endpoints, enabled
or not: a disabled endpoint catches up from the log when it is enabled again, so what it wants
keeps being recorded while it is off (decision 113). It is rewritten in the transaction of
every change, under a lock on the service's row, so two concurrent changes cannot each write a
union that misses the other's types.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from callbacks.models import WebhookEndpoint
from callbacks.signing import new_secret
from clients.models import Service
from eventlog.cursor import EventCursor
from eventlog.models import RecordedEventTypes, ServiceEvent
from eventlog.selectors import settled_horizon_cursor
from eventlog.types import ALL_EVENT_TYPES


def _ordered(types: Iterable[str]) -> list[str]:
    wanted = set(types)
    return [name for name in ALL_EVENT_TYPES if name in wanted]


def recorded_types_sync(service_id: str) -> list[str]:
    """Rewrite the service's recorded types from its endpoints; call inside the change's
    transaction. Returns them."""
    # NO KEY: a plain FOR UPDATE would wait for (and block) every insert that references the
    # service (their FOR KEY SHARE), a long campaign fan-out included.
    Service.objects.select_for_update(no_key=True).filter(pk=service_id).first()
    union: set[str] = set()
    for types in WebhookEndpoint.objects.filter(service_id=service_id).values_list("event_types", flat=True):
        union.update(types)
    if union:
        RecordedEventTypes.objects.update_or_create(service_id=service_id,
                                                    defaults={"types": _ordered(union)})
    else:
        RecordedEventTypes.objects.filter(service_id=service_id).delete()
    return _ordered(union)


def endpoint_create(*, service_id: str, url: str, event_types: list[str]) -> WebhookEndpoint:
    """A new enabled endpoint; it receives what happens from now on (the log's settled horizon)."""
    with transaction.atomic():
        start = settled_horizon_cursor()
        endpoint = WebhookEndpoint.objects.create(
            service_id=service_id, url=url, event_types=_ordered(event_types), secret=new_secret(),
            cursor_txid=start.txid, cursor_id=start.id)
        recorded_types_sync(service_id)
    return endpoint


def endpoint_update(*, endpoint: WebhookEndpoint, changes: dict) -> WebhookEndpoint:
    """Change url, events or enabled. Enabling again resumes from the endpoint's own cursor, so
    it catches up on what it missed while off."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if "url" in changes:
            endpoint.url = changes["url"]
        if "events" in changes:
            endpoint.event_types = _ordered(changes["events"])
        if "enabled" in changes and changes["enabled"] != endpoint.enabled:
            _set_enabled(endpoint, changes["enabled"], WebhookEndpoint.DisabledReason.BY_SERVICE)
        endpoint.save()
        recorded_types_sync(endpoint.service_id)
    return endpoint


def _set_enabled(endpoint: WebhookEndpoint, enabled: bool, reason: str) -> None:
    endpoint.enabled = enabled
    endpoint.disabled_reason = "" if enabled else reason
    endpoint.disabled_at = None if enabled else timezone.now()
    endpoint.failing_since = None
    endpoint.failed_attempts = 0
    endpoint.next_attempt_at = None


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    with transaction.atomic():
        endpoint.delete()
        recorded_types_sync(endpoint.service_id)


def endpoint_disable_failing(*, endpoint_id: int, lease_token: object) -> bool:
    """The retry period ran out: disable it (only under the caller's lease). True if it was."""
    return bool(WebhookEndpoint.objects.filter(pk=endpoint_id, lease_token=lease_token, enabled=True).update(
        enabled=False, disabled_reason=WebhookEndpoint.DisabledReason.FAILING, disabled_at=timezone.now(),
        next_attempt_at=None))


def secret_rotate(*, endpoint: WebhookEndpoint, now: datetime | None = None) -> WebhookEndpoint:
    """A new current secret; the one it replaces keeps signing beside it for the overlap."""
    now = now or timezone.now()
    overlap = timedelta(hours=settings.NOTIFIER_CALLBACKS_SECRET_OVERLAP_HOURS)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        endpoint.previous_secret, endpoint.secret = endpoint.secret, new_secret()
        endpoint.previous_secret_expires_at = now + overlap
        endpoint.save(update_fields=["secret", "previous_secret", "previous_secret_expires_at"])
    return endpoint


def secrets_in_use(endpoint: WebhookEndpoint, now: datetime) -> list[str]:
    """The secrets that sign a request now: the current one, the previous one during its overlap."""
    current = [endpoint.secret]
    expires = endpoint.previous_secret_expires_at
    if endpoint.previous_secret and expires and now < expires:
        current.append(endpoint.previous_secret)
    return current


def replay_cursor(
    *, service_id: str, since: datetime | None = None, event_id: int | None = None,
) -> EventCursor:
    """The cursor just before the service's first event at or after `since` (recorded then), or
    before event `event_id`; the horizon when there is none (nothing to replay)."""
    events = ServiceEvent.objects.filter(service_id=service_id)
    if event_id is not None:
        first = events.filter(pk=event_id).first()
    else:
        first = events.filter(recorded_at__gte=since).order_by("txid", "id").first()
    if first is None:
        return settled_horizon_cursor()
    return EventCursor(first.txid, first.id - 1)


def endpoint_replay(*, endpoint: WebhookEndpoint, cursor: EventCursor) -> WebhookEndpoint:
    """Deliver again from `cursor`: the endpoint's position goes back (at least once: the
    receiver deduplicates by event id) and its next delivery is due at once."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        endpoint.cursor_txid, endpoint.cursor_id = cursor.txid, cursor.id
        endpoint.next_attempt_at = None
        endpoint.save(update_fields=["cursor_txid", "cursor_id", "next_attempt_at"])
    return endpoint
