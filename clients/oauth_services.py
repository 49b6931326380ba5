"""Writes on OAuth2 clients (decision 104): create one (its secret shown once), revoke one."""

from __future__ import annotations

from django.db import transaction
from oauth2_provider.generators import generate_client_secret

from clients.models import Service
from clients.oauth_cache import oauth_token_cache_forget
from clients.oauth_models import OAuthClient
from clients.services import scopes_within_service


def oauth_client_create(*, service: Service, name: str, scopes: list[str] | None = None,
                        created_by: str = "") -> tuple[OAuthClient, str]:
    """A new client of `service`; returns it with its plain secret, shown once (only a hash is
    stored). Scopes default to the service's; raises KeyRefusedError (field `scopes`) for a
    scope the service does not hold."""
    granted = scopes_within_service(service, scopes)
    secret = generate_client_secret()
    client = OAuthClient(service=service, name=name, scopes=granted, created_by=created_by,
                         client_secret=secret)
    client.save()  # the toolkit's ClientSecretField hashes the secret on save
    return client, secret


def oauth_client_revoke(*, client: OAuthClient) -> None:
    """Delete the client and, with it, every token it was issued. This process refuses them at
    once, every other within NOTIFIER_API_KEY_CACHE_SECONDS."""
    client_pk = client.pk
    with transaction.atomic():
        client.delete()
    oauth_token_cache_forget(client_id=client_pk)
