"""Whole days of history dropped once past every service's metadata retention (decision 122).

A day partition holds every service's rows, so it goes when the longest metadata retention of
any service has passed; a service with a shorter one sees its older rows hidden by the reads
(`metadata_visible_since`) until then, and the daily facts keep its figures for good.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from clients.models import Service
from clients.retention import retention_defaults, retention_effective
from core.partitions.expire import Dropped
from core.partitions.upkeep import partitions_drop_expired


def longest_metadata_days() -> int:
    """The longest metadata retention of any service, for any stream (the default included)."""
    longest = retention_defaults().metadata_days
    stored_values = Service.objects.exclude(retention={}).values_list("retention", flat=True)
    for stored in stored_values.iterator():
        longest = max([longest, *(kept.metadata_days for kept in retention_effective(stored).values())])
    return longest


def history_horizon(as_of: datetime) -> datetime:
    """Rows older than this are past every service's retention."""
    return as_of - timedelta(days=longest_metadata_days())


def history_expire(as_of: datetime, *, dry_run: bool = False) -> list[Dropped]:
    """Drop the day partitions whose rows are all older than `history_horizon(as_of)` (a day
    still holding a message in flight is kept and reported)."""
    return partitions_drop_expired(history_horizon(as_of), dry_run=dry_run)
