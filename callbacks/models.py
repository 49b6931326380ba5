"""A service's webhook endpoints and the log of what was posted to them."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from eventlog.types import EventType


class WebhookEndpoint(models.Model):
    """One receiver URL of one service, with the event types it wants and where it is in the log."""

    class DisabledReason(models.TextChoices):
        BY_SERVICE = "by_service", "disabled by the service"
        FAILING = "failing", "failing throughout the retry period"

    service = models.ForeignKey("clients.Service", on_delete=models.CASCADE, related_name="+")
    url = models.URLField(max_length=2000)
    event_types = ArrayField(models.CharField(max_length=32, choices=EventType.choices))
    # The signing secrets ("whsec_" + base64): HMAC needs them in clear, so they are stored as
    # is and never shown again after the answer that made them (not in the admin either).
    secret = models.CharField(max_length=100)
    previous_secret = models.CharField(max_length=100, blank=True, default="")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=20, choices=DisabledReason.choices, blank=True, default="")
    disabled_at = models.DateTimeField(null=True, blank=True)
    # The log position (eventlog.cursor.EventCursor) of the last event the receiver took (a 2xx).
    cursor_txid = models.BigIntegerField(default=0)
    cursor_id = models.BigIntegerField(default=0)
    # Failures in a row, since when: backoff and the disable after NOTIFIER_CALLBACKS_RETRY_HOURS.
    failing_since = models.DateTimeField(null=True, blank=True)
    failed_attempts = models.IntegerField(default=0)
    # Not before then: a retry's backoff, or a task already published for it (the sweep's hold).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # At most one delivery in flight: a lease taken by one short UPDATE, fencing every cursor
    # move. Not a row lock: a lock held across the POST would hold a transaction id, and with
    # it the event log's horizon for every reader (decision 110).
    lease_token = models.UUIDField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["service", "id"], name="webhook_service_idx")]

    def __str__(self) -> str:
        return f"{self.url} ({self.service_id})"


class EndpointDelivery(models.Model):
    """One POST to an endpoint: the delivery log (GET /api/v1/webhooks/{id}/deliveries)."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    # The try of this batch: 1, then 2, 3... while the endpoint keeps failing.
    attempt = models.IntegerField()
    event_ids = ArrayField(models.BigIntegerField())
    status_code = models.IntegerField(null=True, blank=True)  # null: no answer (refused, timeout)
    latency_ms = models.IntegerField()
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "endpoint deliveries"
        indexes = [models.Index(fields=["endpoint", "id"], name="webhookdelivery_endpoint_idx")]

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    def __str__(self) -> str:
        return f"{self.endpoint_id} #{self.attempt} {self.status_code}"
