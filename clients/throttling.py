"""Per-client rate limits, enforced atomically in Redis across every web process.

DRF's own throttles keep counts in the cache of one process; ours run one Lua script
(core/lua/sliding_window.lua, a sliding-window log on Redis's clock), so N gunicorn workers
on M hosts share one exact budget. The client is identified by its API key only (never by
X-Forwarded-For or the address, which a caller controls or shares).

Endpoint classes: a view sets `throttle_scope = "send"` (DRF's attribute name); views without one
are in class "default". The rate for (client, class) is the first of
  client.endpoint_rate_limits[class] > client.rate_limit > NOTIFIER_API_RATES[class]
  > NOTIFIER_API_DEFAULT_RATE.
Each (client, class) pair has its own window.

Redis keys:
    notifier:throttle:<client prefix>:<class>     ZSET of hits in the window (score = microseconds)

    $ redis-cli ZCARD notifier:throttle:Ab12Cd34:send      # hits in the current window
    $ redis-cli DEL notifier:throttle:Ab12Cd34:send        # forgive a client

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


def rate_for(client: Any, endpoint_class: str) -> Rate:
    """The rate that applies to this client on this endpoint class."""
    per_class = getattr(client, "endpoint_rate_limits", None) or {}
    text = (per_class.get(endpoint_class) or getattr(client, "rate_limit", "")
            or settings.NOTIFIER_API_RATES.get(endpoint_class) or settings.NOTIFIER_API_DEFAULT_RATE)
    return parse_rate(text)


def rate_limit_hit(*, client_prefix: str, endpoint_class: str, rate: Rate) -> RateDecision:
    """Count one request; allowed only if the window still has room (atomic in Redis)."""
    allowed, hits, retry_ms = script("sliding_window")(
        keys=[redis_key("throttle", client_prefix, endpoint_class)],
        args=[rate.limit, rate.period_seconds * 1000, uuid.uuid4().hex],
    )
    return RateDecision(bool(allowed), int(hits), int(retry_ms) / 1000, rate)


class ClientRateThrottle(BaseThrottle):
    """The default DRF throttle (REST_FRAMEWORK settings): one line covers every endpoint."""

    def __init__(self) -> None:
        self.decision: RateDecision | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        client = request.user
        prefix = getattr(client, "prefix", None)
        if not prefix:
            return True  # unauthenticated requests were already refused by the permissions
        endpoint_class = getattr(view, "throttle_scope", None) or DEFAULT_CLASS
        self.decision = rate_limit_hit(
            client_prefix=prefix, endpoint_class=endpoint_class,
            rate=rate_for(client, endpoint_class),
        )
        # The boundary middleware turns this into RateLimit-* response headers.
        request._request.notifier_rate_limit = self.decision
        return self.decision.allowed

    def wait(self) -> float | None:
        return self.decision.retry_after_seconds if self.decision else None
