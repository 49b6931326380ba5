"""`with server:` for the fake servers: start on enter, stop on exit."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class StartStopContext:
    def start(self) -> Self:  # pragma: no cover - every server defines it
        raise TypeError(f"{type(self).__name__} must define start()")

    def stop(self) -> None:  # pragma: no cover - every server defines it
        raise TypeError(f"{type(self).__name__} must define stop()")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
