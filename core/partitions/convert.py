"""Move an unpartitioned table into the day-partitioned layout while the system runs.

1. prepare (one short transaction): a partitioned copy `<table>__new` with the same columns
   and indexes; partitions for the old rows' ids, one per span of days of their time column
   (the ids grew with time), and for the coming days; a trigger on the old table that repeats every
   INSERT, UPDATE and DELETE into the copy; `copy_until`, the last id then.
2. copy, in batches of one transaction each, ids up to `copy_until` (`FOR KEY SHARE`: a
   concurrent DELETE waits for the batch, so a deleted row is never copied back). Progress is
   kept in `notifier_partition_move`: stopped anywhere, run again, it goes on.
3. swap (one short transaction, ACCESS EXCLUSIVE on the old table only as long as it takes to
   rename): the copy takes the table's name, indexes and constraints; the old table is renamed
   aside, and dropped after the commit.
Rows written during 1-3 reach the copy through the trigger; an update of a row the copy has not
reached yet is written there first, and the batch, finding it, leaves it (ON CONFLICT DO NOTHING).
One run per table at a time (a session advisory lock); `abort` undoes 1-2 (before the swap).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from django.db import DatabaseError, OperationalError, connection, transaction

from core.partitions.catalog import (
    database_day,
    exists,
    is_partitioned,
    partitions_of,
    rows_exceed,
    unique_constraints,
)
from core.partitions.create import BUILDING_SUFFIX, days_ensure, index_sql, parent_indexes, partition_create
from core.partitions.routing import floors_forget
from core.partitions.spec import (
    AHEAD_DAYS,
    ID_FUNCTION,
    ID_FUNCTION_SQL,
    SMALL_TABLE_ROWS,
    DayPartitioned,
    Partition,
    day_floor,
    partition_name,
    span_start,
)

STATE_TABLE = "notifier_partition_move"
# The old table is renamed aside under the swap's lock and dropped after it: dropping 1M rows
# and their indexes there held the lock 1.25 s (the files' unlinking at commit), renaming ms.
ASIDE_SUFFIX, INDEX_ASIDE_SUFFIX = "__old", "__o"


class ConversionError(Exception):
    """The table cannot be converted as it is (a clear message for the operator, no traceback)."""


def building_name(spec: DayPartitioned) -> str:
    return f"{spec.table}__new"


def convert(spec: DayPartitioned, *, batch_size: int = 10_000, pause: float = 0.0,
            max_batches: int | None = None, log: Callable[[str], None] = lambda _: None) -> str:
    """Run (or resume) the conversion of `spec.table`; what it did, in words. `max_batches`
    stops after that many batches (resumable), `pause` sleeps between them."""
    with connection.cursor() as cursor, _one_run(cursor, spec):
        if is_partitioned(cursor, spec.table):
            _drop_aside(cursor, spec, log)  # a run that stopped right after its swap
            return f"{spec.table}: already partitioned"
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (table_name text PRIMARY KEY, "
                       "copy_until bigint, copied_through bigint NOT NULL, "
                       "copied_rows bigint NOT NULL DEFAULT 0, "
                       "started_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz)")
        if _state(cursor, spec) is None:
            _refuse_unless_ready(cursor, spec)
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


def abort(spec: DayPartitioned) -> str:
    """Undo a conversion not yet swapped: the trigger, the copy and its progress go, the old
    table stays as it was (it was never written by the conversion)."""
    old, new = spec.table, building_name(spec)
    with connection.cursor() as cursor, _one_run(cursor, spec), transaction.atomic():
        if is_partitioned(cursor, old):
            return f"{old}: already partitioned (swapped): nothing to abort"
        cursor.execute(f'DROP TRIGGER IF EXISTS "{old}__sync" ON "{old}"')
        cursor.execute(f'DROP FUNCTION IF EXISTS "{old}__sync"()')
        cursor.execute(f'DROP TABLE IF EXISTS "{new}" CASCADE')  # its partitions and sequence
        if exists(cursor, STATE_TABLE):
            cursor.execute(f"DELETE FROM {STATE_TABLE} WHERE table_name = %s", [old])
    return f"{old}: conversion aborted, the table is as it was"


@contextmanager
def _one_run(cursor, spec: DayPartitioned) -> Iterator[None]:
    """One conversion of a table at a time: a second `partition_tables` would copy the same
    rows again and could swap a table the first had already swapped. A session lock: a run
    that dies releases it with its connection."""
    key = f"partitions:convert:{spec.table}"
    cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [key])
    if not cursor.fetchone()[0]:
        raise ConversionError(f"{spec.table}: another partition_tables is converting it")
    try:
        yield
    finally:
        with suppress(DatabaseError):  # in an aborted transaction: it goes with the session
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [key])


def _refuse_unless_ready(cursor, spec: DayPartitioned) -> None:
    """Before any work: the table it takes its days from is partitioned."""
    if spec.bounds_from and not is_partitioned(cursor, spec.bounds_from):
        raise ConversionError(f"{spec.table} takes its days from {spec.bounds_from}: "
                              f"convert that first (partition_tables --table {spec.bounds_from})")


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
    start_day = database_day(cursor)
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
    per_leaf = {unique.name for unique in spec.leaf_unique}
    for name, definition, columns in unique_constraints(cursor, spec.table):
        if spec.key in columns:
            cursor.execute(f'ALTER TABLE "{new}" ADD CONSTRAINT "{name}{BUILDING_SUFFIX}" {definition}')
        elif name not in per_leaf:
            raise ConversionError(f"{spec.table}.{name} is unique without {spec.key}: "
                                  "name it in leaf_unique")


def _bounds(cursor, spec: DayPartitioned, start_day: int) -> list[tuple[str, int | None, int]]:
    """(name, lower, upper) of the partitions of the old rows' ids, by span of days; the coming
    days' are created after them (days_ensure)."""
    if spec.bounds_from:
        return _bounds_of(cursor, spec)
    today_span = span_start(start_day)
    ranges = _legacy_ranges(cursor, spec, start_day)
    if not ranges or ranges[-1][0] < start_day:  # what the old table gets until the swap
        cursor.execute(f'SELECT coalesce(max(id), 0) + 1 FROM "{spec.table}"')
        ranges.append([start_day, cursor.fetchone()[0]])
    # From MINVALUE; the last range ends where the coded ids of today's span begin.
    lowers = [None, *(lower for _last, lower in ranges[1:])]
    uppers = [*(lower for _last, lower in ranges[1:]), day_floor(today_span)]
    return [(partition_name(spec.table, last, legacy=True), lower, upper)
            for (last, _lowest), lower, upper in zip(ranges, lowers, uppers, strict=True)]


