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
