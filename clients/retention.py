"""Retention per service and stream (issue 30, decision 120).

For each stream of a service (transactional, broadcast: audience.models.Stream, whose values
STREAMS repeats because clients sits below audience; a test holds them equal):

- `personal_data_days`: how long a message keeps its recipient's address, its context, the
  ESP's payloads about it and the address quoted in errors. After that the row stays (statuses,
  timestamps, counts, the service's metadata) with a keyed hash of the address instead
  (core/personal_data.py); `clients.personal_data` runs the removal.
- `metadata_days`: how long the service reads its messages and events at all (GET
  /api/v1/messages, /messages/{id}, /messages/{id}/events, /api/v1/events). Older rows are
  hidden now; they are deleted when the message table is partitioned by time.

A service stores only what it set (`Service.retention`); the rest follows
NOTIFIER_RETENTION_PERSONAL_DAYS / NOTIFIER_RETENTION_METADATA_DAYS. Bounds: 1 <= personal <=
metadata <= MAX_DAYS. A personal retention shorter than the wait of a message the service has
scheduled is refused: a scheduled message is never stripped before it is sent. What "scheduled"
means belongs to the apps above (one-off rows, campaigns): they register a pending horizon here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clients.models import Service

STREAMS = ("transactional", "broadcast")
FIELDS = ("personal_data_days", "metadata_days")
MAX_DAYS = 3650
# A consent event (recipient.*) belongs to no message: it is the broadcast stream's business.
STREAM_OF_RECIPIENT_EVENTS = "broadcast"


@dataclass(frozen=True)
class StreamRetention:
    personal_data_days: int
    metadata_days: int

    def as_dict(self) -> dict[str, int]:
        return {"personal_data_days": self.personal_data_days, "metadata_days": self.metadata_days}


class RetentionRefusedError(ValueError):
    """A retention that may not be set; `field` is its JSON path (retention.<stream>.<field>)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def retention_defaults() -> StreamRetention:
    personal = settings.NOTIFIER_RETENTION_PERSONAL_DAYS
    return StreamRetention(personal, max(personal, settings.NOTIFIER_RETENTION_METADATA_DAYS))


def retention_effective(stored: Mapping[str, Any] | None) -> dict[str, StreamRetention]:
    """Each stream's retention: what the service set, else the defaults. Metadata is never kept
    shorter than personal data (a default moved above a stored value lifts it)."""
    defaults = retention_defaults()
    effective = {}
    for stream in STREAMS:
        own = (stored or {}).get(stream) or {}
        personal = own.get("personal_data_days", defaults.personal_data_days)
        metadata = own.get("metadata_days", defaults.metadata_days)
        effective[stream] = StreamRetention(personal, max(personal, metadata))
    return effective


def retention_of(service: Service) -> dict[str, StreamRetention]:
    return retention_effective(service.retention)


def metadata_visible_since(service: Service, now: datetime | None = None) -> dict[str, datetime]:
    """Per stream, the oldest creation time the service still reads."""
    now = now or timezone.now()
    return {stream: now - timedelta(days=kept.metadata_days)
            for stream, kept in retention_of(service).items()}


# --- What waits to be sent: registered by the apps that schedule ------------------------------

# f(service id, stream) -> the latest time a message of that service and stream waits to be sent
# until, or None when none waits.
PendingHorizon = Callable[[str, str], "datetime | None"]
_horizons: list[PendingHorizon] = []


def register_pending_horizon(horizon: PendingHorizon) -> None:
    if horizon not in _horizons:
        _horizons.append(horizon)


def pending_until(service_id: str, stream: str) -> datetime | None:
    """The latest time a message of this service and stream waits to be sent until."""
    found = [when for horizon in _horizons if (when := horizon(service_id, stream)) is not None]
    return max(found, default=None)


# --- Changing a service's retention -------------------------------------------------------------

def _path(stream: str, field: str) -> str:
    return f"retention.{stream}.{field}"


