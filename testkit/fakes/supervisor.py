"""Keeps a server's listening socket in step with the fault plan's ``refuse`` mode.

Why: ``refuse`` must look like a dead host (``ConnectionRefusedError``), which only
happens when nothing listens on the port. Changes made via the plan take effect
synchronously (listener callback); a timed refusal ends by itself, so a small
poller thread reopens the port when the window elapses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from testkit.fakes.faults import FaultPlan

POLL_SECONDS = 0.01


class RefusalSupervisor:
    """Calls ``close_listener`` / ``open_listener`` when refusal starts / ends."""

    def __init__(
        self,
        plan: FaultPlan,
        open_listener: Callable[[], None],
        close_listener: Callable[[], None],
    ) -> None:
        self._plan = plan
        self._open = open_listener
        self._close = close_listener
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Subscribe to plan changes and start the expiry poller."""
        self._plan.add_listener(self.sync)
        self._thread = threading.Thread(target=self._poll, name="refusal-supervisor", daemon=True)
        self._thread.start()
        self.sync()

    def stop(self) -> None:
        """Unsubscribe and stop polling; does not touch the listener."""
        self._plan.remove_listener(self.sync)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    @property
    def listener_closed(self) -> bool:
        """True while the supervisor holds the listener closed."""
        return self._closed

    def sync(self) -> None:
        """Open or close the listener to match the plan (idempotent)."""
        with self._lock:
            if self._stop.is_set():
                return
            refusing = self._plan.is_refusing()
            if refusing and not self._closed:
                self._close()
                self._closed = True
            elif not refusing and self._closed:
                try:
                    self._open()
                except OSError:
                    return  # port briefly unavailable: the poller retries shortly
                self._closed = False

    def _poll(self) -> None:
        # Bounded: exits as soon as stop() sets the event.
        while not self._stop.wait(POLL_SECONDS):
            self.sync()
