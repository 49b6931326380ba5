"""What ESPs reported about sent messages."""

from __future__ import annotations

from django.db import models

from feedback.normalize import EventType


class EmailEvent(models.Model):
    """One provider event (delivered, opened, bounced...) about one message.

    `provider_event_id` is unique per provider, so an event delivered many times is stored once.
    `message` is null when the event names a message we do not know (kept and reported).
    """

    Type = EventType  # defined once, with the normalizer that produces it

    # No separate FK index: the (message, event_type) index below serves lookups by message.
    # No database constraint: events and messages are partitioned by their own days and dropped
    # whole (decision 122); an event for a message whose day is gone keeps its id.
    message = models.ForeignKey(
        "delivery.EmailMessage", null=True, blank=True, on_delete=models.CASCADE, related_name="events",
        db_index=False, db_constraint=False,
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
        # (provider, provider_event_id) is unique in each day partition (event_provider_id_unique,
        # feedback/partitioning.py); the insert checks the day before too.
        indexes = [
            models.Index(fields=["message", "event_type"], name="event_message_type_idx"),
            models.Index(fields=["event_type", "occurred_at"], name="event_type_time_idx"),
            # The overview and the dashboard read "events received in the last hour".
            models.Index(fields=["received_at"], name="event_received_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.event_type} {self.recipient}"


class WebhookDelivery(models.Model):
    """One verified webhook request, stored before we answer 2xx (the ESP's retry is our backup).

    The raw body is kept exactly as received so processing can be re-run (idempotently) at any
    time; the processing task takes this row's id.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        PROCESSED = "processed"
        FAILED = "failed"

    provider = models.CharField(max_length=20)
    kind = models.CharField(max_length=32, default="notification")
    body = models.TextField()
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    processed_at = models.DateTimeField(null=True, blank=True)
    events_total = models.PositiveIntegerField(default=0)
    events_new = models.PositiveIntegerField(default=0)
    events_unknown = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["status", "received_at"], name="webhook_status_time_idx")]
        # What the admin lists: requests an ESP made to our webhook (not email deliveries).
        verbose_name = "webhook request"

    def __str__(self) -> str:
        return f"{self.provider} webhook {self.pk} ({self.status})"


class MessageEventMark(models.Model):
    """The first event of each type per message: the unique set behind the campaign counters.

    Inserting (message, type) with ON CONFLICT DO NOTHING tells, exactly and under concurrency,
    whether this is the first open/click/... of that message, however often the ESP repeats it.
    """

    # Partitioned by message_id, on its message's days (decision 122): dropped with them.
    message = models.ForeignKey("delivery.EmailMessage", on_delete=models.CASCADE, related_name="+",
                                db_constraint=False)
    event_type = models.CharField(max_length=16)
    first_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "event_type"], name="mark_message_type_unique")
        ]


class CampaignEventCounter(models.Model):
    """Unique per-message event counts of one campaign, incremented once per processed batch."""

    campaign = models.OneToOneField(
        "campaigns.Campaign", primary_key=True, on_delete=models.CASCADE, related_name="event_counter"
    )
    delivered = models.PositiveIntegerField(default=0)
    opened = models.PositiveIntegerField(default=0)
    clicked = models.PositiveIntegerField(default=0)
    bounced = models.PositiveIntegerField(default=0)  # hard bounces
    soft_bounced = models.PositiveIntegerField(default=0)
    complained = models.PositiveIntegerField(default=0)
    unsubscribed = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)


class CampaignEventMinute(models.Model):
    """One campaign's ESP events and first events per minute, provider and kind: what its
    statistics' series and per-provider counts read instead of its events and marks (decision
    125). Incremented once per processed batch, in its transaction, from the events it stored.

    `kind` is an event type (`events`: every stored event of that type, as the series counts) or
    a mark name (`firsts`: the first such event of a message, as the per-provider counts and the
    counters count them); "bounced" holds both every bounce event and the first hard bounces.
    `minute` is the event's `occurred_at` (for a first, the mark's time when it was recorded)
    truncated to its UTC minute; `provider` is the message's ("" when it has none).
    A plain campaign id, no relation: feedback sits below campaigns (deleting a campaign deletes
    its rows through campaigns' post_delete receiver), and no foreign-key lock on the campaign row
    is taken by a webhook batch.
    """

    # The key is the tally's own (no surrogate id): its upsert's arbiter and the stats' range.
    pk = models.CompositePrimaryKey("campaign_id", "minute", "provider", "kind")
    campaign_id = models.BigIntegerField()
    minute = models.DateTimeField()
    provider = models.CharField(max_length=20, blank=True, default="")
    kind = models.CharField(max_length=16)
    events = models.IntegerField(default=0)
    firsts = models.IntegerField(default=0)


class SoftBounceTally(models.Model):
    """Soft bounces per address; at the configured threshold the address is suppressed."""

    email = models.EmailField(max_length=254, unique=True)
    count = models.PositiveIntegerField(default=0)
    last_at = models.DateTimeField()


class ReputationHold(models.Model):
    """Why the reputation guard paused a campaign or held a service (one row per decision)."""

    class Scope(models.TextChoices):
        CAMPAIGN = "campaign"
        CLIENT = "client"

    scope = models.CharField(max_length=10, choices=Scope.choices)
    campaign = models.ForeignKey("campaigns.Campaign", null=True, blank=True, on_delete=models.CASCADE)
    client = models.ForeignKey("clients.Service", null=True, blank=True, on_delete=models.CASCADE)
    metric = models.CharField(max_length=20)  # bounce_rate | complaint_rate
    rate = models.FloatField()
    threshold = models.FloatField()
    sample = models.PositiveIntegerField()
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.reason
