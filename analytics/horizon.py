"""How far back a service's message rows are kept: the one place the reads and the facts writer
ask (decision 118).

A placeholder for issue 30's per-service retention: it reads the platform's
NOTIFIER_RETENTION_METADATA_DAYS for every service. At the merge with the per-service setting,
this function alone changes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone


def metadata_horizon(service: Any = None, *, now: datetime | None = None) -> datetime:
    """The instant before which `service`'s message rows (and their events) may be gone."""
    return (now or timezone.now()) - timedelta(days=settings.NOTIFIER_RETENTION_METADATA_DAYS)


def day_start(day: date) -> datetime:
    """A UTC day's first instant (days close at UTC midnight for every service)."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def utc_today(now: datetime | None = None) -> date:
    return (now or timezone.now()).astimezone(UTC).date()


def rows_kept(service: Any, day: date, *, now: datetime | None = None) -> bool:
    """True if every message row of `day` may still be there: the day starts at or after the
    service's horizon. Only such a day is counted from the rows (read or written)."""
    return day_start(day) >= metadata_horizon(service, now=now)
