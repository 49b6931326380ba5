"""The periodic upkeep of every registered table: the coming days' partitions, and the days
past the retention dropped. Run by the beat task `delivery.partitions_upkeep` (hourly); the
expiry also by `manage.py expire_data`."""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from core.partitions.create import days_ensure
from core.partitions.expire import Dropped, partitions_expire
from core.partitions.spec import AHEAD_DAYS, day_number, registered


def partitions_ahead(*, now: datetime | None = None, days: int = AHEAD_DAYS) -> list[str]:
    """Create yesterday's to `days` ahead's partitions wherever missing; the names created."""
    today = day_number(now or timezone.now())
    created: list[str] = []
    for spec in registered():
        with transaction.atomic(), connection.cursor() as cursor:
            created += days_ensure(cursor, spec, range(today - 1, today + days + 1))
    return created


def partitions_drop_expired(before: datetime, *, dry_run: bool = False) -> list[Dropped]:
    """Every registered table's partitions whose rows are all older than `before`."""
    dropped: list[Dropped] = []
    for spec in registered():
        dropped += partitions_expire(spec, before, dry_run=dry_run)
    return dropped
