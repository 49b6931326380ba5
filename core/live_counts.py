"""Live counts of the current minutes, added where the rows are written (decision 138).

The dashboard's live series (sends per priority, webhook events per type, provider calls per
provider) count each settled minute once in the database and keep it (analytics/selectors/
kept_minutes.py). The minutes still open change on every refresh, and during a campaign at
2,000/s they hold 60,000-180,000 rows: counted on every refresh, that was the dashboard's
slowest query. So each writer also adds its rows to a Redis hash of the minute, after its
commit (one pipeline per batch or send task), and a refresh reads the open minutes from there.

These counts are for display: a writer that dies between its commit and its increment, or a
Redis restart, leaves a minute short until it settles, when the database count replaces it. A
minute without a hash (no writer counted into it) is counted in the database.

Redis keys: notifier:live:<series>:<minute epoch>, a hash {name: count}, TTL LIVE_TTL_SECONDS.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from datetime import UTC, datetime

import redis
from django.db import transaction
from django.utils import timezone

from core.redis_client import get_redis, redis_key

SENDS = "throughput"  # per priority label: rows marked SENT by a real ESP's acceptance
EVENTS = "events"  # per event type, and UNKNOWN_MESSAGE: webhook events stored
PROVIDER_CALLS = "provider_calls"  # per provider: see provider_call_counts
# Counted with the event types, not one of them: the events of the minute whose message we do
# not know (never ours, or its row expired). Event types are lower-case words.
UNKNOWN_MESSAGE = "(unknown message)"
CALLS_SEPARATOR = " "  # provider names are identifiers (ESP names, SMTP names): never a space
# Only the open minutes are read (the last two); a few minutes more covers a slow clock.
LIVE_TTL_SECONDS = 5 * 60


def minute_of(at: datetime) -> datetime:
    """The UTC minute `at` falls in."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def live_counts_add(series: str, counts: Mapping[str, int]) -> None:
    """Add `counts` to the current minute of `series` once the current transaction commits (at
    once outside one); never raises: a live count is worth less than the write it follows."""
    live_series_add({series: counts})


def live_series_add(counts_by_series: Mapping[str, Mapping[str, int]]) -> None:
    """`live_counts_add` for several series at once: one Redis round trip for all of them (a
    send task adds its sends and its provider calls together)."""
    nonzero = {series: {name: n for name, n in counts.items() if n}
               for series, counts in counts_by_series.items()}
    nonzero = {series: counts for series, counts in nonzero.items() if counts}
    if nonzero:
        transaction.on_commit(lambda: _add(nonzero))


def live_counts_read(series: str, minutes: list[datetime]) -> dict[datetime, dict[str, int]] | None:
    """The live counts of these minutes (a minute no writer counted into is absent), None when
    Redis cannot be read."""
    if not minutes:
        return {}
    try:
        pipe = get_redis().pipeline(transaction=False)
        for minute in minutes:
            pipe.hgetall(_key(series, minute))
        hashes = pipe.execute()
    except redis.RedisError:
        return None
    return {minute: {name.decode(): int(n) for name, n in values.items()}
            for minute, values in zip(minutes, hashes, strict=True) if values}


def live_counts_forget(series: str, minutes: list[datetime]) -> None:
    """Drop these minutes' live counts (tests)."""
    with contextlib.suppress(redis.RedisError):
        get_redis().delete(*[_key(series, m) for m in minutes])


def duration_bucket(ms: int) -> int:
    """A call's duration rounded up to two significant digits (exact under 100 ms): about 90
    buckets a decade, within 10% of the call's time (1% from 1 s on). DURATION_BUCKET_SQL is
    the same rule in SQL."""
    if ms < 100:
        return ms
    step = 10 ** (len(str(ms)) - 2)
    return math.ceil(ms / step) * step


DURATION_BUCKET_SQL = (
    "CASE WHEN duration_ms < 100 THEN duration_ms ELSE (ceil(duration_ms / "
    "power(10, floor(log(duration_ms)) - 1)) * power(10, floor(log(duration_ms)) - 1))::int END"
)


def provider_call_name(provider: str, what: str) -> str:
    """A provider call count's name: `<provider> attempts`, `<provider> failed`, `<provider> ms<=N`."""
    return f"{provider}{CALLS_SEPARATOR}{what}"


def provider_call_counts(provider: str, calls: list[tuple[bool, int]]) -> dict[str, int]:
    """The counts of a provider's calls, each (accepted, duration ms)."""
    counts: dict[str, int] = {}
    for accepted, ms in calls:
        provider_calls_add(counts, provider, accepted=accepted, bucket=duration_bucket(ms), n=1)
    return counts


def provider_calls_add(counts: dict[str, int], provider: str, *, accepted: bool, bucket: int, n: int) -> None:
    """Add `n` calls of `provider` with one outcome and duration bucket to `counts`: the one
    naming rule of the live counts and the database's count of a minute."""
    for what in ("attempts", *([] if accepted else ["failed"]), f"ms<={bucket}"):
        name = provider_call_name(provider, what)
        counts[name] = counts.get(name, 0) + n


def _add(counts_by_series: Mapping[str, Mapping[str, int]]) -> None:
    minute = minute_of(timezone.now())
    with contextlib.suppress(redis.RedisError):
        pipe = get_redis().pipeline(transaction=False)
        for series, counts in counts_by_series.items():
            key = _key(series, minute)
            for name, n in counts.items():
                pipe.hincrby(key, name, n)
            pipe.expire(key, LIVE_TTL_SECONDS)
        pipe.execute()


def _key(series: str, minute: datetime) -> str:
    return redis_key("live", series, int(minute.timestamp()))
