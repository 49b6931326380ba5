"""What ESPs reported about sent messages."""

from __future__ import annotations

from django.db import models


class EmailEvent(models.Model):
    """One provider event (delivered, opened, bounced...) about one message.

    `provider_event_id` is unique per provider, so an event delivered many times is stored once.
    `message` is null when the event names a message we do not know (kept and reported).
    """

    class Type(models.TextChoices):
        SENT = "sent"
        DELIVERED = "delivered"
        DEFERRED = "deferred"
        BOUNCED = "bounced"
        DROPPED = "dropped"
        OPENED = "opened"
        CLICKED = "clicked"
        COMPLAINED = "complained"
        UNSUBSCRIBED = "unsubscribed"

    message = models.ForeignKey(
        "delivery.EmailMessage", null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    provider = models.CharField(max_length=20)
    provider_event_id = models.CharField(max_length=255)
    event_type = models.CharField(max_length=16, choices=Type.choices)
    bounce_type = models.CharField(max_length=8, blank=True, default="")
    recipient = models.EmailField(max_length=254, blank=True, default="")
    url = models.TextField(blank=True, default="")
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)
    raw = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "provider_event_id"], name="event_provider_id_unique"
            )
        ]
        indexes = [
            models.Index(fields=["message", "event_type"], name="event_message_type_idx"),
            models.Index(fields=["event_type", "occurred_at"], name="event_type_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.event_type} {self.recipient}"
