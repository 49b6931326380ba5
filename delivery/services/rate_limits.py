"""Global rate limits: token buckets in Redis shared by every worker (one Lua script).

Two kinds of bucket, both optional: per provider (an ESP's account quota, e.g. SES 14/s) and
per recipient domain (e.g. gmail.com). Limits come from settings (NOTIFIER_PROVIDER_RATE_LIMITS,
NOTIFIER_DOMAIN_RATE_LIMITS: "name=rate[:burst],...") and can be changed at run time with
RateLimit rows in the admin; rows are read through a per-process cache of
NOTIFIER_RATE_LIMIT_CACHE_SECONDS, so a change reaches every worker within that time.

A message without tokens is never dropped: the worker waits inline for up to
NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS, then hands the rest back (deferred: re-queued with a
short countdown, no attempt used). P0 keeps a reserved share: other priorities may only take a
provider token while more than NOTIFIER_RATE_LIMIT_P0_RESERVE of the bucket is left. A 429 from
an ESP halves that provider's rate for NOTIFIER_RATE_LIMIT_SHRINK_SECONDS (down to a tenth).
If Redis is unreachable the limiter fails open (sends go out; the ESP's 429s still protect us).

Redis keys (prefix NOTIFIER_REDIS_PREFIX):

    notifier:ratelimit:provider:<name>   hash tokens, ts (ms)  - provider bucket
    notifier:ratelimit:domain:<domain>   hash tokens, ts (ms)  - recipient-domain bucket
    notifier:ratelimit:shrink:<name>     string factor (0.1-1), TTL = shrink period

    $ redis-cli HGETALL notifier:ratelimit:provider:ses
    $ redis-cli GET notifier:ratelimit:shrink:ses
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass

import redis
from django.conf import settings

from core.lua import script
from core.priorities import Priority
from core.redis_client import get_redis, redis_key
from delivery.models import RateLimit
from delivery.providers.base import OutgoingEmail

logger = logging.getLogger(__name__)
MIN_SHRINK = 0.1


@dataclass(frozen=True)
class Limit:
    per_second: float
    burst: int


def parse_limits(spec: str) -> dict[str, Limit]:
    """"ses=14,gmail.com=50:10" -> {name: Limit}; burst defaults to a fifth of a second's worth."""
    limits = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = item.partition("=")
        rate_text, _, burst_text = value.partition(":")
        rate = float(rate_text)
        burst = int(burst_text) if burst_text else max(1, math.ceil(rate / 5))
        limits[name.strip().lower()] = Limit(rate, burst)
    return limits


_cache: dict[str, object] = {"at": 0.0, "limits": None}


def limits_current() -> dict[tuple[str, str], Limit]:
    """{(scope, name): Limit}: settings overlaid with enabled RateLimit rows (cached briefly)."""
    now = time.monotonic()
    fresh = now - float(_cache["at"]) < settings.NOTIFIER_RATE_LIMIT_CACHE_SECONDS
    if _cache["limits"] is not None and fresh:
        return _cache["limits"]  # type: ignore[return-value]
    limits = {("provider", k): v for k, v in parse_limits(settings.NOTIFIER_PROVIDER_RATE_LIMITS).items()}
    limits |= {("domain", k): v for k, v in parse_limits(settings.NOTIFIER_DOMAIN_RATE_LIMITS).items()}
    for row in RateLimit.objects.all():
        key = (row.scope, row.name.lower())
        if not row.enabled:
            limits.pop(key, None)
            continue
        limits[key] = Limit(row.per_second, row.burst or max(1, math.ceil(row.per_second / 5)))
    _cache.update(at=now, limits=limits)
    return limits


def limits_cache_clear() -> None:
    _cache.update(at=0.0, limits=None)


def emails_admit(provider: str, emails: list[OutgoingEmail]) -> tuple[list[OutgoingEmail], float]:
    """The emails that may go to `provider` now, and how long the rest should wait."""
    limits = limits_current()
    domain_limited = any(scope == "domain" for scope, _ in limits)
    if ("provider", provider) not in limits and not domain_limited:
        return emails, 0.0
    admitted: list[OutgoingEmail] = []
    pending = list(emails)
    deadline = time.monotonic() + settings.NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS
    wait = 0.0
    for _ in range(100):  # bounded: each round either admits something or sleeps
        granted, pending, wait = _take(provider, pending, limits)
        admitted += granted
        if not pending or time.monotonic() + wait > deadline:
            break
        time.sleep(max(wait, 0.001))
    return admitted, wait if pending else 0.0


def _take(
    provider: str, emails: list[OutgoingEmail], limits: dict[tuple[str, str], Limit]
) -> tuple[list[OutgoingEmail], list[OutgoingEmail], float]:
    unlimited, by_domain = _group(emails, limits)
    domains = list(by_domain)
    provider_limit = limits.get(("provider", provider))
    args: list[float] = [int(time.time() * 1000), len(unlimited)]
    args += _provider_args(provider, provider_limit, emails)
    for domain in domains:
        limit = limits[("domain", domain)]
        args += [limit.per_second, limit.burst, len(by_domain[domain])]
    keys = [redis_key("ratelimit", "provider", provider)]
    keys += [redis_key("ratelimit", "domain", d) for d in domains]
    try:
        raw = script("token_bucket")(keys=keys, args=args)
    except redis.RedisError as exc:
        logger.warning("rate limiter unavailable (failing open): %s", exc)
        return emails, [], 0.0
    wait_ms, granted_unlimited, *granted_domains = (int(x) for x in raw)
    granted = unlimited[:granted_unlimited]
    rest = unlimited[granted_unlimited:]
    for domain, count in zip(domains, granted_domains, strict=True):
        granted += by_domain[domain][:count]
        rest += by_domain[domain][count:]
    return granted, rest, wait_ms / 1000


def _group(emails: list[OutgoingEmail], limits: dict) -> tuple[list[OutgoingEmail], dict[str, list]]:
    unlimited: list[OutgoingEmail] = []
    by_domain: dict[str, list[OutgoingEmail]] = defaultdict(list)
    for email in emails:
        domain = email.recipient.rpartition("@")[2].lower()
        if ("domain", domain) in limits:
            by_domain[domain].append(email)
        else:
            unlimited.append(email)
    return unlimited, by_domain


def _provider_args(provider: str, limit: Limit | None, emails: list[OutgoingEmail]) -> list[float]:
    if limit is None:
        return [0, 0, 0]
    rate = limit.per_second * _shrink_factor(provider)
    burst = max(1, limit.burst)
    critical = bool(emails) and emails[0].priority == Priority.CRITICAL
    reserve = 0 if critical else burst * settings.NOTIFIER_RATE_LIMIT_P0_RESERVE
    return [rate, burst, reserve]


def _shrink_factor(provider: str) -> float:
    try:
        value = get_redis().get(redis_key("ratelimit", "shrink", provider))
    except redis.RedisError:
        return 1.0
    return float(value) if value else 1.0


def provider_throttled(*, provider: str) -> None:
    """The ESP answered 429: halve its rate for a while (repeated 429s halve it again)."""
    key = redis_key("ratelimit", "shrink", provider)
    ttl = int(settings.NOTIFIER_RATE_LIMIT_SHRINK_SECONDS * 1000)
    try:
        client = get_redis()
        factor = max(MIN_SHRINK, float(client.get(key) or 1.0) / 2)
        client.set(key, factor, px=ttl)
    except redis.RedisError as exc:
        logger.warning("could not shrink %s rate: %s", provider, exc)
        return
    logger.warning("%s answered 429: its rate is now x%.2f for %ss", provider, factor, ttl / 1000)
