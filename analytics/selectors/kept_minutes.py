"""Per-minute counts over a recent window, each settled minute counted once and kept in Redis.

The dashboard's live figures count rows of the last hour (sends, webhook events) or quarter of
an hour (provider calls). Counted on every refresh, their cost grows with the send rate: after a
campaign at 2,000/s a 15-minute window holds 1.8M provider calls. A minute's rows stop changing
soon after it ends (each is stamped once, when written, by the writing process's clock), so a
minute that ended more than SETTLE ago is counted once, in the database, and its counts are kept
in Redis (zeros too). The open minutes are read from the counts their writers add
(core/live_counts.py) when there are some, else counted in the database (decisions 135 and
138). Without Redis (down, erroring) a call counts the whole window, as before.

A series is what to count (`MinuteSeries.count`: rows from one minute to another, by UTC
minute, as `{name: number}`); the window is whole UTC minutes, from the minute `now - window`
falls in to the current one, the last still open.

Redis keys: notifier:analytics:<series name>:<minute epoch> (JSON), TTL window + 5 minutes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import redis
from django.utils import timezone

from core.live_counts import live_counts_forget, live_counts_read, minute_of
from core.redis_client import get_redis, redis_key

Counts = dict[str, int]
ONE_MINUTE = timedelta(minutes=1)
# A minute's rows may still arrive a little after it ends: the statement that writes a row may
# commit late (a lock wait, a slow commit) and a process's clock may run a little behind. A minute
# is kept only after it ended this long ago; until then every call counts it in the database. Not
# longer: during a campaign at 2,000/s every second of it is 2,000 more rows each refresh counts.
SETTLE = timedelta(seconds=30)


@dataclass(frozen=True)
class MinuteSeries:
    """One kind of count: its Redis name, its window, and how to count it in the database."""

    name: str
    window: timedelta
    # count(since, until): the rows stamped from `since` (a minute's start) to `until` (None:
    # no end), as {minute: counts}; a minute without rows may be absent.
    count: Callable[[datetime, datetime | None], dict[datetime, Counts]]
    # The counts of a minute without rows (the sends series names every priority, with 0).
    empty: Callable[[], Counts] = field(default=dict)

    @property
    def ttl_seconds(self) -> int:
        # A minute stays in the window until `window` after it ended; its key is written at
        # least SETTLE after that end, so this outlives every call that can read it.
        return int((self.window + timedelta(minutes=5)).total_seconds())


def minute_range(*, first: datetime, last: datetime) -> list[datetime]:
    """Every minute from first to last, both included."""
    count = int((last - first) / ONE_MINUTE) + 1
    return [first + ONE_MINUTE * i for i in range(count)]


def series_window(series: MinuteSeries, *, now: datetime | None = None) -> dict[datetime, Counts]:
    """Every minute of the series' window ending now, with its counts: the settled minutes kept
    in Redis and the open ones' live counts (core/live_counts.py) read from there, every other
    minute counted in the database (and kept, once settled). Once the beat has kept the settled
    minutes and writers count the open ones, a call makes no query at all."""
    minutes, settled = _window_minutes(series, now or timezone.now())
    kept = kept_minutes(series, settled)  # None: Redis could not be read
    live = live_counts_read(series.name, minutes[len(settled):]) if kept is not None else None
    known = {**(kept or {}), **{m: series.empty() | c for m, c in (live or {}).items()}}
    counted: dict[datetime, Counts] = {}
    for first, until in _runs([m for m in minutes if m not in known], last=minutes[-1]):
        counted |= series.count(first, until)
    if kept is not None:
        minutes_keep(series, {m: counted.get(m) or series.empty() for m in settled if m not in known})
    window = {m: known[m] if m in known else counted.get(m) or series.empty() for m in minutes}
    return window | {m: c for m, c in counted.items() if m > minutes[-1]}  # a clock ahead: shown


def _runs(minutes: list[datetime], *, last: datetime) -> list[tuple[datetime, datetime | None]]:
    """Consecutive minutes as (first, until) ranges, one query each; the run that reaches the
    window's last minute has no end (a row stamped past it, by a clock ahead, is shown)."""
    runs: list[tuple[datetime, datetime | None]] = []
    for minute in minutes:
        if runs and runs[-1][1] == minute:
            runs[-1] = (runs[-1][0], minute + ONE_MINUTE)
        else:
            runs.append((minute, minute + ONE_MINUTE))
    return [(first, None if until == last + ONE_MINUTE else until) for first, until in runs]


