"""Writes into day partitions: a missing partition is created, never an error on the send path;
uniqueness across days is checked from the idempotency floor.

Partitions are created a week ahead (`upkeep`), so a missing one means the upkeep has not run
for a week or the database clock jumped: the INSERT that finds no partition creates it, on a
connection of its own so every other writer sees it at once, and runs again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.partitions.catalog import is_partitioned, partitions_of
from core.partitions.create import days_ensure
from core.partitions.spec import day_floor, day_number, day_of_id, registered_table

NO_FLOOR = -(1 << 63)
_NO_PARTITION = re.compile(r'no partition of relation "([^"]+)" found for row')
_KEY_VALUE = re.compile(r"\) = \((-?\d+)")
_floors: dict[str, tuple[int, int]] = {}
_partitioned: dict[str, tuple[int, bool]] = {}
ID_FLOOR_MARGIN = timedelta(hours=1)


def execute_routed(cursor, sql: str, params: object = None) -> None:
    """`cursor.execute(sql, params)`; when the row's day has no partition, create it and run
    the statement again. Inside a transaction the statement runs under a savepoint, so the
    failed attempt leaves the transaction usable."""
    for attempt in (1, 2):
        savepoint = transaction.savepoint() if connection.in_atomic_block else None
        try:
            cursor.execute(sql, params)
        except IntegrityError as error:
            if savepoint:
                transaction.savepoint_rollback(savepoint)
            missing = _missing_partition(error)
            if missing is None or attempt == 2:
                raise
            _create_elsewhere(*missing)
            continue
        if savepoint:
            transaction.savepoint_commit(savepoint)
        return


def _missing_partition(error: IntegrityError) -> tuple[str, int] | None:
    cause = error.__cause__
    match = _NO_PARTITION.search(str(cause or error))
    detail = getattr(getattr(cause, "diag", None), "message_detail", None) or ""
    value = _KEY_VALUE.search(detail)
    if match is None or value is None or registered_table(match.group(1)) is None:
        return None
    return match.group(1), day_of_id(int(value.group(1)))


def _create_elsewhere(table: str, day: int) -> None:
    """Create the day's partition and commit it on a connection of its own."""
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            days_ensure(cursor, registered_table(table), [day])
            cursor.execute("COMMIT")
    finally:
        other.close()


def idempotency_floor(table: str) -> int:
    """The smallest key of the partitions holding yesterday and later: a writer checks an
    idempotency key among these (its own partition's unique index catches the rest), so a key
    is honoured for at least 24 hours (the rest of its UTC day and the whole next one; up to
    the rest of the span before, with spans of a week).
    NO_FLOOR on a table not (yet) partitioned, whose unique index covers every row."""
    today = day_number(timezone.now())
    cached = _floors.get(table)
    if cached and cached[0] == today:
        return cached[1]
    with connection.cursor() as cursor:
        recent = ([part for part in partitions_of(cursor, table) if part.last_day >= today - 1]
                  if is_partitioned(cursor, table) else [])
    lowers = [part.lower for part in recent]
    floor = NO_FLOOR if not lowers or None in lowers else min(lowers)
    _floors[table] = (today, floor)
    return floor


def id_floor_since(table: str, moment: datetime) -> int:
    """The smallest id a row of `table` written at `moment` or later can carry, on a table whose
    ids carry their day (a partitioned one): with `id >= this` beside a time filter PostgreSQL
    leaves every older partition out of the plan. An hour's margin covers the clocks of the
    application (created_at) and of the database (the id's day) disagreeing around midnight.
    NO_FLOOR on a table not partitioned yet (a plain sequence's ids)."""
    today = day_number(timezone.now())
    cached = _partitioned.get(table)
    if not cached or cached[0] != today:
        with connection.cursor() as cursor:
            cached = _partitioned[table] = (today, is_partitioned(cursor, table))
    return day_floor(day_number(moment - ID_FLOOR_MARGIN)) if cached[1] else NO_FLOOR


def floors_forget() -> None:
    """After a conversion or in a test that moves days: read the floors again."""
    _floors.clear()
    _partitioned.clear()


def ids_span_sql(alias: str, ids: Iterable[int]) -> str:
    """`alias.id BETWEEN lowest AND highest` as literals: an UPDATE .. FROM a list of ids prunes
    its own partitions at plan time (a join alone leaves every partition in the plan)."""
    values = [int(value) for value in ids]
    return f"{alias}.id BETWEEN {min(values)} AND {max(values)}"
