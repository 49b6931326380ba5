"""Writes on API clients."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from clients.key_cache import api_key_cache_forget
from clients.models import ApiClient
from clients.rates import parse_rate
from clients.scopes import default_scopes, parse_scopes

# last_used_at is a hint for operators, not an audit log: one UPDATE a minute per client at most.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_client_create(
    *, name: str, scopes: list[str] | None = None, rate_limit: str = "",
    endpoint_rate_limits: dict[str, str] | None = None,
) -> tuple[ApiClient, str]:
    """Create a client; returns it with the plain key, which is shown once and never stored."""
    scopes = parse_scopes(",".join(scopes)) if scopes is not None else default_scopes()
    for rate in [rate_limit, *(endpoint_rate_limits or {}).values()]:
        if rate:
            parse_rate(rate)
    return ApiClient.objects.create_key(
        name=name, scopes=scopes, rate_limit=rate_limit,
        endpoint_rate_limits=endpoint_rate_limits or {},
    )


def api_client_revoke(*, client: ApiClient) -> None:
    """Revoke for good (djangorestframework-api-key refuses to un-revoke)."""
    ApiClient.objects.filter(pk=client.pk).update(revoked=True)
    api_key_cache_forget(client.pk)  # other processes: within NOTIFIER_API_KEY_CACHE_SECONDS


def api_client_touch(*, client: ApiClient) -> bool:
    """Record use, at most once per LAST_USED_RESOLUTION; True if a row was written."""
    now = timezone.now()
    stale_before = now - LAST_USED_RESOLUTION
    if client.last_used_at is not None and client.last_used_at > stale_before:
        return False
    updated = ApiClient.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale_before), pk=client.pk
    ).update(last_used_at=now)
    client.last_used_at = now
    return bool(updated)
