"""How far back a service's message rows are kept: the one place the reads and the facts writer
ask (decision 118).

A service's metadata retention is per stream (decision 120); its rows are relied on only back to
the shorter of the two, so a day is counted from the rows only if both streams still show it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.utils import timezone

from clients.models import Service
from clients.retention import metadata_visible_since, retention_defaults


def metadata_horizon(service: Service | None = None, *, now: datetime | None = None) -> datetime:
    """The instant before which `service`'s message rows (and their events) may be gone: the
    platform's default retention without a service."""
    now = now or timezone.now()
    if service is None:
        return now - timedelta(days=retention_defaults().metadata_days)
    return max(metadata_visible_since(service, now).values())


def day_start(day: date) -> datetime:
    """A UTC day's first instant (days close at UTC midnight for every service)."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def utc_today(now: datetime | None = None) -> date:
    return (now or timezone.now()).astimezone(UTC).date()


def rows_kept(service: Any, day: date, *, now: datetime | None = None) -> bool:
    """True if every message row of `day` may still be there: the day starts at or after the
    service's horizon. Only such a day is counted from the rows (read or written)."""
    return day_start(day) >= metadata_horizon(service, now=now)
