"""Server-side prepared statements, one set per connection, for the statements the send path
runs on every message or batch (the single-message fast path, the bulk reads for send).

Planning the single-message claim (a join, a guard, two sub-selects) took ~0.15 ms of PostgreSQL
CPU per execution, more than running it (docs/decisions.md 54)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, ProgrammingError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from psycopg2.errors import InvalidSqlStatementName

from core.partitions.routing import execute_routed
from delivery.services.ledger.sql import placeholders, without_flush_wait

# Statements prepared on each connection (keyed by its Django wrapper: one per thread and
# alias); a new connection starts with none.
_prepared: dict[int, set[str]] = {}


@receiver(connection_created, dispatch_uid="delivery-ledger-prepared-statements")
def _forget_prepared(sender: object, connection: BaseDatabaseWrapper, **_: object) -> None:
    _prepared.pop(id(connection), None)


def _numbered(sql: str) -> str:
    """psycopg2's `%s` placeholders as PREPARE's `$1, $2, ...`."""
    parts = sql.split("%s")
    return "".join(part + (f"${i}" if i < len(parts) else "") for i, part in enumerate(parts, 1))


def execute_prepared(cursor, name: str, sql: str, params: Sequence[object], *,
                     flush_wait: bool, inserts: bool = False) -> None:
    """Run `sql` as a statement prepared once per connection (plain, inside a transaction:
    a failed EXECUTE there would abort the caller's transaction, e.g. a test's). `inserts`:
    it writes a row of a day-partitioned table (execute_routed)."""
    run = execute_routed if inserts else _execute
    if connection.in_atomic_block:
        run(cursor, sql if flush_wait else without_flush_wait(sql), params)
        return
    statement = f"{name}_{zlib.crc32(sql.encode()):08x}"
    prepared = _prepared.setdefault(id(connections[DEFAULT_DB_ALIAS]), set())
    call = f"EXECUTE {statement} ({placeholders(params)})"
    call = call if flush_wait else without_flush_wait(call)
    if statement in prepared:
        try:
            run(cursor, call, params)
            return
        except ProgrammingError as exc:
            if not isinstance(exc.__cause__, InvalidSqlStatementName):
                raise
            prepared.discard(statement)  # dropped under us (DISCARD ALL): prepare it again
    cursor.execute(f"PREPARE {statement} AS {_numbered(sql)}")
    prepared.add(statement)
    run(cursor, call, params)


def _execute(cursor, sql: str, params: Sequence[object]) -> None:
    cursor.execute(sql, params)
