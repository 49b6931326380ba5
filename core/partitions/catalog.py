"""The partitions that exist, read from pg_catalog (no registry of our own to drift from it)."""

from __future__ import annotations

import re
from datetime import datetime

from core.partitions.spec import EPOCH, Partition

_BOUND = re.compile(r"FROM \((MINVALUE|'?(-?\d+)'?)\) TO \('?(-?\d+)'?\)")
_NAME_DAY = re.compile(r"_(\d{8})(_l)?$")


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
