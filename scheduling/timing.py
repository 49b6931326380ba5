"""Wall-clock times in IANA timezones -> UTC instants, and cron previews. Pure functions.

Used by single messages now and by the campaign fan-out: a 1M audience spans a few hundred
distinct timezones, so `due_by_timezone` computes one instant per zone and the fan-out joins
that small table in SQL (`due_values_sql`) instead of converting per recipient in Python.

DST is handled explicitly (zoneinfo, PEP 495):
- a wall time in a spring-forward gap does not exist (02:30 on 8 March 2026 in New York): it
  is shifted forward by the gap, i.e. read with the offset in force before the transition
  (02:30 EST = 07:30 UTC = 03:30 EDT);
- a wall time in a fall-back overlap happens twice (01:30 on 1 Nov 2026 in New York): the
  first occurrence (daylight time, fold=0) is used, so a send never waits an extra hour.

Time is always injected (`now`), never read here, so tests cover any date without sleeping.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

CRON_FIELDS = 5  # minute hour day-of-month month day-of-week (celery-beat's CrontabSchedule)
MAX_CRON_SCAN = 10_000
# A fixed start for the "does it ever fire" probe: cron repeats, so a match after it means
# matches forever (croniter gives up after 50 years without one; 29 February is found).
CRON_PROBE_START = datetime(2000, 1, 1)  # naive: croniter walks wall-clock time


class TimingError(ValueError):
    """Bad timing input; `field` names the request field it came from."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@lru_cache(maxsize=2048)
def zone(name: str) -> ZoneInfo:
    """The IANA zone called `name` (cached: a fan-out asks for the same few hundred)."""
    if not name or name != name.strip() or name.startswith(("/", ".")):
        raise TimingError("timezone", f"Unknown timezone {name!r}.")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise TimingError("timezone", f"Unknown timezone {name!r}.") from exc


def parse_local_time(value: str) -> time:
    """'09:00' or '09:00:30' -> time; anything else is a TimingError on `local_time`."""
    try:
        parsed = time.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise TimingError("local_time", f"Expected HH:MM, got {value!r}.") from exc
    if parsed.tzinfo is not None:
        raise TimingError("local_time", "A local time carries no offset; give the timezone separately.")
    return parsed


def is_gap(naive: datetime, tz: ZoneInfo) -> bool:
    """True when this wall time does not exist in `tz` (skipped by a spring-forward)."""
    as_utc = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    return as_utc.astimezone(tz).replace(tzinfo=None) != naive


def local_to_utc(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of wall-clock `day at` in `tz`; gap -> shifted forward, overlap -> first."""
    naive = datetime.combine(day, at.replace(tzinfo=None))
    if is_gap(naive, tz):
        # fold=0 applies the offset in force before the transition: the same distance past
        # the transition as the wall time was past the last valid minute (shift forward).
        before = naive.replace(tzinfo=tz, fold=0).utcoffset()
        return (naive - before).replace(tzinfo=UTC)
    # fold=0 is the first of two occurrences in an overlap, and the only one otherwise.
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC)


def next_occurrence(at: time, tz: ZoneInfo, *, now: datetime, day: date | None = None) -> datetime:
    """When `at` next happens in `tz` after `now`; on `day` if given (a past one is an error)."""
    if day is not None:
        due = local_to_utc(day, at, tz)
        if due <= now:
            raise TimingError("date", f"{day.isoformat()} {at.isoformat()} in {tz.key} has passed.")
        return due
    today = now.astimezone(tz).date()
    due = local_to_utc(today, at, tz)
    return due if due > now else local_to_utc(today + timedelta(days=1), at, tz)


def due_by_timezone(
    at: time, timezones: Iterable[str], *, now: datetime, day: date | None = None
) -> dict[str, datetime]:
    """One UTC instant per distinct timezone name (unknown names raise TimingError)."""
    return {name: next_occurrence(at, zone(name), now=now, day=day) for name in set(timezones)}


def due_values_sql(due: dict[str, datetime], *, alias: str = "due") -> tuple[str, list[object]]:
    """A VALUES table `alias(timezone, due_at)` to join in the fan-out's INSERT ... SELECT."""
    if not due:
        raise ValueError("no timezones")
    rows = ", ".join(["(%s, %s::timestamptz)"] * len(due))
    params: list[object] = [value for item in sorted(due.items()) for value in item]
    return f"(VALUES {rows}) AS {alias}(timezone, due_at)", params


def cron_validate(expression: str) -> str:
    """A normalised 5-field cron expression, or TimingError on `cron`."""
    normalised = " ".join(str(expression).split())
    if len(normalised.split(" ")) != CRON_FIELDS or not croniter.is_valid(normalised):
        raise TimingError("cron", f"Invalid cron expression {expression!r} (5 fields: m h dom mon dow).")
    try:
        # Valid fields can still name a day that never comes (31 February): croniter only finds
        # out when it walks, which would fail at the first run (or the create) as a 500.
        croniter(normalised, CRON_PROBE_START).get_next(datetime)
    except CroniterBadDateError as exc:
        raise TimingError("cron", f"The cron expression {expression!r} never fires.") from exc
    return normalised


def cron_next_runs(expression: str, tz: ZoneInfo, *, after: datetime, count: int = 5) -> list[datetime]:
    """The next `count` UTC run times of `expression` read as wall-clock time in `tz`.

    croniter walks naive wall-clock times (no DST), and each is mapped with `local_to_utc`, so
    runs follow local time across DST: a daily 09:00 stays at 09:00 local. A run in a gap is
    shifted forward; a run in an overlap happens once (first occurrence); the list is strictly
    increasing.
    """
    expression = cron_validate(expression)
    start = after.astimezone(tz).replace(tzinfo=None, fold=0) - timedelta(hours=3)
    walker = croniter(expression, start)
    runs: list[datetime] = []
    for _ in range(MAX_CRON_SCAN):
        local = walker.get_next(datetime)
        when = local_to_utc(local.date(), local.time(), tz)
        if when > after and (not runs or when > runs[-1]):
            runs.append(when)
            if len(runs) == count:
                break
    return runs
