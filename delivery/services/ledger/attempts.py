"""Attempt rows, one per provider call for one message (what was tried, how long it took, what
came back), written by one multi-row INSERT: the batch path's `attempts_record` and the
single-message path's SENT mark (a CTE of the same INSERT) share it.

The ORM's bulk_create spent ~0.14 s per 500 rows building instances (bench/pipeline_throughput.py
profile); a plain VALUES list does the same write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection
from django.utils import timezone

from core.partitions.routing import execute_routed
from delivery.models import DeliveryAttempt
from delivery.providers.base import SendResult
from delivery.services.ledger.sql import without_flush_wait

ATTEMPT_TABLE = DeliveryAttempt._meta.db_table
_COLUMNS = "message_id, provider, outcome, response_code, error, duration_ms, created_at"
_TYPED_ROW = "(%s::bigint, %s::varchar, %s::varchar, %s::varchar, %s::text, %s::integer, %s::timestamptz)"


def attempts_insert_sql(
    *, provider: str, results: Sequence[SendResult], at: datetime, only_if: str = ""
) -> tuple[str, list[object]]:
    """(sql, params) of the INSERT of one attempt row per result, made with `provider` at `at`:
    a statement of its own, or the main statement after another's data-modifying CTE.
    `only_if`: SQL that must hold for the rows to be written (e.g. that the CTE changed a row)."""
    params: list[object] = []
    for result in results:
        params += [result.message_id, provider, result.outcome.value, result.response_code,
                   result.error[:2000], result.duration_ms, at]
    if only_if:
        # A VALUES list in a subquery takes no types from the columns it fills: as a prepared
        # statement's parameters they would all be text. Each is cast to its column's type.
        rows = ", ".join([_TYPED_ROW] * len(results))
        return (f"INSERT INTO {ATTEMPT_TABLE} ({_COLUMNS}) SELECT * FROM (VALUES {rows}) AS v "
                f"WHERE {only_if}"), params
    rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(results))
    return f"INSERT INTO {ATTEMPT_TABLE} ({_COLUMNS}) VALUES {rows}", params


def attempts_record(*, provider: str, results: Sequence[SendResult]) -> None:
    """One attempt row per result, in one INSERT committed without waiting for the WAL flush (a
    lost attempt row is a lost log line: `without_flush_wait`)."""
    if not results:
        return
    sql, params = attempts_insert_sql(provider=provider, results=results, at=timezone.now())
    with connection.cursor() as cursor:
        execute_routed(cursor, without_flush_wait(sql), params)
