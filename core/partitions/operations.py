"""Migration operations: a new index on a table that may be partitioned, built without a lock
that writers wait on; an old one dropped with the least locking PostgreSQL allows.

`AddIndexConcurrently` fails on a partitioned table (PostgreSQL builds no partitioned index
CONCURRENTLY), and a plain `AddIndex` holds a SHARE lock on every partition for the whole
build, stopping the send path. On a partitioned table this builds what PostgreSQL documents
for the case (CREATE INDEX): the parent's index `ON ONLY` (invalid, no rows), then each
partition's CONCURRENTLY under the leaf name a new partition would get (`<index>_YYYYMMDD`), each
attached to the parent's, which becomes valid with the last. On a table not partitioned (a big
install before `partition_tables`) it is `AddIndexConcurrently`.

Resumable, like every concurrent build: the migration is not atomic, a partition's build that
was interrupted leaves an INVALID index, dropped and built again on the next run. A partition
created meanwhile (the hourly upkeep) takes the parent's indexes as it is created.

Dropping: PostgreSQL drops no partitioned index CONCURRENTLY, and no partition's index while it
is attached to its parent's (nor can one be detached): the only way is a plain DROP INDEX of the
parent's, which drops every partition's with it under an ACCESS EXCLUSIVE lock on the table and
each partition, held to the commit. The drop is catalogue work (milliseconds; the files go at
the commit), so what costs is waiting for those locks behind a long read, with every statement
queued behind the drop. `RemoveIndexFromPartitions` therefore waits at most 200 ms for them
(lock_timeout) and tries again 200 ms later, up to 150 times (about a minute).
"""

from __future__ import annotations

import re
import time

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import OperationalError, transaction

from core.partitions.catalog import is_partitioned, partitions_of
from core.partitions.create import index_sql, leaf_index_name


class AddIndexToPartitions(AddIndexConcurrently):
    def describe(self) -> str:
        return f"Concurrently create index {self.index.name} on {self.model_name} and its partitions"

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        table = model._meta.db_table
        with schema_editor.connection.cursor() as cursor:
            if not is_partitioned(cursor, table):
                return super().database_forwards(app_label, schema_editor, from_state, to_state)
            definition = str(self.index.create_sql(model, schema_editor))
            parent_sql = _with_words(index_sql(definition, self.index.name, table), "IF NOT EXISTS")
            cursor.execute(parent_sql.replace(f' ON "{table}" ', f' ON ONLY "{table}" ', 1))
            for part in partitions_of(cursor, table):
                leaf_index = leaf_index_name(self.index.name, part.name, table)
                partition_index_build(cursor, index_sql(definition, leaf_index, part.name), leaf_index)
                if not index_attached(cursor, leaf_index):
                    cursor.execute(f'ALTER INDEX "{self.index.name}" ATTACH PARTITION "{leaf_index}"')

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        with schema_editor.connection.cursor() as cursor:
            if not is_partitioned(cursor, model._meta.db_table):
                return super().database_backwards(app_label, schema_editor, from_state, to_state)
            # A partitioned index is dropped with its partitions' (never CONCURRENTLY).
            cursor.execute(f'DROP INDEX IF EXISTS "{self.index.name}"')


class RemoveIndexFromPartitions(RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on a table not partitioned; on a partitioned one, DROP INDEX of
    the parent's index under a short lock_timeout, tried again (the module's docstring)."""

    # While the DROP waits for a lock, every statement on the table queues behind it: a send
    # stalls at most this long per try (well inside P0's 10 s), and a try is cheap to repeat.
    lock_timeout = "200ms"
    attempts = 150
    pause_seconds = 0.2

    def describe(self) -> str:
        return f"Drop index {self.name} from {self.model_name} and its partitions, with a short lock wait"

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        with schema_editor.connection.cursor() as cursor:
            if not is_partitioned(cursor, model._meta.db_table):
                return super().database_forwards(app_label, schema_editor, from_state, to_state)
            self._drop_with_short_lock_waits(cursor, schema_editor.connection.alias)

    def _drop_with_short_lock_waits(self, cursor, alias: str) -> None:
        for attempt in range(1, self.attempts + 1):
            try:
                with transaction.atomic(using=alias):
                    cursor.execute(f"SET LOCAL lock_timeout = '{self.lock_timeout}'")
                    cursor.execute(f'DROP INDEX IF EXISTS "{self.name}"')
                return
            except OperationalError as error:
                if "lock timeout" not in str(error) or attempt == self.attempts:
                    raise
                time.sleep(self.pause_seconds)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        AddIndexToPartitions(model_name=self.model_name, index=index).database_forwards(
            app_label, schema_editor, from_state, to_state)


def partition_index_build(cursor, create_sql: str, name: str) -> None:
    """Build one partition's index CONCURRENTLY, unless a valid one exists (a run that stopped
    halfway); an invalid one, left by an interrupted build, is dropped first."""
    cursor.execute("SELECT x.indisvalid FROM pg_index x WHERE x.indexrelid = to_regclass(%s)", [name])
    found = cursor.fetchone()
    if found and found[0]:
        return
    if found:
        cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
    cursor.execute(_with_words(create_sql, "CONCURRENTLY"))


def _with_words(create_sql: str, words: str) -> str:
    """`CREATE [UNIQUE] INDEX <words> ...`."""
    return re.sub(r"^CREATE (UNIQUE )?INDEX ", lambda m: f"{m.group(0)}{words} ", create_sql, count=1)


def index_attached(cursor, name: str) -> bool:
    """The partition's index is attached to its parent's (an attached index has a parent)."""
    cursor.execute("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s)", [name])
    return cursor.fetchone() is not None
