"""Replay guards: remember nonces (Mailgun tokens) for as long as they could be replayed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

DEFAULT_MAILGUN_TOKEN_PREFIX = "notifier:webhooks:mailgun-token:"


class ReplayGuard(Protocol):
    """``seen_before`` atomically records ``token`` and reports whether it already was.

    Must be atomic across processes: two workers receiving the same token concurrently
    must not both get ``False``.
    """

    def seen_before(self, token: str, ttl: int) -> bool: ...


class InMemoryReplayGuard:
    """Process-local guard for tests and single-process tools; NOT safe across workers."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()
        self._monotonic = monotonic

    def seen_before(self, token: str, ttl: int) -> bool:
        now = self._monotonic()
        with self._lock:
            self._purge(now)
            if token in self._expiry:
                return True
            self._expiry[token] = now + ttl
            return False

    def _purge(self, now: float) -> None:
        expired = [t for t, exp in self._expiry.items() if exp <= now]
        for token in expired:
            del self._expiry[token]


class RedisReplayGuard:
    """Redis-backed guard: ``SET <prefix><token> 1 NX EX <ttl>`` is atomic server-side.

    Redis errors propagate on purpose (fail closed): the caller should answer 5xx so the
    ESP retries later, rather than accept a request it could not check for replay.
    """

    def __init__(self, client: Any, prefix: str = DEFAULT_MAILGUN_TOKEN_PREFIX) -> None:
        # ``client`` is a redis.Redis (typed loosely to keep redis an optional import).
        self._client = client
        self._prefix = prefix

    def seen_before(self, token: str, ttl: int) -> bool:
        created = self._client.set(f"{self._prefix}{token}", 1, nx=True, ex=max(1, int(ttl)))
        # redis-py returns True when the key was set, None when NX found it existing.
        return not created
