"""Writes on services and their API keys."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clients.key_cache import api_key_cache_forget
from clients.key_format import key_for_wire
from clients.key_types import KeyType
from clients.models import ApiKey, Service
from clients.rates import parse_rate
from clients.scopes import Scope, default_scopes, parse_scopes

# last_used_at is a hint for operators, not an audit log: one UPDATE a minute per key at most.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class KeyRefusedError(ValueError):
    """A key that may not be made as asked; `field` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _rates_checked(rate_limit: str, endpoint_rate_limits: dict[str, str] | None) -> None:
    for rate in [rate_limit, *(endpoint_rate_limits or {}).values()]:
        if rate:
            parse_rate(rate)


def service_create(
    *, name: str, scopes: list[str] | None = None, rate_limit: str = "",
    endpoint_rate_limits: dict[str, str] | None = None, key_name: str = "",
    key_type: str = KeyType.LIVE, created_by: str = "",
) -> tuple[Service, str]:
    """A new service with its first key (holding all the service's scopes); returns the service
    and the plain key, which is shown once and never stored."""
    scopes = parse_scopes(",".join(scopes)) if scopes is not None else default_scopes()
    _rates_checked(rate_limit, endpoint_rate_limits)
    with transaction.atomic():
        service = Service.objects.create(name=name, scopes=scopes, rate_limit=rate_limit,
                                         endpoint_rate_limits=endpoint_rate_limits or {})
        _, key = api_key_create(service=service, name=key_name or name, key_type=key_type,
                                created_by=created_by)
    return service, key


def scopes_within_service(service: Service, scopes: list[str] | None) -> list[str]:
    granted = list(service.scopes or [])
    if scopes is None:
        return granted
    try:
        wanted = parse_scopes(",".join(scopes))
    except ValueError as exc:
        raise KeyRefusedError("scopes", str(exc)) from exc
    beyond = [scope for scope in wanted if scope not in granted and Scope.ADMIN not in granted]
    if beyond:
        raise KeyRefusedError("scopes", f"The service does not hold {', '.join(beyond)}; its scopes "
                                   f"are {', '.join(granted) or '(none)'}.")
    return wanted


def rate_not_above_service(service: Service, rate_limit: str) -> None:
    if not rate_limit:
        return
    try:
        rate = parse_rate(rate_limit)
    except ValueError as exc:
        raise KeyRefusedError("rate_limit", str(exc)) from exc
    service_rate = service.rate_limit or settings.NOTIFIER_API_DEFAULT_RATE
    if rate.per_second > parse_rate(service_rate).per_second:
        raise KeyRefusedError("rate_limit", f"A key's limit may only be lower than its service's "
                                       f"({service_rate}).")


def api_key_create(
    *, service: Service, name: str, key_type: str = KeyType.LIVE,
    scopes: list[str] | None = None, expiry_date: datetime | None = None,
    rate_limit: str = "", created_by: str = "",
) -> tuple[ApiKey, str]:
    """A new key of `service`; returns it with the plain key (typed prefix included), shown once.
    Raises KeyRefusedError naming the field when the key would exceed its service."""
    if key_type not in KeyType.values:
        raise KeyRefusedError("type", f"Choose one of {', '.join(KeyType.values)}.")
    granted = scopes_within_service(service, scopes)
    rate_not_above_service(service, rate_limit)
    if expiry_date is not None and expiry_date <= timezone.now():
        raise KeyRefusedError("expiry_date", "Must be in the future.")
    api_key, library_key = ApiKey.objects.create_key(
        service=service, name=name, key_type=key_type, scopes=granted, expiry_date=expiry_date,
        rate_limit=rate_limit, created_by=created_by,
    )
    return api_key, key_for_wire(key_type, library_key)


def api_key_revoke(*, api_key: ApiKey) -> None:
    """Revoke for good (djangorestframework-api-key refuses to un-revoke). This process forgets
    the key at once, every other within NOTIFIER_API_KEY_CACHE_SECONDS."""
    ApiKey.objects.filter(pk=api_key.pk).update(revoked=True)
    api_key_cache_forget(key_id=api_key.pk)


def api_key_touch(*, api_key: ApiKey) -> bool:
    """Record use, at most once per LAST_USED_RESOLUTION; True if a row was written."""
    now = timezone.now()
    stale_before = now - LAST_USED_RESOLUTION
    if api_key.last_used_at is not None and api_key.last_used_at > stale_before:
        return False
    updated = ApiKey.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale_before), pk=api_key.pk
    ).update(last_used_at=now)
    api_key.last_used_at = now
    return bool(updated)
