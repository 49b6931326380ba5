"""Writes on API clients."""

from __future__ import annotations

from clients.models import ApiClient


def api_client_create(*, name: str) -> tuple[ApiClient, str]:
    """Create a client; returns it with the plain key, which is shown once and never stored."""
    return ApiClient.objects.create_key(name=name)
