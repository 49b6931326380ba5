"""API keys this process has verified, remembered for NOTIFIER_API_KEY_CACHE_SECONDS (decision 53).

Verifying a key costs a query (and a SHA-512): once per key and process every few seconds is
enough. The row is read again after that, so a revocation (or a new scope or rate) reaches every
process within those seconds, and the process that writes it (a model save or delete,
api_client_revoke) at once. The cache holds sha256 digests of keys, never a key.
"""

from __future__ import annotations

import hashlib

from django.conf import settings

from clients.models import ApiClient
from core.expiring import ExpiringMap

# sha256 of the key -> the client it verified to
_verified: ExpiringMap[str, ApiClient] = ExpiringMap(max_entries=10_000)


def api_key_cache_forget(client_id: str | None = None) -> None:
    """Forget this process's verified keys: of one client, or all of them."""
    if client_id is None:
        _verified.clear()
    else:
        _verified.forget_where(lambda client: client.pk == client_id)


def forget_changed_client(sender: type, instance: ApiClient, **kwargs: object) -> None:
    """post_save/post_delete receiver: the changed client's keys are verified again."""
    api_key_cache_forget(instance.pk)


def client_for_key(key: str) -> ApiClient:
    """The usable client of `key` (raises ApiClient.DoesNotExist), from the cache when fresh."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    return _verified.get_or_compute(digest, settings.NOTIFIER_API_KEY_CACHE_SECONDS,
                                    lambda: ApiClient.objects.get_from_key(key))
