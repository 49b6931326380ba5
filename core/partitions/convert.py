"""Move an unpartitioned table into the day-partitioned layout while the system runs.

1. prepare (one short transaction): a partitioned copy `<table>__new` with the same columns
   and indexes; partitions for the old rows' ids, one per day of their time column (the ids
   grew with time), and for the coming days; a trigger on the old table that repeats every
   INSERT, UPDATE and DELETE into the copy; `copy_until`, the last id then.
2. copy, in batches of one transaction each, ids up to `copy_until` (`FOR KEY SHARE`: a
   concurrent DELETE waits for the batch, so a deleted row is never copied back). Progress is
   kept in `notifier_partition_move`: stopped anywhere, run again, it goes on.
3. swap (one short transaction, ACCESS EXCLUSIVE on the old table only as long as it takes to
   rename): the copy takes the table's name, indexes and constraints; the old table is dropped.
Rows written during 1-3 reach the copy through the trigger; an update of a row the copy has not
reached yet is written there first, and the batch, finding it, leaves it (ON CONFLICT DO NOTHING).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import OperationalError, connection, transaction

from core.partitions.catalog import is_partitioned, partitions_of
from core.partitions.create import BUILDING_SUFFIX, days_ensure, index_sql, parent_indexes, partition_create
from core.partitions.routing import floors_forget
from core.partitions.spec import (
    ID_FUNCTION,
    ID_FUNCTION_SQL,
    DayPartitioned,
    day_floor,
    partition_name,
    span_start,
)

STATE_TABLE = "notifier_partition_move"
AHEAD_DAYS = 7


def building_name(spec: DayPartitioned) -> str:
    return f"{spec.table}__new"


def convert(spec: DayPartitioned, *, batch_size: int = 10_000, pause: float = 0.0,
            max_batches: int | None = None, log: Callable[[str], None] = lambda _: None) -> str:
    """Run (or resume) the conversion of `spec.table`; what it did, in words. `max_batches`
    stops after that many batches (resumable), `pause` sleeps between them."""
    with connection.cursor() as cursor:
        if is_partitioned(cursor, spec.table):
            return "already partitioned"
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (table_name text PRIMARY KEY, "
                       "copy_until bigint, copied_through bigint NOT NULL, "
                       "copied_rows bigint NOT NULL DEFAULT 0, "
                       "started_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz)")
        if _state(cursor, spec) is None:
            with transaction.atomic():
                _prepare(cursor, spec)
            log(f"{spec.table}: prepared {building_name(spec)} and its partitions")
        batches = 0
        while max_batches is None or batches < max_batches:
            copied = _copy_batch(cursor, spec, batch_size)
            if copied == 0:
                break
            batches += 1
            log(f"{spec.table}: copied {copied} rows (batch {batches})")
            time.sleep(pause)
        else:
            return f"{spec.table}: stopped after {batches} batches; run again to go on"
        _swap(cursor, spec, log)
    floors_forget()
    return f"{spec.table}: partitioned ({batches} batches copied)"


def _state(cursor, spec: DayPartitioned) -> tuple[int, int] | None:
    cursor.execute(f"SELECT copy_until, copied_through FROM {STATE_TABLE} WHERE table_name = %s",
                   [spec.table])
    return cursor.fetchone()


def _prepare(cursor, spec: DayPartitioned) -> None:
    old, new = spec.table, building_name(spec)
    cursor.execute(ID_FUNCTION_SQL)
    primary = "id" if spec.key == "id" else f"id, {spec.key}"
    cursor.execute(f'DROP TABLE IF EXISTS "{new}" CASCADE')  # a prepare that failed halfway
    cursor.execute(f'CREATE TABLE "{new}" (LIKE "{old}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS, '
                   f'PRIMARY KEY ({primary})) PARTITION BY RANGE ({spec.key})')
    _copy_uniques(cursor, spec, new)
    for name, definition in parent_indexes(cursor, old):
        cursor.execute(index_sql(definition, f"{name}{BUILDING_SUFFIX}", new))
    cursor.execute(f'CREATE SEQUENCE IF NOT EXISTS "{spec.sequence}" OWNED BY "{new}".id')
    default = f"{ID_FUNCTION}('{spec.sequence}')" if spec.coded_id else f"nextval('{spec.sequence}')"
    cursor.execute(f'ALTER TABLE "{new}" ALTER COLUMN id SET DEFAULT {default}')
    cursor.execute("SELECT floor(extract(epoch FROM now()) / 86400)::int")
    start_day = cursor.fetchone()[0]
    for name, lower, upper in _bounds(cursor, spec, start_day):
        partition_create(cursor, spec, new, name, lower, upper)
    # The coming days: the first span from today (its days before today hold no id).
    days_ensure(cursor, spec, range(start_day, start_day + AHEAD_DAYS + 1), parent=new)
    _sync_trigger(cursor, spec, old, new)
    cursor.execute(f'SELECT max(id) FROM "{old}"')
    copy_until = cursor.fetchone()[0]
    cursor.execute(f"INSERT INTO {STATE_TABLE} (table_name, copy_until, copied_through) VALUES (%s, %s, %s)",
                   [spec.table, copy_until, -(1 << 63)])


def _copy_uniques(cursor, spec: DayPartitioned, new: str) -> None:
    """The old table's unique constraints: on the parent when they hold the key, else each
    partition's own (the spec must name them: a uniqueness is never lost unnoticed)."""
    cursor.execute("SELECT conname, pg_get_constraintdef(oid), "
                   "ARRAY(SELECT attname FROM pg_attribute "
                   "WHERE attrelid = conrelid AND attnum = ANY(conkey)) "
                   "FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'u'", [spec.table])
    per_leaf = {unique.name for unique in spec.leaf_unique}
    for name, definition, columns in cursor.fetchall():
        if spec.key in columns:
            cursor.execute(f'ALTER TABLE "{new}" ADD CONSTRAINT "{name}{BUILDING_SUFFIX}" {definition}')
        elif name not in per_leaf:
            raise ValueError(f"{spec.table}.{name} is unique without {spec.key}: name it in leaf_unique")


