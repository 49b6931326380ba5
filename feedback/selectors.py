"""Reads of stored ESP events for other apps (no writes here)."""

from __future__ import annotations

from feedback.models import EmailEvent


def stored_events_about(message_ids: list[int]) -> dict[int, dict]:
    """The first stored event about each message (by id), as the evidence that its ESP took it."""
    if not message_ids:
        return {}
    rows = (EmailEvent.objects.filter(message_id__in=message_ids).order_by("message_id", "id")
            .distinct("message_id")
            .values_list("message_id", "provider", "event_type", "provider_event_id", "occurred_at"))
    return {message_id: {"provider": provider, "event": event_type, "provider_event_id": event_id,
                         "occurred_at": occurred_at.isoformat(), "stored_before_held": True}
            for message_id, provider, event_type, event_id, occurred_at in rows}
