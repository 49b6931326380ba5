"""API keys this process has verified, remembered for NOTIFIER_API_KEY_CACHE_SECONDS (decision 53).

Verifying a key costs a query (and a SHA-512): once per key and process every few seconds is
enough. The row is read again after that, so a revocation (or a new scope or rate) reaches every
process within those seconds, and the process that writes it (a model save or delete,
api_client_revoke) at once. The cache holds sha256 digests of keys, never a key.
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings

from clients.models import ApiClient

_MAX_CACHED_KEYS = 10_000

# sha256 of the key -> (client, monotonic time it was read); dict operations are atomic under
# the GIL, and a lost race only costs one more read.
_verified: dict[str, tuple[ApiClient, float]] = {}


def api_key_cache_forget(client_id: str | None = None) -> None:
    """Forget this process's verified keys: of one client, or all of them."""
    if client_id is None:
        _verified.clear()
        return
    for digest, (client, _) in list(_verified.items()):
        if client.pk == client_id:
            _verified.pop(digest, None)


def forget_changed_client(sender: type, instance: ApiClient, **kwargs: object) -> None:
    """post_save/post_delete receiver: the changed client's keys are verified again."""
    api_key_cache_forget(instance.pk)


def client_for_key(key: str) -> ApiClient:
    """The usable client of `key` (raises ApiClient.DoesNotExist), from the cache when fresh."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    now = time.monotonic()
    hit = _verified.get(digest)
    if hit is not None and now - hit[1] < settings.NOTIFIER_API_KEY_CACHE_SECONDS:
        return hit[0]
    client = ApiClient.objects.get_from_key(key)
    if len(_verified) >= _MAX_CACHED_KEYS:
        _verified.clear()
    _verified[digest] = (client, now)
    return client


