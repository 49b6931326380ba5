"""Rebuild the Redis due set from PostgreSQL (after Redis lost it), without duplicates.

Reads SCHEDULED rows in id order (keyset pagination, so it is resumable and never holds a long
transaction) and adds each id with its `scheduled_for` as the score. ZSET members are unique,
and an id currently claimed by a scheduler is skipped (schedule_restore.lua), so running it
twice, or while schedulers run, adds nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

from delivery.models import EmailMessage
from scheduling.services import due

Status = EmailMessage.Status


def _batches(batch_size: int) -> Iterator[list[tuple[int, float]]]:
    last_id = 0
    while True:
        rows = list(
            EmailMessage.objects.filter(status=Status.SCHEDULED, id__gt=last_id, scheduled_for__isnull=False)
            .order_by("id")
            .values_list("id", "scheduled_for")[:batch_size]
        )
        if not rows:
            return
        last_id = rows[-1][0]
        yield [(pk, when.timestamp()) for pk, when in rows]


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


def overdue_schedule_restore(*, overdue_before: datetime, limit: int = 10_000) -> int:
    """Self-healing between full rebuilds: SCHEDULED rows long past due (their due-set entry was
    never written, e.g. Redis was down at commit) go back into the due set. Returns how many."""
    rows = (EmailMessage.objects.filter(status=Status.SCHEDULED, scheduled_for__lt=overdue_before)
            .values_list("id", "scheduled_for")[:limit])
    return due.due_restore(items=[(pk, when.timestamp()) for pk, when in rows])
