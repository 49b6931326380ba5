"""Rebuild the Redis due set from PostgreSQL (after Redis lost it), without duplicates.

The scheduler does it by itself: `due_set_restore_step` runs in the dispatcher's tick when the
`built` key is missing (a Redis restart or flush loses it with the sets), a time-bounded step at
a time, so due sends go out between steps; its progress is kept in that key, so the next lock
holder goes on where the last one stopped, and a second loss in the middle starts it over.

Reads SCHEDULED rows in id order (keyset pagination, so it is resumable and never holds a long
transaction) and adds each id with its `scheduled_for` as the score. ZSET members are unique,
and an id currently claimed by a scheduler is skipped (schedule_restore.lua), so running it
twice, or while schedulers run, adds nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from delivery.models import EmailMessage
from scheduling.services import due

Status = EmailMessage.Status


def _batch_after(last_id: int, batch_size: int) -> list[tuple[int, float]]:
    rows = (EmailMessage.objects.filter(status=Status.SCHEDULED, id__gt=last_id, scheduled_for__isnull=False)
            .order_by("id").values_list("id", "scheduled_for")[:batch_size])
    return [(pk, when.timestamp()) for pk, when in rows]


def _batches(batch_size: int) -> Iterator[list[tuple[int, float]]]:
    last_id = 0
    while batch := _batch_after(last_id, batch_size):
        last_id = batch[-1][0]
        yield batch


def schedule_rebuild(
    *, batch_size: int = 5000, dry_run: bool = False, progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    """Returns (rows seen, ids added or re-scored); a dry run returns what it would add."""
    seen = added = 0
    for batch in _batches(batch_size):
        seen += len(batch)
        added += due.due_restore(items=batch, dry_run=dry_run)
        if progress:
            progress(seen, added)
    return seen, added


@dataclass(frozen=True)
class RestoreStep:
    started: bool  # the due set was found lost at this step
    added: int
    done: bool


def due_set_restore_step(*, budget_seconds: float, batch_size: int = 5000) -> RestoreStep | None:
    """One bounded step of the automatic rebuild; None when the due set is intact."""
    position = due.due_set_built()
    if position == due.BUILT:
        return None
    started = position is None
    if started:
        due.due_set_built_mark("0", only_if_present=False)
    last_id, added = int(position or 0), 0
    deadline = time.monotonic() + budget_seconds
    while True:  # at least one batch per step, however short the budget
        batch = _batch_after(last_id, batch_size)
        if not batch:
            done = due.due_set_built_mark(due.BUILT, only_if_present=True)
            return RestoreStep(started, added, done)
        added += due.due_restore(items=batch)
        last_id = batch[-1][0]
        if not due.due_set_built_mark(str(last_id), only_if_present=True):
            return RestoreStep(started, added, False)  # lost again: the next step starts over
        if time.monotonic() >= deadline:
            return RestoreStep(started, added, False)


def overdue_schedule_restore(*, overdue_before: datetime, limit: int = 10_000) -> int:
    """Self-healing between full rebuilds: SCHEDULED rows long past due (their due-set entry was
    never written, e.g. Redis was down at commit) go back into the due set. Returns how many."""
    rows = (EmailMessage.objects.filter(status=Status.SCHEDULED, scheduled_for__lt=overdue_before)
            .values_list("id", "scheduled_for")[:limit])
    return due.due_restore(items=[(pk, when.timestamp()) for pk, when in rows])
