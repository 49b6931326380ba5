"""The one shape of an event, as `GET /api/v1/events` answers it and the status callbacks post it.

The keys are stable: every message event has every key of `MESSAGE_FIELDS` (null where the type
has nothing to say, e.g. `bounce_type` of a sent message), every recipient event every key of
`RECIPIENT_FIELDS`. Writers store `data` with those keys (`message_data_sql` builds it in the
writer's own statement; `message_data` and `recipient_data` in Python); `event_payload` reads a
stored row back. The event's `id` is the row's id, the receivers' deduplication key.
"""

from __future__ import annotations

from typing import Any

from eventlog.models import ServiceEvent

MESSAGE_FIELDS: tuple[str, ...] = (
    "recipient", "idempotency_key", "campaign_id", "stream", "provider", "error", "bounce_type", "test",
    "metadata",
)
RECIPIENT_FIELDS: tuple[str, ...] = ("recipient", "topic", "subscribed", "source", "campaign_id")


def message_data_sql(**expressions: str) -> str:
    """A message event's `data` as one SQL expression: `jsonb_build_object` over every field of
    MESSAGE_FIELDS, each the writer's SQL expression or NULL. Unknown names are a bug."""
    unknown = set(expressions) - set(MESSAGE_FIELDS)
    if unknown:
        raise ValueError(f"not message event fields: {sorted(unknown)}")
    pairs = ", ".join(f"'{name}', {expressions.get(name, 'NULL')}" for name in MESSAGE_FIELDS)
    return f"jsonb_build_object({pairs})"


def recipient_data_sql(**expressions: str) -> str:
    """A recipient event's `data` as one SQL expression, as `message_data_sql`."""
    unknown = set(expressions) - set(RECIPIENT_FIELDS)
    if unknown:
        raise ValueError(f"not recipient event fields: {sorted(unknown)}")
    pairs = ", ".join(f"'{name}', {expressions.get(name, 'NULL')}" for name in RECIPIENT_FIELDS)
    return f"jsonb_build_object({pairs})"


def message_data(**values: Any) -> dict[str, Any]:
    """A message event's `data` from Python values (missing fields are None)."""
    unknown = set(values) - set(MESSAGE_FIELDS)
    if unknown:
        raise ValueError(f"not message event fields: {sorted(unknown)}")
    return {name: values.get(name) for name in MESSAGE_FIELDS}


def recipient_data(**values: Any) -> dict[str, Any]:
    """A recipient event's `data` (missing fields are None)."""
    unknown = set(values) - set(RECIPIENT_FIELDS)
    if unknown:
        raise ValueError(f"not recipient event fields: {sorted(unknown)}")
    return {name: values.get(name) for name in RECIPIENT_FIELDS}


def event_payload(event: ServiceEvent) -> dict[str, Any]:
    """The event as a client reads it: id (a string: receivers compare it, never add to it),
    type, occurred_at, message_id, then the type's fields in their fixed order."""
    fields = RECIPIENT_FIELDS if event.type.startswith("recipient.") else MESSAGE_FIELDS
    data = event.data or {}
    return {
        "id": str(event.id),
        "type": event.type,
        "occurred_at": event.occurred_at.isoformat().replace("+00:00", "Z"),
        "message_id": event.message_id,
        **{name: data.get(name) for name in fields},
    }
