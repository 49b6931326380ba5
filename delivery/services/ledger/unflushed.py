"""SENT marks that may not be on disk yet, kept by the process that wrote them and written again
after a PostgreSQL crash (decision 82).

SENT marks commit without waiting for the WAL flush (decision 32): a synchronous one cost a P0
message a second flush (2.5-9 ms of fdatasync on this machine's disk), and the small million-day
with fsync on lost its P1 budget to it. But a crash loses the async commits of its last few
hundred milliseconds, which would leave messages the ESP accepted AMBIGUOUS. So each process
remembers the marks of its last `KEEP_SECONDS` (the WAL writer flushes within 3 x
wal_writer_delay, 600 ms by default), and when one of its new connections finds the server
started since the last one (`pg_postmaster_start_time()`), it writes them again. The marks are
guarded by state and claim token: a row already SENT, or claimed by someone else since, is left
alone. Connections killed while the server stays up lose no commit, and the start time does not
change.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import NamedTuple

KEEP_SECONDS = 5.0


class SentMark(NamedTuple):
    """One SENT-mark statement: a batch's rows (one row on the single-message path)."""

    at: float  # time.monotonic() of the mark
    provider: str
    token: str
    provider_ids: dict[int, str]  # message id -> the provider's message id


class _Recent:
    """This process's SENT marks of the last KEEP_SECONDS, and the server start it saw last."""

    def __init__(self) -> None:
        self.marks: deque[SentMark] = deque()
        self.server_started: object = None
        self.lock = threading.Lock()

    def add(self, provider_ids: dict[int, str], provider: str, token: str) -> None:
        now = time.monotonic()
        with self.lock:
            # Pruned only as marks are added: through an outage nothing is added, so the marks
            # made just before the crash are all still here when the server is back.
            while self.marks and now - self.marks[0].at > KEEP_SECONDS:
                self.marks.popleft()
            self.marks.append(SentMark(now, provider, token, provider_ids))

    def take_if_restarted(self, started: object) -> list[SentMark]:
        """The marks to write again if the server started since this process last looked."""
        with self.lock:
            restarted = self.server_started is not None and started != self.server_started
            self.server_started = started
            if not restarted:
                return []
            marks, self.marks = list(self.marks), deque()
            return marks


recent = _Recent()


def sent_marks_remember(*, provider_ids: dict[int, str], provider: str, token: str) -> None:
    recent.add(provider_ids, provider, token)


def server_start_read(connection) -> object:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time()")
        return cursor.fetchone()[0]