def _bounds(cursor, spec: DayPartitioned, start_day: int) -> list[tuple[str, int | None, int]]:
    """(name, lower, upper) of every partition the copy starts with: the old rows' days and
    the days from today on."""
    if spec.bounds_from:
        source = partitions_of(cursor, spec.bounds_from)
        if not source:
            raise ValueError(f"{spec.table} takes its days from {spec.bounds_from}: convert that first")
        return [(part.name.replace(spec.bounds_from, spec.table, 1), part.lower, part.upper)
                for part in source]
    cursor.execute(f'SELECT floor(extract(epoch FROM {spec.time_column}) / 86400)::int, min(id) '
                   f'FROM "{spec.table}" GROUP BY 1 ORDER BY 1')
    today_span = span_start(start_day)
    # [span, last day seen, lower]: one range per span of days, named by the last day it holds
    # (expiry's measure), lowers strictly increasing (the ids of two days may interleave).
    ranges: list[list] = []
    for day, lowest in cursor.fetchall():
        span = min(span_start(day), today_span)
        if ranges and (span == ranges[-1][0] or lowest <= ranges[-1][2]):
            ranges[-1][1] = max(ranges[-1][1], min(day, start_day))
            continue
        ranges.append([span, min(day, start_day), lowest])
    if not ranges or ranges[-1][1] < start_day:  # what the old table gets until the swap
        cursor.execute(f'SELECT coalesce(max(id), 0) + 1 FROM "{spec.table}"')
        ranges.append([today_span, start_day, cursor.fetchone()[0]])
    ranges[0][2] = None  # MINVALUE: nothing below the first day
    # The last range ends where the coded ids of today's span begin.
    uppers = [lower for _span, _last, lower in ranges[1:]] + [day_floor(today_span)]
    return [(partition_name(spec.table, last, legacy=True), lower, upper)
            for (_span, last, lower), upper in zip(ranges, uppers, strict=True)]


def _sync_trigger(cursor, spec: DayPartitioned, old: str, new: str) -> None:
    cursor.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                   "AND NOT attisdropped ORDER BY attnum", [old])
    columns = [row[0] for row in cursor.fetchall()]
    keys = ["id"] if spec.key == "id" else ["id", spec.key]
    sets = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in columns if c not in keys)
    match = " AND ".join(f'"{k}" = OLD."{k}"' for k in keys)
    cursor.execute(f"""
CREATE OR REPLACE FUNCTION "{old}__sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM "{new}" WHERE {match};
  ELSE
    INSERT INTO "{new}" SELECT (NEW).* ON CONFLICT ({", ".join(keys)}) DO UPDATE SET {sets};
  END IF;
  RETURN NULL;
END $$""")
    cursor.execute(f'CREATE TRIGGER "{old}__sync" AFTER INSERT OR UPDATE OR DELETE ON "{old}" '
                   f'FOR EACH ROW EXECUTE FUNCTION "{old}__sync"()')


def _copy_batch(cursor, spec: DayPartitioned, batch_size: int) -> int:
    """Copy the next batch up to `copy_until`; the rows it read (0: done)."""
    with transaction.atomic():
        cursor.execute(
            f"""WITH batch AS (
  SELECT o.* FROM "{spec.table}" o, {STATE_TABLE} s
  WHERE s.table_name = %s AND o.id > s.copied_through AND o.id <= s.copy_until
  ORDER BY o.id LIMIT %s FOR KEY SHARE OF o
), written AS (INSERT INTO "{building_name(spec)}" SELECT * FROM batch ON CONFLICT DO NOTHING)
UPDATE {STATE_TABLE} SET copied_through = (SELECT max(id) FROM batch),
  copied_rows = copied_rows + (SELECT count(*) FROM batch), updated_at = now()
WHERE table_name = %s AND EXISTS (SELECT 1 FROM batch) RETURNING (SELECT count(*) FROM batch)""",
            [spec.table, batch_size, spec.table])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _swap(cursor, spec: DayPartitioned, log: Callable[[str], None], attempts: int = 20) -> None:
    """Under a lock held for milliseconds; a lock not had within 2 s is tried again later
    (a writer never queues behind it for longer)."""
    for attempt in range(1, attempts + 1):
        try:
            with transaction.atomic():
                cursor.execute("SET LOCAL lock_timeout = '2s'")
                cursor.execute(f'LOCK TABLE "{spec.table}" IN ACCESS EXCLUSIVE MODE')
                _swap_locked(cursor, spec)
            log(f"{spec.table}: swapped")
            return
        except OperationalError as error:
            if "lock timeout" not in str(error) or attempt == attempts:
                raise
            log(f"{spec.table}: swap waited 2 s for its lock, trying again")
            time.sleep(1.0)


