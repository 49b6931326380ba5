"""The event types a service can receive and read back (docs/api.md "Status callbacks")."""

from __future__ import annotations

from django.db import models


class EventType(models.TextChoices):
    ACCEPTED = "message.accepted"
    SUPPRESSED = "message.suppressed"
    SENT = "message.sent"
    DELIVERED = "message.delivered"
    OPENED = "message.opened"
    CLICKED = "message.clicked"
    BOUNCED = "message.bounced"
    COMPLAINED = "message.complained"
    FAILED = "message.failed"
    DEAD_LETTERED = "message.dead_lettered"
    UNSUBSCRIBED = "recipient.unsubscribed"
    PREFERENCES_CHANGED = "recipient.preferences_changed"


ALL_EVENT_TYPES: tuple[str, ...] = tuple(EventType.values)
