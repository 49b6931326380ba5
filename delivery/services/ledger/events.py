"""The event log's rows for the ledger's status changes, written by the very statement that
makes the change (decision 115).

A ledger statement that moves messages becomes `WITH changed AS (UPDATE .. RETURNING <its own
columns>, <EVENT_COLUMNS>), ev AS (<message_events_sql>) SELECT <its own columns> FROM changed`:
the events commit, or not, with the change, and a change that touches no row writes no event
(a guarded move that lost its race records nothing twice). The event's columns are the changed
row's own (RETURNING sees the new values); the payload is built only for rows whose service
records the type, after the join with RecordedEventTypes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from clients.key_types import KeyType
from delivery.services.ledger.sql import TABLE
from eventlog.payloads import message_data_sql
from eventlog.types import EventType
from eventlog.writes import events_insert_sql

_COLUMNS = {
    "ev_message": "id", "ev_service": "client_id", "ev_recipient": "recipient", "ev_key": "idempotency_key",
    "ev_campaign": "campaign_id", "ev_stream": "stream", "ev_provider": "provider", "ev_error": "error",
    "ev_status": "status", "ev_key_type": "key_type", "ev_metadata": "metadata",
}


def event_columns(alias: str) -> str:
    """The RETURNING items an event needs, of the changed row `alias` (prefixed `ev_`)."""
    return ", ".join(f"{alias}.{column} AS {name}" for name, column in _COLUMNS.items())


# The client's own idempotency key: stored as "client:<service>:<key>" (transactional.services
# client_idempotency_key), "auto:<uuid>" when the client gave none, "campaign:..." for a campaign.
_CLIENT_KEY = ("CASE WHEN left({r}.ev_key, 7) = 'client:' "
               "THEN substr({r}.ev_key, length({r}.ev_service) + 9) END")


def status_event_sql(status_column: str, mapping: dict[str, EventType]) -> str:
    """A CASE naming the event of each status in `mapping` (NULL, no event, for the others)."""
    whens = " ".join(f"WHEN '{status}' THEN '{event.value}'" for status, event in mapping.items())
    return f"(CASE {status_column} {whens} END)"


def message_events_sql(rows: str, event_type: str | EventType, *, occurred_at: str = "statement_timestamp()",
                       extra: dict[str, str] | None = None, source: str = "") -> str:
    """The INSERT of one event per row of the CTE `rows` (which returned `event_columns`; or
    `source`, a FROM item aliased `rows`), of `event_type` (an EventType, or a SQL expression
    such as `status_event_sql`'s). `extra`: more payload fields, or other expressions for them."""
    type_sql = f"'{event_type.value}'::varchar" if isinstance(event_type, EventType) else event_type
    # A scrubbed row's recipient is '' (decision 120): its late events name none (null).
    fields = {"recipient": f"NULLIF({rows}.ev_recipient, '')", "idempotency_key": _CLIENT_KEY.format(r=rows),
              "campaign_id": f"{rows}.ev_campaign", "stream": f"{rows}.ev_stream",
              "provider": f"NULLIF({rows}.ev_provider, '')", "error": f"NULLIF({rows}.ev_error, '')",
              # A test key's message (the sandbox, issue 27): receivers may keep them apart.
              "test": f"({rows}.ev_key_type = '{KeyType.TEST.value}')",
              # The service's own references (decision 114), so a receiver needs no lookup.
              "metadata": f"{rows}.ev_metadata"}
    data = message_data_sql(**{**fields, **(extra or {})})
    return events_insert_sql(rows=source or rows, service=f"{rows}.ev_service", event_type=type_sql,
                             message_id=f"{rows}.ev_message", occurred_at=occurred_at, data=data)


def with_events(change: str, returning: str, event_type: str | EventType, *, alias: str,
                occurred_at: str = "statement_timestamp()", prefix: str = "") -> str:
    """`change` (an UPDATE or INSERT without RETURNING, its target named `alias`) returning
    `returning` (its own items, as the caller reads them), and writing the events of the rows it
    changed. `prefix`: CTEs the change reads (without WITH, ending with a comma)."""
    own = ", ".join(item.strip().rsplit(" ", 1)[-1].split(".")[-1] for item in returning.split(","))
    return (f"WITH {prefix}changed AS ({change} RETURNING {returning}, {event_columns(alias)}), "
            f"ev AS ({message_events_sql('changed', event_type, occurred_at=occurred_at)}) "
            f"SELECT {own} FROM changed")


def reported_events_record(items: Sequence[tuple[int, EventType, datetime, str | None]]) -> int:
    """The events of what the ESPs reported, [(message id, type, when, bounce type)], each with
    its message's references, in one INSERT inside the caller's transaction (the one that
    applies the statuses: feedback.services.processing). How many were written."""
    if not items:
        return 0
    source = (f"(SELECT {event_columns('m')}, v.type AS ev_type, v.at AS ev_at, v.bounce AS ev_bounce "
              f"FROM unnest(%s::bigint[], %s::varchar[], %s::timestamptz[], %s::varchar[]) "
              f"AS v(id, type, at, bounce) JOIN {TABLE} m ON m.id = v.id) r")
    sql = message_events_sql("r", "r.ev_type", occurred_at="r.ev_at", source=source,
                             extra={"bounce_type": "r.ev_bounce", "error": "NULL"})
    params = [[item[0] for item in items], [str(item[1].value) for item in items],
              [item[2] for item in items], [item[3] for item in items]]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
