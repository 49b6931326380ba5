"""The partitions that exist, read from pg_catalog (no registry of our own to drift from it)."""

from __future__ import annotations

import re
from datetime import datetime

from core.partitions.spec import EPOCH, Partition

_BOUND = re.compile(r"FROM \((MINVALUE|'?(-?\d+)'?)\) TO \('?(-?\d+)'?\)")
_NAME_DAY = re.compile(r"_(\d{8})(_l)?$")


def exists(cursor, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
    return bool(cursor.fetchone()[0])


def rows_exceed(cursor, table: str, limit: int) -> bool:
    """More than `limit` rows (reads at most limit + 1 of them)."""
    cursor.execute(f'SELECT count(*) FROM (SELECT 1 FROM "{table}" LIMIT {int(limit) + 1}) t')
    return cursor.fetchone()[0] > limit


def database_day(cursor) -> int:
    """Today in days since 1970-01-01 by the database's clock (the one `notifier_day_id` reads)."""
    cursor.execute("SELECT floor(extract(epoch FROM now()) / 86400)::int")
    return cursor.fetchone()[0]


def unique_constraints(cursor, table: str) -> list[tuple[str, str, list[str]]]:
    """(name, definition, columns) of the table's unique constraints."""
    cursor.execute("SELECT conname, pg_get_constraintdef(oid), "
                   "ARRAY(SELECT attname FROM pg_attribute "
                   "WHERE attrelid = conrelid AND attnum = ANY(conkey)) "
                   "FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'u'", [table])
    return [(name, definition, list(columns)) for name, definition, columns in cursor.fetchall()]


def is_partitioned(cursor, table: str) -> bool:
    cursor.execute("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass(%s)", [table])
    row = cursor.fetchone()
    return bool(row and row[0])


def partitions_of(cursor, table: str) -> list[Partition]:
    """The table's day partitions in key order (a name without a day is not ours: skipped)."""
    cursor.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)", [table])
    found = []
    for name, bound in cursor.fetchall():
        day, legacy = _day_in_name(name)
        match = _BOUND.search(bound or "")
        if day is None or match is None:
            continue
        lower = None if match.group(1) == "MINVALUE" else int(match.group(2))
        found.append(Partition(name=name, day=day, lower=lower, upper=int(match.group(3)), legacy=legacy))
    return sorted(found, key=lambda part: part.upper)


def detached_leftovers(cursor, table: str) -> list[str]:
    """Tables named like a partition of `table` that are no partition (an expiry stopped
    between its detach and its drop): what the next expiry drops."""
    cursor.execute(
        "SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition "
        "AND relnamespace = current_schema()::regnamespace AND relname ~ %s",
        [f"^{re.escape(table)}_[0-9]{{8}}(_l)?$"])
    return sorted(row[0] for row in cursor.fetchall())


def _day_in_name(name: str) -> tuple[int | None, bool]:
    match = _NAME_DAY.search(name)
    if match is None:
        return None, False
    day = datetime.strptime(match.group(1), "%Y%m%d").date()
    return (day - EPOCH).days, bool(match.group(2))