def _legacy_ranges(cursor, spec: DayPartitioned, start_day: int) -> list[list[int]]:
    """[last day, lowest id] of each range of old ids: one per span of days (a week), lowest
    ids increasing. The ids grew with time only roughly (a row's time is taken before its id,
    clocks differ): spans whose ids overlap share one range, named by the latest day it holds,
    so no row sits in a range named by a day before its own and expiry never drops it early."""
    cursor.execute(f'SELECT least(floor(extract(epoch FROM {spec.time_column}) / 86400)::int, %s), '
                   f'min(id), max(id) FROM "{spec.table}" GROUP BY 1 ORDER BY 2', [start_day])
    ranges: list[list[int]] = []  # [span, last day, lowest id, highest id]; disjoint, increasing
    for day, lowest, highest in cursor.fetchall():
        span = span_start(day)
        if ranges and (lowest <= ranges[-1][3] or span <= ranges[-1][0]):
            last = ranges[-1]
            last[0], last[1], last[3] = max(last[0], span), max(last[1], day), max(last[3], highest)
            continue
        ranges.append([span, day, lowest, highest])
    return [[day, lowest] for _span, day, lowest, _highest in ranges]


def _bounds_of(cursor, spec: DayPartitioned) -> list[tuple[str, int | None, int]]:
    """The ranges of the table `spec` takes its days from (a mark's key is its message's id).
    Its old ranges are made contiguous from MINVALUE: a row of ours whose message's range is
    gone (empty at that table's swap, or expired) still has a partition, now and later."""
    source = partitions_of(cursor, spec.bounds_from)
    if not source:
        raise ConversionError(f"{spec.table} takes its days from {spec.bounds_from}: convert that first")
    bounds: list[tuple[str, int | None, int]] = []
    previous_legacy: Partition | None = None
    for part in source:
        lower = part.lower
        if part.legacy:
            lower = None if previous_legacy is None else previous_legacy.upper
            previous_legacy = part
        bounds.append((part.name.replace(spec.bounds_from, spec.table, 1), lower, part.upper))
    return bounds


