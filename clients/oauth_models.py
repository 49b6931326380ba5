"""OAuth2 clients: django-oauth-toolkit applications that belong to a service (decision 104).

The toolkit's application model is swapped for this one (OAUTH2_PROVIDER_APPLICATION_MODEL),
created by clients' migration 0006 before the toolkit's first migration runs, so its access
tokens point here. A client is always confidential and uses the client_credentials grant only
(RFC 6749 section 4.4): there is no user and no redirect. Its scopes come from clients.scopes,
like an API key's, and are a subset of its service's. The secret is stored hashed (the
toolkit's ClientSecretField); revoking a client deletes it and, by cascade, its tokens.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from oauth2_provider.models import AbstractApplication, ApplicationManager

from clients.models import Service
from clients.scopes import default_scopes


class OAuthClient(AbstractApplication):
    objects = ApplicationManager()
    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="oauth_clients")
    scopes = models.JSONField(default=default_scopes, blank=True,
                              help_text="A subset of the service's scopes; a token gets these or "
                                        "fewer.")
    created_by = models.CharField(max_length=150, blank=True, default="",
                                  help_text="Who made the client: a user, a key or a command.")

    class Meta(AbstractApplication.Meta):
        verbose_name = "OAuth client"
        verbose_name_plural = "OAuth clients"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Whatever a form or a caller set: only machine-to-machine clients exist here.
        self.client_type = self.CLIENT_CONFIDENTIAL
        self.authorization_grant_type = self.GRANT_CLIENT_CREDENTIALS
        self.hash_client_secret = True
        super().save(*args, **kwargs)
