"""What a day-partitioned table is, the registry the apps fill, and the day arithmetic."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

DAY_BITS = 32
EPOCH = date(1970, 1, 1)
# 1970-01-01 was a Thursday: spans of 7 days start on Mondays, 1969-12-29 being day -3.
_MONDAY_OFFSET = 3
# The SQL function every coded id comes from (created by `ensure_id_function`). `now()`, not
# the clock: one statement's rows share a day, and the day is the database's, the same clock
# the partitions are created by.
ID_FUNCTION = "notifier_day_id"
ID_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {ID_FUNCTION}(seq regclass) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT (floor(extract(epoch FROM now()) / 86400)::bigint << {DAY_BITS})
         | (nextval(seq) & {(1 << DAY_BITS) - 1})
$$"""


@dataclass(frozen=True)
class LeafUnique:
    """A unique index each partition has on its own: PostgreSQL allows a unique index on a
    partitioned table only if it holds the partition key, so uniqueness across days is the
    writer's business (routing.idempotency_floor)."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class DayPartitioned:
    """A table partitioned by day on `key`.

    `coded_id`: the table's own id is the key and comes from `notifier_day_id`; otherwise the
    key is another table's coded id (a mark's message_id) and the id a plain sequence.
    `time_column`: what dates an unpartitioned table's rows when it is converted.
    `in_flight`: a predicate; a partition holding such a row is never dropped (a scheduled
    message is never expired before it is sent). `dependents`: (table, column) of rows that
    name this table's key without a constraint and go with a dropped day.
    """

    table: str
    key: str = "id"
    coded_id: bool = True
    time_column: str = "created_at"
    leaf_unique: tuple[LeafUnique, ...] = ()
    in_flight: str = ""
    dependents: tuple[tuple[str, str], ...] = ()
    # Converted after this table (its legacy ranges are that table's): a mark after its message.
    bounds_from: str = ""

    @property
    def sequence(self) -> str:
        return f"{self.table}_day_seq" if self.coded_id else f"{self.table}_part_seq"


# The coming days whose partitions exist ahead (upkeep, and a conversion's first ones).
AHEAD_DAYS = 7
# Up to this many rows a migration converts a table itself, or turns it back (seconds); above,
# `manage.py partition_tables` moves it while the system runs (docs/operations.md).
SMALL_TABLE_ROWS = 100_000

_REGISTRY: dict[str, DayPartitioned] = {}


def register(spec: DayPartitioned) -> DayPartitioned:
    """Called by the owning app at import of its partitioning module (idempotent)."""
    _REGISTRY[spec.table] = spec
    return spec


def registered_table(table: str) -> DayPartitioned | None:
    return _REGISTRY.get(table)


def registered() -> list[DayPartitioned]:
    """Every registered table, each after the table it takes its bounds from."""
    specs = sorted(_REGISTRY.values(), key=lambda spec: spec.table)
    return sorted(specs, key=lambda spec: bool(spec.bounds_from))


def day_number(moment: datetime | date) -> int:
    """Days since 1970-01-01 in UTC."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date()
    return (moment - EPOCH).days


def span_days() -> int:
    """Days per partition (NOTIFIER_PARTITION_DAYS, default 7: decision 122 measured why). The
    ids carry their day whatever it is, so changing it changes only the partitions created
    from then on."""
    from django.conf import settings

    return max(1, int(getattr(settings, "NOTIFIER_PARTITION_DAYS", 7)))


def span_start(day: int, span: int | None = None) -> int:
    """The first day of the partition span holding `day` (a Monday for weeks)."""
    span = span or span_days()
    offset = _MONDAY_OFFSET if span == 7 else 0
    return (day + offset) // span * span - offset


def day_date(number: int) -> date:
    return EPOCH + timedelta(days=number)


def day_floor(number: int) -> int:
    """The smallest coded id of a day."""
    return number << DAY_BITS


def day_of_id(value: int) -> int:
    return value >> DAY_BITS


def partition_name(table: str, number: int, *, legacy: bool = False) -> str:
    return f"{table}_{day_date(number):%Y%m%d}{'_l' if legacy else ''}"


@dataclass(frozen=True)
class Partition:
    """One attached partition: its day (the first of its span; for a converted table's range,
    the last day it may hold rows of), and its bounds (None: MINVALUE)."""

    name: str
    day: int
    lower: int | None
    upper: int
    legacy: bool = field(default=False)

    @property
    def last_day(self) -> int:
        """The last day a row in it may be from. A converted range's bounds come from row
        times that the ids follow only roughly, so it is given one more day."""
        return self.day + 1 if self.legacy else day_of_id(self.upper - 1)
