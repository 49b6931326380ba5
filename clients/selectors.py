"""Reads on services and keys."""

from __future__ import annotations

from clients.key_cache import api_key_for
from clients.key_format import key_from_wire
from clients.models import ApiKey, Service


class UnusableKeyError(Exception):
    """A key that may not be used; the message says why, as a 401 does."""


def api_key_usable(presented: str) -> ApiKey:
    """The usable key row of a plain key as a caller sends it (typed prefix or not); raises
    UnusableKeyError when it is unknown, revoked, presented with another type's prefix, or
    expired (the hash never covers expiry, so it is checked on every use)."""
    claimed_type, library_key = key_from_wire(presented.strip())
    try:
        api_key = api_key_for(library_key)
    except ApiKey.DoesNotExist:
        raise UnusableKeyError("Invalid API key.") from None
    if claimed_type is not None and claimed_type != api_key.key_type:
        raise UnusableKeyError("Invalid API key.")
    if api_key.has_expired:
        raise UnusableKeyError("API key has expired.")
    return api_key


def api_key_verified(presented: str) -> ApiKey | None:
    """The usable key row of a plain key, or None."""
    try:
        return api_key_usable(presented)
    except UnusableKeyError:
        return None


def service_for_key(presented: str) -> Service | None:
    """The service a plain key belongs to, if the key is usable."""
    api_key = api_key_verified(presented)
    return api_key.service if api_key else None
