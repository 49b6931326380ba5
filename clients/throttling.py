"""Per-service rate limits, enforced atomically in Redis across every web process.

DRF's own throttles keep counts in the cache of one process; ours run one Lua script
(core/lua/sliding_window.lua, a sliding-window log on Redis's clock), so N gunicorn workers
on M hosts share one exact budget. The caller is identified by its credential only (never by
X-Forwarded-For or the address, which a caller controls or shares), and counted against its
service: every key of a service shares one budget (a second key is not a second budget).

Endpoint classes: a view sets `throttle_scope = "send"` (DRF's attribute name); views without one
are in class "default". The rate for (service, class) is the first of
  service.endpoint_rate_limits[class] > service.rate_limit > NOTIFIER_API_RATES[class]
  > NOTIFIER_API_DEFAULT_RATE.
A key may carry its own lower limits (the same two fields on the key): they are a second window
of that key alone, checked first, so a key can be held below its service, never above it.

Redis keys:
    notifier:throttle:<service id>:<class>        ZSET of hits in the window (score = microseconds)
    notifier:throttle:key:<key prefix>:<class>    the same, for a key with its own lower limit

    $ redis-cli ZCARD notifier:throttle:svc_0123456789abcdef:send   # hits in the current window
    $ redis-cli DEL notifier:throttle:svc_0123456789abcdef:send     # forgive a service

If Redis is unreachable the check raises, and the API answers 503 (core/api/errors.py):
failing open would let a flood through exactly when the system is degraded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from clients.caller import Caller
from clients.rates import Rate, parse_rate
from core.lua import script
from core.redis_client import redis_key

DEFAULT_CLASS = "default"


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    hits: int
    retry_after_seconds: float
    rate: Rate


def rate_for(owner: Any, endpoint_class: str) -> Rate:
    """The rate that applies to this service on this endpoint class."""
    per_class = getattr(owner, "endpoint_rate_limits", None) or {}
    text = (per_class.get(endpoint_class) or getattr(owner, "rate_limit", "")
            or settings.NOTIFIER_API_RATES.get(endpoint_class) or settings.NOTIFIER_API_DEFAULT_RATE)
    return parse_rate(text)


def credential_rate(caller: Caller, endpoint_class: str) -> Rate | None:
    """The credential's own lower limit on this class, if it has one."""
    text = (caller.endpoint_rate_limits or {}).get(endpoint_class) or caller.rate_limit
    return parse_rate(text) if text else None


def rate_limit_hit(*, bucket: str, endpoint_class: str, rate: Rate) -> RateDecision:
    """Count one request; allowed only if the window still has room (atomic in Redis)."""
    allowed, hits, retry_ms = script("sliding_window")(
        keys=[redis_key("throttle", bucket, endpoint_class)],
        args=[rate.limit, rate.period_seconds * 1000, uuid.uuid4().hex],
    )
    return RateDecision(bool(allowed), int(hits), int(retry_ms) / 1000, rate)


class ClientRateThrottle(BaseThrottle):
    """The default DRF throttle (REST_FRAMEWORK settings): one line covers every endpoint."""

    def __init__(self) -> None:
        self.decision: RateDecision | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        caller = request.user
        if not isinstance(caller, Caller):
            return True  # unauthenticated requests were already refused by the permissions
        endpoint_class = getattr(view, "throttle_scope", None) or DEFAULT_CLASS
        self.decision = self._decide(caller, endpoint_class)
        # The boundary middleware turns this into RateLimit-* response headers.
        request._request.notifier_rate_limit = self.decision
        return self.decision.allowed

    @staticmethod
    def _decide(caller: Caller, endpoint_class: str) -> RateDecision:
        own = credential_rate(caller, endpoint_class)
        if own is not None:
            decision = rate_limit_hit(bucket=f"key:{caller.label}", endpoint_class=endpoint_class,
                                      rate=own)
            if not decision.allowed:
                return decision
        return rate_limit_hit(bucket=caller.pk, endpoint_class=endpoint_class,
                              rate=rate_for(caller.service, endpoint_class))

    def wait(self) -> float | None:
        return self.decision.retry_after_seconds if self.decision else None