def _sync_trigger(cursor, spec: DayPartitioned, old: str, new: str) -> None:
    cursor.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                   "AND NOT attisdropped ORDER BY attnum", [old])
    columns = [row[0] for row in cursor.fetchall()]
    keys = ["id"] if spec.key == "id" else ["id", spec.key]
    sets = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in columns if c not in keys)
    match = " AND ".join(f'"{k}" = OLD."{k}"' for k in keys)
    moved = " OR ".join(f'NEW."{k}" IS DISTINCT FROM OLD."{k}"' for k in keys)
    # An UPDATE that changes the key is a DELETE of the old key and an upsert of the new one.
    cursor.execute(f"""
CREATE OR REPLACE FUNCTION "{old}__sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND ({moved})) THEN
    DELETE FROM "{new}" WHERE {match};
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN NULL;
  ELSE
    INSERT INTO "{new}" SELECT (NEW).* ON CONFLICT ({", ".join(keys)}) DO UPDATE SET {sets};
  END IF;
  RETURN NULL;
END $$""")
    cursor.execute(f'CREATE TRIGGER "{old}__sync" AFTER INSERT OR UPDATE OR DELETE ON "{old}" '
                   f'FOR EACH ROW EXECUTE FUNCTION "{old}__sync"()')


def _copy_batch(cursor, spec: DayPartitioned, batch_size: int) -> int:
    """Copy the next batch up to `copy_until`; the rows it read (0: done). An empty batch marks
    the copy finished (`copied_through` = `copy_until`): the rows between the last one copied
    and `copy_until` were deleted meanwhile (the trigger deleted their copies too), and the swap
    takes only a finished copy."""
    with transaction.atomic():
        cursor.execute(
            f"""WITH batch AS (
  SELECT o.* FROM "{spec.table}" o, {STATE_TABLE} s
  WHERE s.table_name = %s AND o.id > s.copied_through AND o.id <= s.copy_until
  ORDER BY o.id LIMIT %s FOR KEY SHARE OF o
), written AS (INSERT INTO "{building_name(spec)}" SELECT * FROM batch ON CONFLICT DO NOTHING)
UPDATE {STATE_TABLE} SET copied_through = coalesce((SELECT max(id) FROM batch), copy_until, copied_through),
  copied_rows = copied_rows + (SELECT count(*) FROM batch), updated_at = now()
WHERE table_name = %s RETURNING (SELECT count(*) FROM batch)""",
            [spec.table, batch_size, spec.table])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _swap(cursor, spec: DayPartitioned, log: Callable[[str], None], attempts: int = 20) -> None:
    """Under a lock held for milliseconds; a lock not had within 2 s is tried again later
    (a writer never queues behind it for longer)."""
    for attempt in range(1, attempts + 1):
        try:
            started = time.perf_counter()
            with transaction.atomic():
                cursor.execute("SET LOCAL lock_timeout = '2s'")
                cursor.execute(f'LOCK TABLE "{spec.table}" IN ACCESS EXCLUSIVE MODE')
                locked = time.perf_counter()
                _swap_locked(cursor, spec)
            held = time.perf_counter() - locked  # to the commit: what a writer waited at most
            log(f"{spec.table}: swapped (lock waited for {(locked - started) * 1000:.0f} ms, "
                f"held {held * 1000:.0f} ms)")
            break
        except OperationalError as error:
            if "lock timeout" not in str(error) or attempt == attempts:
                raise
            log(f"{spec.table}: swap waited 2 s for its lock, trying again")
            time.sleep(1.0)
    _drop_aside(cursor, spec, log)


