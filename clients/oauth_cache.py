"""Access tokens this process has looked up, remembered for NOTIFIER_API_KEY_CACHE_SECONDS.

The same rule as API keys (clients/key_cache.py, decision 53): a bearer token costs one query
(the token with its client and service) per token and process every few seconds, and a revoked
client, a deleted token or a changed scope reaches every process within those seconds, the
process that wrote it at once. Expiry is not cached: the caller checks it on every request.
The map is keyed by the token's SHA-256, the checksum the toolkit stores; never by the token.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from oauth2_provider.models import AccessToken

from clients.models import Service
from clients.oauth_models import OAuthClient
from core.expiring import ExpiringMap

# sha256 of the token -> its row (client and service selected with it)
_tokens: ExpiringMap[str, AccessToken] = ExpiringMap(max_entries=10_000)


def token_checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def oauth_token_cache_forget(*, client_id: int | None = None, service_id: str | None = None) -> None:
    """Forget this process's tokens: one client's (its row id), one service's, or all."""
    if client_id is None and service_id is None:
        _tokens.clear()
    else:
        _tokens.forget_where(lambda token: token.application_id == client_id
                             or token.application.service_id == service_id)


def forget_changed_oauth_credentials(sender: type, instance: object, **kwargs: object) -> None:
    """post_save/post_delete receiver for clients, services and tokens."""
    if isinstance(instance, Service):
        oauth_token_cache_forget(service_id=instance.pk)
    elif isinstance(instance, OAuthClient):
        oauth_token_cache_forget(client_id=instance.pk)
    elif isinstance(instance, AccessToken):
        _tokens.forget(instance.token_checksum)


def _look_up(checksum: str) -> AccessToken:
    # Tokens of a client are deleted with it; a token without a client (the toolkit allows one)
    # is not ours to honour.
    return AccessToken.objects.select_related("application__service").get(
        token_checksum=checksum, application__isnull=False)


def access_token_for(token: str) -> AccessToken:
    """The row of `token` (raises AccessToken.DoesNotExist), cached while fresh."""
    checksum = token_checksum(token)
    return _tokens.get_or_compute(checksum, settings.NOTIFIER_API_KEY_CACHE_SECONDS,
                                  lambda: _look_up(checksum))