def _bounded(stream: str, field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RetentionRefusedError(_path(stream, field), "A whole number of days.")
    if not 1 <= value <= MAX_DAYS:
        raise RetentionRefusedError(_path(stream, field), f"Between 1 and {MAX_DAYS} days.")
    return value


def retention_changed(service: Service, change: Mapping[str, Mapping[str, int]], *,
                      now: datetime | None = None) -> dict[str, dict[str, int]]:
    """The service's stored retention with `change` ({stream: {field: days}}) applied, or
    RetentionRefusedError naming the first field at fault (PATCH /service). Writes nothing."""
    stored = {stream: dict(values) for stream, values in (service.retention or {}).items()}
    for stream, values in change.items():
        if stream not in STREAMS:
            raise RetentionRefusedError(f"retention.{stream}",
                                        f"Unknown stream; one of {', '.join(STREAMS)}.")
        for field, value in values.items():
            if field not in FIELDS:
                raise RetentionRefusedError(_path(stream, field), "Unknown field.")
            stored.setdefault(stream, {})[field] = _bounded(stream, field, value)
    given = {stream: set(values) for stream, values in change.items()}
    return _checked(service, stored, given, now or timezone.now())


def retention_replaced(service: Service, stored: Mapping[str, Mapping[str, int]], *,
                       now: datetime | None = None) -> dict[str, dict[str, int]]:
    """`stored` (what the admin's form holds: a field left empty follows the default) checked
    as `retention_changed` checks a change: only what differs from the service's current
    retention is held to the pending schedules."""
    stored = {stream: {field: _bounded(stream, field, value) for field, value in values.items()}
              for stream, values in stored.items() if stream in STREAMS and values}
    before, after = retention_of(service), retention_effective(stored)
    given = {stream: {field for field in FIELDS
                      if getattr(before[stream], field) != getattr(after[stream], field)}
             for stream in STREAMS}
    return _checked(service, stored, given, now or timezone.now())


def _checked(service: Service, stored: dict[str, dict[str, int]], given: Mapping[str, set[str]],
             now: datetime) -> dict[str, dict[str, int]]:
    """metadata >= personal data on the result, and no new personal retention shorter than the
    wait of a message of that stream the service has scheduled; errors name a field in `given`."""
    effective, defaults = retention_effective(stored), retention_defaults()
    for stream, fields in given.items():
        if not fields:
            continue
        kept = effective[stream]
        metadata = stored.get(stream, {}).get("metadata_days", defaults.metadata_days)
        if metadata < kept.personal_data_days:
            field = "metadata_days" if "metadata_days" in fields else "personal_data_days"
            raise RetentionRefusedError(
                _path(stream, field),
                f"metadata_days ({metadata}) must be at least personal_data_days "
                f"({kept.personal_data_days}): a message is not hidden before its personal data is removed.")
        if "personal_data_days" in fields:
            _refuse_shorter_than_pending(service.pk, stream, kept.personal_data_days, now)
    return stored


def _refuse_shorter_than_pending(service_id: str, stream: str, days: int, now: datetime) -> None:
    until = pending_until(service_id, stream)
    if until is None or until - now <= timedelta(days=days):
        return
    needed = math.ceil((until - now) / timedelta(days=1))
    raise RetentionRefusedError(
        _path(stream, "personal_data_days"),
        f"Shorter than your longest pending schedule: a {stream} message waits to be sent until "
        f"{until.isoformat(timespec='seconds')} ({needed} days from now), and a scheduled message "
        f"keeps its personal data until it is sent. Set at least {needed}, or cancel it first.")


def retention_set(*, service: Service, change: Mapping[str, Mapping[str, int]]) -> Service:
    """Apply `change` to the service (locked, checked, saved), or RetentionRefusedError."""
    with transaction.atomic():
        locked = Service.objects.select_for_update().get(pk=service.pk)
        locked.retention = retention_changed(locked, change)
        locked.save(update_fields=["retention"])
    service.retention = locked.retention
    return service
