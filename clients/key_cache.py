"""API keys this process has verified, remembered for NOTIFIER_API_KEY_CACHE_SECONDS (decision 53).

Verifying a key costs a query (and a SHA-512): once per key and process every few seconds is
enough. The row (with its service) is read again after that, so a revocation, an expiry date, a
new scope or rate of the key or of its service reaches every process within those seconds (5 by
default), and the process that writes it (a model save or delete, api_key_revoke) at once. The
cache holds sha256 digests of keys, never a key.
"""

from __future__ import annotations

import hashlib

from django.conf import settings

from clients.models import ApiKey, Service
from core.expiring import ExpiringMap

# sha256 of the key -> the key row it verified to (its service selected with it)
_verified: ExpiringMap[str, ApiKey] = ExpiringMap(max_entries=10_000)


def api_key_cache_forget(*, key_id: str | None = None, service_id: str | None = None) -> None:
    """Forget this process's verified keys: one key's, one service's, or (no argument) all."""
    if key_id is None and service_id is None:
        _verified.clear()
    else:
        _verified.forget_where(lambda key: key.pk == key_id or key.service_id == service_id)


def forget_changed_credentials(sender: type, instance: ApiKey | Service, **kwargs: object) -> None:
    """post_save/post_delete receiver: a changed key, or every key of a changed service, is
    verified again by this process's next request."""
    if isinstance(instance, Service):
        api_key_cache_forget(service_id=instance.pk)
    else:
        api_key_cache_forget(key_id=instance.pk)


def _verify(library_key: str) -> ApiKey:
    prefix, _, _ = library_key.partition(".")
    api_key = ApiKey.objects.select_related("service").get(prefix=prefix, revoked=False)
    if not api_key.is_valid(library_key):
        raise ApiKey.DoesNotExist("Key is not valid.")
    return api_key


def api_key_for(library_key: str) -> ApiKey:
    """The unrevoked key row of `library_key` (raises ApiKey.DoesNotExist), cached when fresh."""
    digest = hashlib.sha256(library_key.encode()).hexdigest()
    return _verified.get_or_compute(digest, settings.NOTIFIER_API_KEY_CACHE_SECONDS,
                                    lambda: _verify(library_key))
