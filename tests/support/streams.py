"""Client traffic that keeps arriving through an outage, as API clients and ESPs send it.

A `Stream` calls `send(n)` from a thread at a steady pace; an answer that says "unavailable"
(502, 503, 504) or a refused connection is retried with the same request, as a client or an ESP
would, so every call the server accepted can be accounted for afterwards. Any other refusal,
a 500 above all, is kept in `errors` for the test to assert on in its own thread (an assertion
inside the thread would only print a warning).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import requests

UNAVAILABLE = (502, 503, 504)


class Stream:
    """`send(n)` every `interval` s until stopped (at most `limit` calls); `send` returns the
    response, or None when it has nothing to send yet."""

    def __init__(self, send: Callable[[int], requests.Response | None], interval: float,
                 limit: int = 5000, tries: int = 300) -> None:
        self.send, self.interval, self.limit, self.tries = send, interval, limit, tries
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, n: int) -> None:
        error = ""
        for _ in range(self.tries):
            try:
                response = self.send(n)
            except requests.RequestException as exc:
                error = repr(exc)
            else:
                if response is None or response.status_code < 300:
                    return
                error = f"{response.status_code} {response.text[:200]}"
                if response.status_code not in UNAVAILABLE:
                    self.errors.append(f"call {n}: {error}")  # never a 500, never a refusal
                    return
            self._stop.wait(0.2)
        self.errors.append(f"call {n} never accepted: {error}")

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set() and n < self.limit:
            self._one(n)
            n += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> Stream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=90)
