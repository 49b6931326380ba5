"""One message's history (GET /api/v1/messages/{id}/events), from what is already stored: the
message row's timestamps, its provider calls (DeliveryAttempt), the ESP's events about it
(EmailEvent), the ambiguity log, its dead letter, and the service's event log (ServiceEvent) when
that recorded any. Types are the event log's (`message.sent`...); a type the event log holds for
this message is taken from it alone, so a callback's event and this history never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from delivery.models import AmbiguityRecord, DeadLetter, DeliveryAttempt, EmailMessage
from eventlog.models import ServiceEvent
from feedback.models import EmailEvent

# Each source read at most this many rows (opens and clicks can repeat without bound).
PER_SOURCE = 200
_STAMPED = (("sent_at", "message.sent"), ("delivered_at", "message.delivered"),
            ("opened_at", "message.opened"), ("clicked_at", "message.clicked"),
            ("bounced_at", "message.bounced"))


@dataclass(frozen=True)
class HistoryEvent:
    type: str
    at: datetime
    source: str  # message | attempt | esp_event | ambiguity | dead_letter | event_log
    data: dict[str, Any] = field(default_factory=dict)


def _from_row(message: EmailMessage) -> list[HistoryEvent]:
    accepted = {"status": "SUPPRESSED"} if message.error == "suppressed" else {}
    events = [HistoryEvent("message.accepted", message.created_at, "message", accepted)]
    if message.scheduled_for:
        events.append(HistoryEvent("message.scheduled", message.created_at, "message",
                                   {"scheduled_for": message.scheduled_for.isoformat()}))
    for column, kind in _STAMPED:
        at = getattr(message, column)
        if at is not None:
            data = {"provider": message.provider} if kind == "message.sent" else {}
            events.append(HistoryEvent(kind, at, "message", data))
    return events


def _attempts(message_id: int) -> list[HistoryEvent]:
    rows = DeliveryAttempt.objects.filter(message_id=message_id).order_by("id")[:PER_SOURCE]
    return [HistoryEvent("message.attempt", row.created_at, "attempt", {
        "provider": row.provider, "outcome": row.outcome, "response_code": row.response_code,
        "error": row.error, "duration_ms": row.duration_ms}) for row in rows]


def _esp_events(message_id: int) -> list[HistoryEvent]:
    rows = EmailEvent.objects.filter(message_id=message_id).order_by("occurred_at", "id")[:PER_SOURCE]
    return [HistoryEvent(f"message.{row.event_type}", row.occurred_at, "esp_event", {
        key: value for key, value in (("provider", row.provider), ("bounce_type", row.bounce_type),
                                      ("url", row.url)) if value}) for row in rows]


def _held(message_id: int) -> list[HistoryEvent]:
    rows = AmbiguityRecord.objects.filter(message_id=message_id).order_by("id")[:PER_SOURCE]
    return [HistoryEvent(f"message.{row.kind}", row.created_at, "ambiguity",
                         {"reason": row.reason, "provider": row.provider}) for row in rows]


def _dead_letters(message_id: int) -> list[HistoryEvent]:
    rows = DeadLetter.objects.filter(message_id=message_id).order_by("id")[:PER_SOURCE]
    return [HistoryEvent("message.dead_lettered", row.created_at, "dead_letter",
                         {"error": row.final_error, **({"requeued_at": row.requeued_at.isoformat()}
                                                       if row.requeued_at else {})}) for row in rows]


def _event_log(message: EmailMessage) -> list[HistoryEvent]:
    # Reads (service, message_id) through the service's own rows; no index leads with the
    # message id, so this is bounded by PER_SOURCE and by the service's index.
    rows = (ServiceEvent.objects.filter(service_id=message.client_id, message_id=message.pk)
            .order_by("occurred_at", "id")[:PER_SOURCE])
    return [HistoryEvent(row.type, row.occurred_at, "event_log", row.data) for row in rows]


def message_history(message: EmailMessage) -> list[HistoryEvent]:
    """Everything stored about `message`, oldest first."""
    logged = _event_log(message)
    logged_types = {event.type for event in logged}
    derived = [*_from_row(message), *_attempts(message.pk), *_esp_events(message.pk),
               *_held(message.pk), *_dead_letters(message.pk)]
    # The ESP's own event is the better record of a stamped time: drop the stamp it repeats.
    from_esp = {event.type for event in derived if event.source == "esp_event"}
    derived = [event for event in derived if event.type not in logged_types
               and not (event.source == "message" and event.type in from_esp)]
    events = [*derived, *logged]
    return sorted(events, key=lambda event: event.at)
