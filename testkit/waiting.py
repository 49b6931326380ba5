"""Poll for a condition the system reaches asynchronously (workers, schedulers), bounded in time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """True as soon as `predicate()` is truthy; after `timeout` seconds, one last check."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
