"""A circuit breaker per provider, shared by every worker through Redis.

Closed: calls go through; a burst of failures (NOTIFIER_BREAKER_FAILURES within
NOTIFIER_BREAKER_WINDOW_SECONDS) opens it, and so does a provider fault (the same permanent
error for everyone: delivery/services/provider_faults.py). Open: the provider is skipped (no
call, no timeout) for NOTIFIER_BREAKER_COOLDOWN_SECONDS. Then one worker at a time gets a probe
(half-open); a success closes it, a failure opens it again. A 429 with Retry-After opens it for
that long, so no worker calls the ESP again before it asked us to. Every transition is logged
and kept in a short list that `delivery.selectors.circuit_breakers_list` reads for the API and
dashboard.

If Redis cannot be reached the breaker fails open (every call allowed): losing the breaker
costs timeouts, losing the sends would cost messages. The state machine runs in one Lua script
(core/lua/circuit_breaker.lua) so concurrent workers never race a transition.

Redis keys (prefix NOTIFIER_REDIS_PREFIX):

    notifier:breaker:<provider>          hash: state, until, probe_until, failures, window_start
    notifier:breaker:<provider>:events   list of the last 100 transitions, newest first

    $ redis-cli HGETALL notifier:breaker:ses
    $ redis-cli LRANGE notifier:breaker:ses:events 0 9
"""

from __future__ import annotations

import logging
import time
from enum import StrEnum

import redis
from django.conf import settings

from core.lua import script
from core.redis_client import redis_key

logger = logging.getLogger(__name__)


class Decision(StrEnum):
    ALLOW = "allow"
    PROBE = "probe"
    DENY = "deny"


def state_key(provider: str) -> str:
    return redis_key("breaker", provider)


def events_key(provider: str) -> str:
    return redis_key("breaker", provider, "events")


def _run(provider: str, op: str, hold_seconds: float = 0.0, reason: str = "") -> list[str] | None:
    args = [
        op,
        int(time.time() * 1000),
        settings.NOTIFIER_BREAKER_FAILURES,
        int(settings.NOTIFIER_BREAKER_WINDOW_SECONDS * 1000),
        int(settings.NOTIFIER_BREAKER_COOLDOWN_SECONDS * 1000),
        int(settings.NOTIFIER_BREAKER_PROBE_SECONDS * 1000),
        int(hold_seconds * 1000),
        reason,
    ]
    try:
        raw = script("circuit_breaker")(keys=[state_key(provider), events_key(provider)], args=args)
    except redis.RedisError as exc:
        logger.warning("circuit breaker for %s unavailable (failing open): %s", provider, exc)
        return None
    result = [part.decode() if isinstance(part, bytes) else str(part) for part in raw]
    if result[1]:
        logger.warning("circuit breaker %s: %s", provider, result[1])
    return result


# Breakers whose last check in this process found them closed with no failure counted. The
# success recorded after that call would write what is already there (failures 0, closed), so
# it is skipped: one Redis round trip less per provider call, ~0.12 ms of CPU per OTP
# (docs/decisions.md 55). A failure recorded meanwhile by another worker is reset by the next
# success whose check saw it. A hint per process, never shared: a lost entry costs one write.
_clean: set[str] = set()


def breaker_check(*, provider: str) -> tuple[Decision, float]:
    """May this worker call `provider` now? DENY means skip it (it is open or being probed);
    the float is then how many seconds until asking again makes sense."""
    result = _run(provider, "allow")
    key = state_key(provider)
    if result is None:
        _clean.discard(key)
        return Decision.ALLOW, 0.0
    if result[0] == Decision.ALLOW and len(result) > 3 and result[3] == "0":
        _clean.add(key)
    else:
        _clean.discard(key)
    wait = int(result[2]) / 1000 if len(result) > 2 else 0.0
    return Decision(result[0]), wait


def breaker_record_success(*, provider: str) -> None:
    key = state_key(provider)
    if key in _clean:
        _clean.discard(key)
        return
    _run(provider, "success")


def breaker_record_failure(*, provider: str, retry_after: float | None = None) -> None:
    """A call failed before acceptance (or timed out); `retry_after` opens it for that long."""
    _clean.discard(state_key(provider))
    _run(provider, "failure", hold_seconds=retry_after or 0.0)


def breaker_open(*, provider: str, reason: str) -> None:
    """Open now for the cooldown, whatever the failure count: the provider answers but is of no
    use (delivery/services/provider_faults.py). `reason` is kept in the transition list."""
    _clean.discard(state_key(provider))
    _run(provider, "open", reason=reason[:200])
