"""Start/stop shared by the fake servers: a listener plus a supervisor that closes and reopens
it for the `refuse` fault; `with server:` starts on enter and stops on exit."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from testkit.fakes.supervisor import RefusalSupervisor


class StartStopContext:
    """Subclasses provide `faults`, `_open_listener` and `_close_listener`, and may hook
    `_before_start` / `_before_close`."""

    _supervisor: RefusalSupervisor | None = None

    def _before_start(self) -> None:
        """Per-server preparation before the listener opens."""

    def _before_close(self) -> None:
        """Per-server work after the supervisor stops, before the listener closes."""

    def start(self) -> Self:
        """Bind and serve in daemon threads; returns ``self``."""
        if self._supervisor is not None:
            return self
        self._before_start()
        self._open_listener()
        self._supervisor = RefusalSupervisor(self.faults, self._open_listener,
                                             self._close_listener)
        self._supervisor.start()
        return self

    def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()
            self._supervisor = None
        self._before_close()
        self._close_listener()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
