"""One active dispatcher at a time: SET NX PX to take the lock, compare-and-delete to release.

The lock only saves wasted work (several schedulers claiming and racing on the same rows).
Correctness never depends on it: a scheduler paused past the TTL wakes up believing it holds
the lock, and the database fence (status = SCHEDULED) plus the claim lease make its late
dispatch a no-op. See docs/decisions.md ("Scheduler: Redis due set, Postgres fence").
"""

from __future__ import annotations

import uuid

from core.lua import script
from core.redis_client import get_redis, redis_key


def lock_key() -> str:
    return redis_key("schedule", "lock")


class DispatcherLock:
    def __init__(self, *, ttl_seconds: float) -> None:
        self.token = uuid.uuid4().hex
        self.ttl_ms = max(1, int(ttl_seconds * 1000))

    def acquire_or_refresh(self) -> bool:
        """True while this process holds the lock (taking it when free, extending it when held)."""
        if int(script("lock_refresh")(keys=[lock_key()], args=[self.token, self.ttl_ms])):
            return True
        return bool(get_redis().set(lock_key(), self.token, nx=True, px=self.ttl_ms))

    def release(self) -> bool:
        return bool(int(script("lock_release")(keys=[lock_key()], args=[self.token])))
