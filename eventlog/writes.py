"""Writing the log, always joined with RecordedEventTypes (decision 110).

A writer adds its events to the statement or transaction that makes the change they record:
`events_insert_sql` is an `INSERT .. SELECT` over the writer's own changed rows (a CTE of a
data-modifying statement, typically), `events_record` inserts events computed in Python. Both
join the service's recorded types, so for a service that wants none of them the cost is one
probe of that (small) table per statement and no row is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from eventlog.models import RecordedEventTypes, ServiceEvent

EVENT_TABLE = ServiceEvent._meta.db_table
RECORDED_TABLE = RecordedEventTypes._meta.db_table


def events_insert_sql(
    *, rows: str, service: str, event_type: str, message_id: str, occurred_at: str, data: str,
) -> str:
    """`INSERT` of one event per row of `rows` (a FROM item) whose service records the type.
    Every argument is a SQL expression over `rows`; `event_type` may be a CASE (NULL: no event).
    No parameters of its own."""
    return (
        f"INSERT INTO {EVENT_TABLE} (service_id, type, message_id, occurred_at, data) "
        f"SELECT {service}, {event_type}, {message_id}, {occurred_at}, {data} FROM {rows} "
        f"JOIN {RECORDED_TABLE} rt ON rt.service_id = {service} WHERE ({event_type}) = ANY(rt.types)"
    )


@dataclass(frozen=True)
class NewEvent:
    service_id: str
    type: str
    message_id: int | None
    occurred_at: datetime
    data: dict[str, Any]


def events_record(events: Sequence[NewEvent]) -> int:
    """Insert those of `events` whose service records their type, in one statement (inside the
    caller's transaction); how many were written."""
    if not events:
        return 0
    sql = events_insert_sql(
        rows="unnest(%s::varchar[], %s::varchar[], %s::bigint[], %s::timestamptz[], %s::jsonb[]) "
             "AS e(service, type, message_id, occurred_at, data)",
        service="e.service", event_type="e.type", message_id="e.message_id",
        occurred_at="e.occurred_at", data="e.data")
    params = [[e.service_id for e in events], [e.type for e in events], [e.message_id for e in events],
              [e.occurred_at for e in events], [json.dumps(e.data) for e in events]]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