def _swap_locked(cursor, spec: DayPartitioned) -> None:
    old, new = spec.table, building_name(spec)
    cursor.execute(f"SELECT copied_through >= coalesce(copy_until, copied_through) FROM {STATE_TABLE} "
                   "WHERE table_name = %s", [spec.table])
    if not cursor.fetchone()[0]:
        raise RuntimeError(f"{spec.table}: the copy has not finished")
    building_indexes = [name for name, _definition in parent_indexes(cursor, new)]
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'u'",
                   [new])
    building_uniques = [row[0] for row in cursor.fetchall()]
    _drop_references(cursor, old)
    cursor.execute(f'DROP TABLE "{old}"')
    cursor.execute(f'DROP FUNCTION "{old}__sync"()')
    cursor.execute(f'ALTER TABLE "{new}" RENAME TO "{old}"')
    cursor.execute(f'ALTER TABLE "{old}" RENAME CONSTRAINT "{new}_pkey" TO "{old}_pkey"')
    for name in building_uniques:
        plain = name.removesuffix(BUILDING_SUFFIX)
        cursor.execute(f'ALTER TABLE "{old}" RENAME CONSTRAINT "{name}" TO "{plain}"')
    for name in building_indexes:
        if name.endswith(BUILDING_SUFFIX):
            cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{name.removesuffix(BUILDING_SUFFIX)}"')
    for part in partitions_of(cursor, old):  # a range no row reached (a new install: all)
        cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{part.name}")')
        if part.legacy and not cursor.fetchone()[0]:
            cursor.execute(f'ALTER TABLE "{old}" DETACH PARTITION "{part.name}"')
            cursor.execute(f'DROP TABLE "{part.name}"')
    if not spec.coded_id:
        cursor.execute(f"SELECT setval('{spec.sequence}', greatest((SELECT max(id) FROM \"{old}\"), 1))")
    _name_last_range_today(cursor, old)
    cursor.execute(f"DELETE FROM {STATE_TABLE} WHERE table_name = %s", [spec.table])


def _drop_references(cursor, table: str) -> None:
    """Foreign keys of other tables to this one: a partition a key references could never be
    dropped, so none may exist (the models say db_constraint=False; their own migrations, which
    may run after this one, then find nothing to drop)."""
    cursor.execute("SELECT conrelid::regclass::text, conname FROM pg_constraint "
                   "WHERE confrelid = to_regclass(%s) AND contype = 'f'", [table])
    for referencing, name in cursor.fetchall():
        cursor.execute(f'ALTER TABLE {referencing} DROP CONSTRAINT "{name}"')


def _name_last_range_today(cursor, table: str) -> None:
    """The last converted range took the old table's rows until now: it is named by today."""
    legacy = [part for part in partitions_of(cursor, table) if part.legacy]
    if not legacy:
        return
    cursor.execute("SELECT floor(extract(epoch FROM now()) / 86400)::int")
    name = partition_name(table, cursor.fetchone()[0], legacy=True)
    last = max(legacy, key=lambda part: part.upper)
    if last.name != name:
        cursor.execute(f'ALTER TABLE "{last.name}" RENAME TO "{name}"')


# Up to this many rows a migration converts the table itself (seconds); above, the operator
# runs `manage.py partition_tables` while the system runs (docs/operations.md).
MIGRATION_ROW_LIMIT = 100_000


def convert_if_small(spec: DayPartitioned, *, limit: int = MIGRATION_ROW_LIMIT) -> str:
    """A migration's step: convert a new install's (or a small) table at once; leave a big one
    unpartitioned, working as before, for `manage.py partition_tables`."""
    with connection.cursor() as cursor:
        if is_partitioned(cursor, spec.table):
            return f"{spec.table}: already partitioned"
        if spec.bounds_from and not is_partitioned(cursor, spec.bounds_from):
            return f"{spec.table}: left unpartitioned until {spec.bounds_from} is"
        cursor.execute(f'SELECT count(*) FROM (SELECT 1 FROM "{spec.table}" LIMIT {int(limit) + 1}) t')
        if cursor.fetchone()[0] > limit:
            return (f"{spec.table}: more than {limit} rows, left unpartitioned: "
                    "run `manage.py partition_tables` (docs/operations.md)")
    return convert(spec)
