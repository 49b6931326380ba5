"""A per-process map whose entries are trusted for a few seconds (decision 53's caches).

Plain dict operations, atomic under the GIL: two threads racing on one key cost one more read,
never a wrong answer older than `max_age`. Bounded: when full, it starts again empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ExpiringMap(Generic[K, V]):
    def __init__(self, max_entries: int = 10_000) -> None:
        self._entries: dict[K, tuple[V, float]] = {}
        self._max_entries = max_entries

    def get_or_compute(self, key: K, max_age: float, compute: Callable[[], V]) -> V:
        """The value stored for `key` less than `max_age` seconds ago, else `compute()` stored."""
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None and now - hit[1] < max_age:
            return hit[0]
        value = compute()
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = (value, now)
        return value

    def forget(self, key: K) -> None:
        self._entries.pop(key, None)

    def forget_where(self, matches: Callable[[V], bool]) -> None:
        for key, (value, _) in list(self._entries.items()):
            if matches(value):
                self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
