"""Scriptable faults shared by the fake ESP servers.

Why: failover, retry and circuit-breaker logic can only be tested if a provider
can be made to fail on demand, reproducibly, and for a bounded time or number of
requests. A test flips the plan at run time; each server asks :meth:`FaultPlan.decide`
once per request.
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace


class Mode(enum.Enum):
    """What the server does with the next request."""

    OK = "ok"
    ERROR_5XX = "error_5xx"
    REFUSE = "refuse"
    RATE_LIMIT_429 = "rate_limit_429"
    LATENCY = "latency"
    ACCEPT_THEN_HANG = "accept_then_hang"


@dataclass(frozen=True)
class Fault:
    """A fault mode with its parameters and limits.

    ``deadline`` is a ``time.monotonic()`` instant after which the fault ends;
    ``remaining`` is how many more requests it applies to. ``None`` means unlimited.
    """

    mode: Mode = Mode.OK
    status: int = 503  # HTTP status for ERROR_5XX
    retry_after: int = 1  # seconds, for RATE_LIMIT_429
    latency: float = 0.0  # seconds added before answering (any mode)
    hang_seconds: float = 2.0  # ACCEPT_THEN_HANG: sleep this long, then close
    probability: float = 1.0  # fraction of requests hit (seeded RNG)
    deadline: float | None = None
    remaining: int | None = None


OK_FAULT = Fault()


class FaultPlan:
    """Thread-safe, run-time settable fault schedule.

    One plan per server by default; pass the same plan to several servers to
    fail them together. ``seed`` makes probabilistic faults reproducible.
    """

    def __init__(self, seed: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._seed = seed
        self._rng = random.Random(seed)
        self._clock = clock
        self._fault = OK_FAULT
        self._rejected: set[str] = set()
        self._listeners: list[Callable[[], None]] = []

    # -- scripting API ---------------------------------------------------------------
    def set(
        self,
        mode: Mode,
        *,
        for_seconds: float | None = None,
        next_n: int | None = None,
        **params: float,
    ) -> None:
        """Install ``mode`` (replacing the current fault) with optional limits.

        ``params`` are :class:`Fault` fields (status, retry_after, latency,
        hang_seconds, probability).
        """
        if mode is Mode.REFUSE and next_n is not None:
            # A refused connection never reaches the server, so it cannot be counted.
            raise ValueError("refuse can be limited by for_seconds only")
        if next_n is not None and next_n < 0:
            raise ValueError("next_n must be >= 0")
        deadline = None if for_seconds is None else self._clock() + for_seconds
        fault = replace(OK_FAULT, mode=mode, deadline=deadline, remaining=next_n, **params)
        with self._lock:
            self._fault = fault
        self._notify()

    def ok(self) -> None:
        """Back to normal service (reopens a refusing listener)."""
        self.set(Mode.OK)

    def error_5xx(
        self,
        status: int = 503,
        *,
        for_seconds: float | None = None,
        next_n: int | None = None,
    ) -> None:
        """Answer with a server error (HTTP ``status``)."""
        self.set(Mode.ERROR_5XX, status=status,
                 for_seconds=for_seconds, next_n=next_n)

    def refuse(self, *, for_seconds: float | None = None) -> None:
        """Close the listening socket: clients get ``ConnectionRefusedError``."""
        self.set(Mode.REFUSE, for_seconds=for_seconds)

    def rate_limit(
        self, retry_after: int = 1, *, for_seconds: float | None = None, next_n: int | None = None
    ) -> None:
        """Answer 429 with ``Retry-After: retry_after``."""
        self.set(Mode.RATE_LIMIT_429, retry_after=retry_after,
                 for_seconds=for_seconds, next_n=next_n)

    def slow(
        self, seconds: float, *, for_seconds: float | None = None, next_n: int | None = None
    ) -> None:
        """Add ``seconds`` of latency before answering normally."""
        self.set(Mode.LATENCY, latency=seconds, for_seconds=for_seconds, next_n=next_n)

    def accept_then_hang(
        self,
        hang_seconds: float = 2.0,
        *,
        probability: float = 1.0,
        for_seconds: float | None = None,
        next_n: int | None = None,
    ) -> None:
        """Record as accepted, then sleep ``hang_seconds`` and close without answering."""
        self.set(Mode.ACCEPT_THEN_HANG, hang_seconds=hang_seconds, probability=probability,
                 for_seconds=for_seconds, next_n=next_n)

    def reject_permanent(self, *addresses: str) -> None:
        """Permanently reject these recipients (HTTP 400), until cleared."""
        with self._lock:
            self._rejected.update(a.strip().lower() for a in addresses)

    def clear_rejections(self) -> None:
        """Stop rejecting any recipient."""
        with self._lock:
            self._rejected.clear()

    def reset(self) -> None:
        """OK mode, no rejections, RNG re-seeded."""
        with self._lock:
            self._rejected.clear()
            self._rng = random.Random(self._seed)
        self.ok()

    # -- server-side API -------------------------------------------------------------
    def decide(self) -> Fault:
        """Fault to apply to one request; consumes one unit of ``next_n``."""
        with self._lock:
            fault = self._active_locked()
            if fault.mode is Mode.OK:
                return fault
            if fault.remaining is not None:
                self._fault = replace(fault, remaining=fault.remaining - 1)
            if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                return OK_FAULT
            return fault

    def current(self) -> Fault:
        """The active fault without consuming it (expired faults read as OK)."""
        with self._lock:
            return self._active_locked()

    def is_refusing(self) -> bool:
        """True while the listener should be closed."""
        return self.current().mode is Mode.REFUSE

    def is_rejected(self, address: str) -> bool:
        """True if ``address`` is scripted as a permanent failure."""
        with self._lock:
            return address.strip().lower() in self._rejected

    def rejected_among(self, addresses: Iterable[str]) -> list[str]:
        """The subset of ``addresses`` scripted as permanent failures, in order."""
        return [a for a in addresses if self.is_rejected(a)]

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (outside the lock) after every change of mode."""
        with self._lock:
            self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        """Undo :meth:`add_listener`; unknown callbacks are ignored."""
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    # -- internals ------------------------------------------------------------------
    def _active_locked(self) -> Fault:
        fault = self._fault
        expired = (fault.deadline is not None and self._clock() >= fault.deadline) or (
            fault.remaining is not None and fault.remaining <= 0
        )
        if expired:
            self._fault = OK_FAULT
            return OK_FAULT
        return fault

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for callback in listeners:
            callback()