def series_keep(series: MinuteSeries, *, now: datetime | None = None) -> int:
    """Count and keep the window's settled minutes not kept yet, and only those (the beat: the
    first dashboard opened after a quiet spell then counts only the open minutes). The number
    of minutes newly kept; 0 without Redis."""
    _, settled = _window_minutes(series, now or timezone.now())
    kept = kept_minutes(series, settled)
    if kept is None:
        return 0
    missing = [m for m in settled if m not in kept]
    if not missing:
        return 0
    counted = series.count(missing[0], settled[-1] + ONE_MINUTE)
    minutes_keep(series, {m: counted.get(m) or series.empty() for m in missing})
    return len(missing)


def series_forget(series: MinuteSeries, *, now: datetime | None = None) -> None:
    """Drop the kept minutes a call at `now` could read (tests: rows a rolled-back test counted
    must not show in the next; the bench: a first call that counts the whole window)."""
    now = now or timezone.now()
    minutes = minute_range(first=minute_of(now - series.window - timedelta(minutes=10)),
                           last=minute_of(now))
    with contextlib.suppress(redis.RedisError):
        get_redis().delete(*[minute_key(series, m) for m in minutes])
    live_counts_forget(series.name, minutes)


def kept_minutes(series: MinuteSeries, minutes: list[datetime]) -> dict[datetime, Counts] | None:
    """The counts Redis keeps for these minutes (a missing or malformed value left out), None
    when Redis cannot be read."""
    if not minutes:
        return {}
    try:
        values = get_redis().mget([minute_key(series, m) for m in minutes])
    except redis.RedisError:
        return None
    kept = {}
    for minute, value in zip(minutes, values, strict=True):
        counts = _counts_of(value, required=series.empty().keys())
        if counts is not None:
            kept[minute] = counts
    return kept


def minutes_keep(series: MinuteSeries, counts: dict[datetime, Counts]) -> None:
    """Keep settled minutes' counts (zeros too: an empty minute is not counted again)."""
    if not counts:
        return
    with contextlib.suppress(redis.RedisError):
        pipe = get_redis().pipeline(transaction=False)
        for minute, per_name in counts.items():
            pipe.set(minute_key(series, minute), json.dumps(per_name), ex=series.ttl_seconds)
        pipe.execute()


def minute_key(series: MinuteSeries, minute: datetime) -> str:
    return redis_key("analytics", series.name, int(minute.timestamp()))


def summed(window: dict[datetime, Counts]) -> Counts:
    """The window's counts added up, name by name."""
    total: Counts = {}
    for counts in window.values():
        for name, n in counts.items():
            total[name] = total.get(name, 0) + n
    return total


def _window_minutes(series: MinuteSeries, now: datetime) -> tuple[list[datetime], list[datetime]]:
    """The window's minutes ending at `now`, and those of them settled (the first ones)."""
    minutes = minute_range(first=minute_of(now - series.window), last=minute_of(now))
    return minutes, [m for m in minutes if m + ONE_MINUTE <= now - SETTLE]


def _counts_of(value: bytes | None, *, required: Collection[str]) -> Counts | None:
    """A kept minute's counts, None when absent or not what minutes_keep wrote (counted again)."""
    if value is None:
        return None
    try:
        counts = json.loads(value)
    except ValueError:
        return None
    if not isinstance(counts, dict) or not all(isinstance(n, int) for n in counts.values()):
        return None
    if not set(required) <= counts.keys():
        return None
    return counts
