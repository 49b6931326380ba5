"""A partition of a span of days: created as a plain table with its indexes, then attached.

`CREATE TABLE .. PARTITION OF` would hold an ACCESS EXCLUSIVE lock on the parent; ATTACH
PARTITION holds SHARE UPDATE EXCLUSIVE, which no INSERT, UPDATE or SELECT waits on. The empty
table's indexes are built before the attach, under the names the parent's indexes give them
(`<index>_YYYYMMDD`), so a plan names the index a test or an operator looks for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.partitions.catalog import is_partitioned, partitions_of
from core.partitions.spec import DayPartitioned, Partition, day_floor, partition_name, span_days, span_start

# A parent index of a table being converted carries this suffix until the swap (the old table
# still holds the plain name); its partitions' indexes are named after the plain name.
BUILDING_SUFFIX = "__n"
_INDEX_HEAD = re.compile(r"^CREATE (UNIQUE )?INDEX \S+ ON (ONLY )?\S+ ")


def parent_indexes(cursor, parent: str) -> list[tuple[str, str]]:
    """(name, definition) of the parent's indexes that back no constraint (ATTACH makes the
    primary key's and the unique constraints' own)."""
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = to_regclass(%s) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) ORDER BY i.relname", [parent])
    return list(cursor.fetchall())


def index_sql(definition: str, name: str, table: str) -> str:
    """An index's definition (pg_get_indexdef) for another name on another table."""
    return _INDEX_HEAD.sub(lambda m: f'CREATE {m.group(1) or ""}INDEX "{name}" ON "{table}" ', definition)


def leaf_index_name(parent_index: str, leaf: str, table: str) -> str:
    """`msg_status_claimed_idx` on `delivery_emailmessage_20261205`: msg_status_claimed_idx_20261205."""
    return f"{parent_index.removesuffix(BUILDING_SUFFIX)}{leaf.removeprefix(table)}"


def partition_create(cursor, spec: DayPartitioned, parent: str, name: str, lower: int | None,
                     upper: int) -> None:
    """Create `name` for keys [lower, upper) of `parent` (spec's table, or its building copy)
    and attach it. The caller holds the table's creation lock (`creation_lock`)."""
    cursor.execute(f'CREATE TABLE "{name}" (LIKE "{parent}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)')
    for index, definition in parent_indexes(cursor, parent):
        cursor.execute(index_sql(definition, leaf_index_name(index, name, spec.table), name))
    for unique in spec.leaf_unique:
        cursor.execute(f'CREATE UNIQUE INDEX "{leaf_index_name(unique.name, name, spec.table)}" ON "{name}" '
                       f'({", ".join(unique.columns)})')
    low = "MINVALUE" if lower is None else str(int(lower))
    cursor.execute(f'ALTER TABLE "{parent}" ATTACH PARTITION "{name}" '
                   f"FOR VALUES FROM ({low}) TO ({int(upper)})")


def creation_lock(cursor, table: str) -> None:
    """One creator per table at a time (transaction-scoped: released at commit)."""
    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"partitions:{table}"])


def days_ensure(cursor, spec: DayPartitioned, days: Iterable[int], *, parent: str | None = None) -> list[str]:
    """Create the missing partitions of `days`; the names created. Run it in a transaction
    (the lock is the transaction's). Nothing when the table is not partitioned yet."""
    parent = parent or spec.table
    if not is_partitioned(cursor, parent):
        return []
    creation_lock(cursor, spec.table)
    existing = partitions_of(cursor, parent)
    created = []
    span = span_days()
    for day in days:
        if any(_overlaps(part, day_floor(day), day_floor(day + 1)) for part in existing):
            continue
        first = span_start(day, span)
        if any(_overlaps(part, day_floor(first), day_floor(first + span)) for part in existing):
            first, span_here = day, 1  # partitions of another span around it (the setting changed)
        else:
            span_here = span
        name = partition_name(spec.table, first)
        lower, upper = day_floor(first), day_floor(first + span_here)
        partition_create(cursor, spec, parent, name, lower, upper)
        existing.append(Partition(name=name, day=first, lower=lower, upper=upper))
        created.append(name)
    return created


def _overlaps(part: Partition, lower: int, upper: int) -> bool:
    return (part.lower is None or part.lower < upper) and lower < part.upper

