"""A step that runs at most once per interval in this process (the scheduler's once-a-minute
sweeps: event log expiry, personal-data removal, the callbacks log)."""

from __future__ import annotations

import time


class AtMostEvery:
    """`due()` is True at the first call and then once per `seconds` (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._next = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.seconds
        return True

    def due_within(self, seconds: float) -> None:
        """The next `due()` is True after at most `seconds` from now (a step with work left)."""
        self._next = min(self._next, time.monotonic() + seconds)

    def reset(self) -> None:
        """The next `due()` is True (a test's fresh start)."""
        self._next = 0.0
