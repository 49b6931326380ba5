"""Reads on services and keys."""

from __future__ import annotations

from clients.key_cache import api_key_for
from clients.key_format import key_from_wire
from clients.models import ApiKey, Service


def api_key_verified(presented: str) -> ApiKey | None:
    """The usable key row of a plain key as a caller sends it (typed prefix or not), or None:
    unknown, revoked, expired, or presented with another type's prefix."""
    claimed_type, library_key = key_from_wire(presented.strip())
    try:
        api_key = api_key_for(library_key)
    except ApiKey.DoesNotExist:
        return None
    if (claimed_type is not None and claimed_type != api_key.key_type) or api_key.has_expired:
        return None
    return api_key


def service_for_key(presented: str) -> Service | None:
    """The service a plain key belongs to, if the key is usable."""
    api_key = api_key_verified(presented)
    return api_key.service if api_key else None
