"""The provider-neutral event record every ESP's webhook normaliser produces.

Each ESP package (`delivery/providers/<esp>/webhook.py`) turns its verified payloads into
`NormalizedEvent`s; feedback stores and applies them without knowing which ESP spoke. The record
lives here, below feedback, because the normalisers live with their ESP's send code in delivery
and feedback's models take `EventType` as their choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from django.db import models

BounceType = Literal["hard", "soft"]
# Why an ESP dropped a message without trying: the address is on its bounce, unsubscribe or
# spam-report list. Other drop reasons (invalid address, sandbox, virus, ...) carry none.
DropReason = Literal["bounce", "unsubscribe", "complaint"]


class EventType(models.TextChoices):
    """The one list of event types: EmailEvent.event_type takes its choices from it."""

    SENT = "sent"
    DELIVERED = "delivered"
    DEFERRED = "deferred"
    BOUNCED = "bounced"
    DROPPED = "dropped"  # rejected/dropped by the ESP before any delivery attempt
    OPENED = "opened"
    CLICKED = "clicked"
    COMPLAINED = "complained"
    UNSUBSCRIBED = "unsubscribed"


class NormalizationError(ValueError):
    """A verified payload did not have the documented shape."""


@dataclass(frozen=True, slots=True)
class NormalizedEvent:
    provider: str  # the ESP's name in the registry (delivery/providers/__init__.py)
    event_type: EventType
    recipient: str
    occurred_at: datetime  # always timezone-aware (UTC)
    provider_message_id: str | None
    notifier_message_id: str | None  # our Message id, echoed back under MESSAGE_ID_KEY
    provider_event_id: str  # idempotency key, unique per provider
    raw: dict[str, Any] = field(repr=False)
    bounce_type: BounceType | None = None  # set only when event_type is BOUNCED
    url: str | None = None  # set only when event_type is CLICKED
    drop_reason: DropReason | None = None  # set only when event_type is DROPPED


# ------------------------------------------------------------------------------ payload helpers


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def require(mapping: dict[str, Any], key: str) -> Any:
    value = mapping.get(key)
    if value is None or value == "":
        raise NormalizationError(f"missing {key!r}")
    return value


def our_id(value: Any) -> str | None:
    """Our message id as the event carries it back (a string or a number), or None."""
    return str(value) if value is not None else None


def iso_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise NormalizationError(f"bad timestamp {value!r}") from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def epoch_time(value: Any) -> datetime:
    # SendGrid: integer seconds; Mailgun: float seconds with microseconds.
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError, OverflowError) as err:
        raise NormalizationError(f"bad timestamp {value!r}") from err
