"""The log keeps NOTIFIER_EVENT_LOG_DAYS (30) of events; older ones are deleted in batches.

Two callers: the scheduler's lock holder, in its sweep thread (`expiry_sweep`: at most once a
minute, a bounded step of at most EXPIRY_STEP_SECONDS, so a backlog drains over several sweeps
and never holds the thread), and `purge_messages` (every expired event, batch after batch).
Each batch is its own autocommit DELETE of the oldest rows by `recorded_at` (its index), so
locks are short and a crash loses nothing but the batch in progress.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.throttle import AtMostEvery
from eventlog.writes import EVENT_TABLE

EXPIRY_BATCH = 5000
EXPIRY_STEP_SECONDS = 1.0
EXPIRY_EVERY_SECONDS = 60.0
_DELETE = (f"DELETE FROM {EVENT_TABLE} WHERE id IN (SELECT id FROM {EVENT_TABLE} "
           "WHERE recorded_at < %s ORDER BY recorded_at LIMIT %s)")
_sweep_throttle = AtMostEvery(EXPIRY_EVERY_SECONDS)


def expiry_cutoff(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(days=settings.NOTIFIER_EVENT_LOG_DAYS)


def events_expire(*, older_than: datetime, batch_size: int = EXPIRY_BATCH,
                  budget_seconds: float | None = None, max_batches: int | None = None) -> int:
    """Delete events recorded before `older_than`, `batch_size` per statement, until none is
    left, the time budget is spent or `max_batches` ran; how many were deleted."""
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    deleted = batches = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(_DELETE, [older_than, batch_size])
            deleted += cursor.rowcount
            batches += 1
            if cursor.rowcount < batch_size:
                return deleted
        if (deadline is not None and time.monotonic() >= deadline) or batches == max_batches:
            return deleted


def expiry_sweep() -> None:
    """The scheduler's periodic step (scheduling registers it): at most once a minute per
    process, at most EXPIRY_STEP_SECONDS of deletes."""
    if not _sweep_throttle.due():
        return
    events_expire(older_than=expiry_cutoff(), budget_seconds=EXPIRY_STEP_SECONDS)
