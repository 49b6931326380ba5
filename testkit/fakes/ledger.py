"""Thread-safe record of what the fake ESPs accepted.

Why: delivery tests must assert exactly-once semantics (no lost, no duplicated
messages) across retries and failover. Every fake writes one entry per accepted
recipient here, so tests can count duplicates by *our* message id.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass


class Outcome:
    """Names of request outcomes counted by :meth:`Ledger.count_request`."""

    ACCEPTED = "accepted"
    PARTIAL = "partial"  # some recipients accepted, others rejected (SES bulk, SMTP)
    HUNG = "hung"  # accepted into the ledger, never answered
    REJECTED = "rejected"  # permanent recipient rejection (400 / SMTP 550)
    BAD_REQUEST = "bad_request"
    TOO_LARGE = "too_large"  # body over the ESP's documented size limit (413)
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    SERVER_ERROR = "server_error"
    RATE_LIMITED = "rate_limited"
    DROPPED = "dropped"  # connection closed without answer while refusing
    LOOKUP = "lookup"  # a search by message (never counted as a request: only noted when recording)


@dataclass(frozen=True)
class LedgerEntry:
    """One recipient of one message, as accepted by a fake provider."""

    provider: str
    message_id: str | None  # our id (custom_args / v: var / tag / header)
    recipient: str
    provider_message_id: str
    accepted_at: float  # time.time()


class Ledger:
    """Append-only, thread-safe list of accepted messages plus outcome counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[LedgerEntry] = []
        self._outcomes: Counter[str] = Counter()

    def record(
        self,
        provider: str,
        message_id: str | None,
        recipient: str,
        provider_message_id: str,
    ) -> LedgerEntry:
        """Append one accepted recipient and return the stored entry."""
        entry = LedgerEntry(provider, message_id, recipient, provider_message_id, time.time())
        with self._lock:
            self._entries.append(entry)
        return entry

    def count_request(self, outcome: str) -> None:
        """Count one request (HTTP call or SMTP transaction) by its outcome."""
        with self._lock:
            self._outcomes[outcome] += 1

    def entries(self) -> list[LedgerEntry]:
        """Snapshot of all entries in acceptance order."""
        with self._lock:
            return list(self._entries)

    def count(self) -> int:
        """Number of accepted recipient entries."""
        with self._lock:
            return len(self._entries)

    def by_message_id(self) -> dict[str | None, list[LedgerEntry]]:
        """Entries grouped by our message id; a list longer than 1 is a duplicate."""
        grouped: dict[str | None, list[LedgerEntry]] = {}
        for entry in self.entries():
            grouped.setdefault(entry.message_id, []).append(entry)
        return grouped

    def duplicates(self) -> dict[str | None, list[LedgerEntry]]:
        """Only the message ids that were accepted more than once."""
        return {k: v for k, v in self.by_message_id().items() if len(v) > 1}

    def outcomes(self) -> dict[str, int]:
        """Snapshot of request counters keyed by :class:`Outcome` names."""
        with self._lock:
            return dict(self._outcomes)

    def requests(self) -> int:
        """Total number of requests counted, whatever the outcome."""
        with self._lock:
            return sum(self._outcomes.values())

    def reset(self) -> None:
        """Forget all entries and counters (between test phases)."""
        with self._lock:
            self._entries.clear()
            self._outcomes.clear()