def _swap_locked(cursor, spec: DayPartitioned) -> None:
    old, new = spec.table, building_name(spec)
    cursor.execute(f"SELECT copied_through >= coalesce(copy_until, copied_through) FROM {STATE_TABLE} "
                   "WHERE table_name = %s", [spec.table])
    done = cursor.fetchone()
    if done is None or is_partitioned(cursor, old) or not done[0]:  # never drop a converted table
        raise ConversionError(f"{spec.table}: no finished copy to swap in")
    building_indexes = [name for name, _definition in parent_indexes(cursor, new)]
    building_uniques = [name for name, _definition, _columns in unique_constraints(cursor, new)]
    _drop_references(cursor, old)
    cursor.execute(f'DROP TRIGGER "{old}__sync" ON "{old}"')
    cursor.execute(f'DROP FUNCTION "{old}__sync"()')
    _set_aside(cursor, old)
    cursor.execute(f'ALTER TABLE "{new}" RENAME TO "{old}"')
    cursor.execute(f'ALTER TABLE "{old}" RENAME CONSTRAINT "{new}_pkey" TO "{old}_pkey"')
    for name in building_uniques:
        plain = name.removesuffix(BUILDING_SUFFIX)
        cursor.execute(f'ALTER TABLE "{old}" RENAME CONSTRAINT "{name}" TO "{plain}"')
    for name in building_indexes:
        if name.endswith(BUILDING_SUFFIX):
            cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{name.removesuffix(BUILDING_SUFFIX)}"')
    # An old range no row reached (a new install: all) goes; not one keyed by another table's
    # ids (a mark of an old message may come later, and routing cannot create an old range).
    for part in partitions_of(cursor, old) if spec.coded_id else []:
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
    name = partition_name(table, database_day(cursor), legacy=True)
    last = max(legacy, key=lambda part: part.upper)
    if last.name != name:
        cursor.execute(f'ALTER TABLE "{last.name}" RENAME TO "{name}"')


def _set_aside(cursor, table: str) -> None:
    """The old table and its indexes (constraints go with their index) under other names: the
    names are the copy's now."""
    cursor.execute("SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                   "WHERE x.indrelid = to_regclass(%s)", [table])
    for (index,) in cursor.fetchall():
        cursor.execute(f'ALTER INDEX "{index}" RENAME TO "{index[:60]}{INDEX_ASIDE_SUFFIX}"')
    cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}{ASIDE_SUFFIX}"')


def _drop_aside(cursor, spec: DayPartitioned, log: Callable[[str], None]) -> None:
    """Drop the old table set aside by the swap (nothing reads it: every name is the copy's)."""
    aside = f"{spec.table}{ASIDE_SUFFIX}"
    if not exists(cursor, aside):
        return
    started = time.perf_counter()
    cursor.execute(f'DROP TABLE "{aside}"')
    log(f"{spec.table}: dropped the old table ({(time.perf_counter() - started) * 1000:.0f} ms)")


# A test of an existing install lowers it rather than writing 100,000 rows.
MIGRATION_ROW_LIMIT = SMALL_TABLE_ROWS


def convert_if_small(spec: DayPartitioned, *, limit: int | None = None) -> str:
    """A migration's step: convert a new install's (or a small) table at once; leave a big one
    unpartitioned, working as before, for `manage.py partition_tables`. The limit is read at
    the call (a test of an existing install lowers it rather than writing 100,000 rows)."""
    limit = MIGRATION_ROW_LIMIT if limit is None else limit
    with connection.cursor() as cursor:
        if is_partitioned(cursor, spec.table):
            return f"{spec.table}: already partitioned"
        if spec.bounds_from and not is_partitioned(cursor, spec.bounds_from):
            return f"{spec.table}: left unpartitioned until {spec.bounds_from} is"
        if rows_exceed(cursor, spec.table, limit):
            return (f"{spec.table}: more than {limit} rows, left unpartitioned: "
                    "run `manage.py partition_tables` (docs/operations.md)")
    return convert(spec)
