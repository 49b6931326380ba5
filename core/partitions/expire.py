"""Expiry by the day: detach a partition whose every row is past the retention, then drop it.

`DETACH PARTITION .. CONCURRENTLY` holds SHARE UPDATE EXCLUSIVE on the parent, which no
INSERT, UPDATE or SELECT waits on (a plain DETACH would hold ACCESS EXCLUSIVE on it); it waits
for the statements already using the partition. Dropping the detached table then touches no
lock of the parent. A partition with a row still in flight (a message scheduled past the
retention, a send not settled) is kept and reported, never dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from core.partitions.catalog import detached_leftovers, is_partitioned, partitions_of
from core.partitions.spec import DayPartitioned, Partition, day_date, day_number


@dataclass(frozen=True)
class Dropped:
    table: str
    partition: str
    day: str
    rows: int  # the planner's estimate (pg_class.reltuples): counting would read the day
    seconds: float
    kept_in_flight: bool = False


def expired_partitions(cursor, spec: DayPartitioned, before: datetime) -> list[Partition]:
    """The partitions whose rows are all older than `before`."""
    if not is_partitioned(cursor, spec.table):
        return []
    cutoff = day_number(before)
    return [part for part in partitions_of(cursor, spec.table) if part.last_day < cutoff]


def partitions_expire(spec: DayPartitioned, before: datetime, *, dry_run: bool = False) -> list[Dropped]:
    """Detach and drop every partition of `spec` past `before` (its in-flight ones kept)."""
    with connection.cursor() as cursor:
        done = [Dropped(spec.table, name, "", 0, _drop(cursor, name))
                for name in ([] if dry_run else detached_leftovers(cursor, spec.table))]
        for part in expired_partitions(cursor, spec, before):
            rows = _estimated_rows(cursor, part.name)
            if spec.in_flight and _holds(cursor, part.name, spec.in_flight):
                done.append(Dropped(spec.table, part.name, _day(part), rows, 0.0, kept_in_flight=True))
                continue
            seconds = 0.0 if dry_run else _detach_and_drop(cursor, spec, part)
            done.append(Dropped(spec.table, part.name, _day(part), rows, seconds))
    return done


def _detach_and_drop(cursor, spec: DayPartitioned, part: Partition) -> float:
    started = time.perf_counter()
    for table, column in spec.dependents:
        low = "" if part.lower is None else f"{column} >= {int(part.lower)} AND "
        cursor.execute(f'DELETE FROM "{table}" WHERE {low}{column} < {int(part.upper)}')
    cursor.execute("SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass(%s)", [part.name])
    row = cursor.fetchone()
    # CONCURRENTLY runs in no transaction block: inside one (a test's), the plain form.
    how = "" if connection.in_atomic_block else " CONCURRENTLY"
    if row and row[0]:
        how = " FINALIZE"  # an earlier CONCURRENTLY detach stopped halfway
    if row is not None:
        cursor.execute(f'ALTER TABLE "{spec.table}" DETACH PARTITION "{part.name}"{how}')
    return time.perf_counter() - started + _drop(cursor, part.name)


def _drop(cursor, name: str) -> float:
    started = time.perf_counter()
    cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
    return time.perf_counter() - started


def _holds(cursor, name: str, predicate: str) -> bool:
    cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{name}" WHERE {predicate})')
    return bool(cursor.fetchone()[0])


def _estimated_rows(cursor, name: str) -> int:
    cursor.execute("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%s)", [name])
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _day(part: Partition) -> str:
    return day_date(part.day).isoformat()
