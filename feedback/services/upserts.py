"""Counters kept by adding: one multi-row INSERT .. ON CONFLICT DO UPDATE per batch."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection


def rows_add(table: str, *, key: Sequence[str], added: Sequence[str], rows: Sequence[Sequence[object]],
             stamp: str = "") -> int:
    """Insert `rows` (key values, then added values, in the caller's order: sort them for a fixed
    lock order across concurrent batches), or add their `added` columns to the stored row's;
    `stamp`: a timestamp column set to now on both. Returns the rows given."""
    if not rows:
        return 0
    stamped = [stamp] if stamp else []
    columns = [*key, *added, *stamped]
    row = "(" + ", ".join(["%s"] * (len(key) + len(added)) + ["CURRENT_TIMESTAMP"] * len(stamped)) + ")"
    updates = [f"{c} = {table}.{c} + EXCLUDED.{c}" for c in added] + [f"{c} = EXCLUDED.{c}" for c in stamped]
    sql = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([row] * len(rows))} "
           f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(updates)}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for values in rows for value in values])
    return len(rows)
