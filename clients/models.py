"""API clients: services that call the REST API with a hashed key.

Only the key's prefix and a SHA-512 hash are stored (djangorestframework-api-key), so a database
dump reveals no usable key.
"""

from __future__ import annotations

from django.db import models
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager


class ApiClient(AbstractAPIKey):
    objects = BaseAPIKeyManager()
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API client"
        verbose_name_plural = "API clients"

    @property
    def is_authenticated(self) -> bool:
        """Lets DRF's IsAuthenticated accept a request authenticated by this client."""
        return True
