"""The ESP events' day partitions (decision 122), and the first-event marks, which go with
their message's day."""

from __future__ import annotations

from core.partitions.spec import DayPartitioned, LeafUnique, register

EVENTS = register(DayPartitioned(
    table="feedback_emailevent",
    time_column="received_at",
    # An ESP's repeat of an event is caught in its day and the day before (routing.idempotency_floor).
    leaf_unique=(LeafUnique("event_provider_id_unique", ("provider", "provider_event_id")),),
))
MARKS = register(DayPartitioned(
    table="feedback_messageeventmark", key="message_id", coded_id=False,
    bounds_from="delivery_emailmessage",
))
