"""API clients: services that call the REST API with a hashed key.

Only the key's prefix and a SHA-512 hash are stored (djangorestframework-api-key), so a database
dump reveals no usable key; the hash is compared in constant time. A client carries its scopes
(clients/scopes.py) and its rate limits (clients/throttling.py).
"""

from __future__ import annotations

from django.db import models
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager

from clients.rates import validate_rate
from clients.scopes import default_scopes


class ApiClient(AbstractAPIKey):
    objects = BaseAPIKeyManager()
    scopes = models.JSONField(default=default_scopes, blank=True,
                              help_text="send, campaigns, schedules, analytics (read-only), admin")
    rate_limit = models.CharField(
        max_length=20, blank=True, default="", validators=[validate_rate],
        help_text="Requests per client and endpoint class, e.g. 100/min; empty: the default.",
    )
    endpoint_rate_limits = models.JSONField(
        default=dict, blank=True,
        help_text='Overrides per endpoint class, e.g. {"send": "10/s", "templates": "30/min"}.',
    )
    # Refreshed at most once a minute (clients/services.py), never a write per request.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API client"
        verbose_name_plural = "API clients"

    @property
    def is_authenticated(self) -> bool:
        """Lets DRF's IsAuthenticated accept a request authenticated by this client."""
        return True


class IdempotencyRecord(models.Model):
    """One `Idempotency-Key` a client sent, with the response to replay (clients/idempotency.py).

    The row is inserted in the first request's own transaction, so while that request runs it is
    uncommitted and a duplicate's INSERT waits on it; it commits with the request's work and
    the response. `status_code` NULL is a row an older release committed before its work.
    """

    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of method, path and body")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    locked_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "key"], name="idempotency_client_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status_code or 'in progress'})"
