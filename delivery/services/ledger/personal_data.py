"""Personal-data removal on the message rows (issue 30, decision 120): pick a batch of settled
rows of one service and stream created before the retention's cutoff, then strip them.

Both statements run in the caller's transaction (delivery/services/personal_data.py). The pick
walks `msg_personal_due_idx` (client, stream, created_at, id), whose predicate is exactly the
pick's (not yet scrubbed, settled), oldest first from a keyset, and locks what it takes
skipping rows a sender or a webhook batch holds (those are taken by a later batch). A row taken
is locked, so the UPDATE strips it as it was read: a requeue of a FAILED row waits for the
batch and then finds it scrubbed (the requeue refuses it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from core.partitions.routing import ids_span_sql
from delivery.models import SETTLED_STATUSES
from delivery.services.ledger.sql import TABLE

# The index's own predicate, written as its condition is: the planner proves the pick implies it.
DUE = f"personal_data_removed_at IS NULL AND status IN ({', '.join(repr(s) for s in SETTLED_STATUSES)})"


@dataclass(frozen=True, slots=True)
class DueMessage:
    id: int
    created_at: datetime
    recipient: str
    error: str


def _owner(service_id: str | None) -> tuple[str, list[object]]:
    return ("client_id IS NULL", []) if service_id is None else ("client_id = %s", [service_id])


def messages_personal_data_pick(*, service_id: str | None, stream: str, created_before: datetime,
                                limit: int, after: tuple[datetime, int] | None = None) -> list[DueMessage]:
    """Up to `limit` settled rows of the service (None: of a deleted one) and stream created
    before `created_before` that still hold personal data, oldest first after `after`
    ((created_at, id)), locked FOR UPDATE, skipping locked ones."""
    owner, params = _owner(service_id)
    keyset = ""
    if after is not None:
        keyset = " AND (created_at, id) > (%s, %s)"
        params = [*params, stream, created_before, *after, limit]
    else:
        params = [*params, stream, created_before, limit]
    sql = (f"SELECT id, created_at, recipient, error FROM {TABLE} WHERE {owner} AND stream = %s "
           f"AND created_at < %s AND {DUE}{keyset} ORDER BY created_at, id LIMIT %s "
           f"FOR UPDATE SKIP LOCKED")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [DueMessage(*row) for row in cursor.fetchall()]


def messages_personal_data_count(*, service_id: str | None, stream: str, created_before: datetime) -> int:
    """How many rows `messages_personal_data_pick` would still take (a dry run)."""
    owner, params = _owner(service_id)
    sql = f"SELECT count(*) FROM {TABLE} WHERE {owner} AND stream = %s AND created_at < %s AND {DUE}"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, stream, created_before])
        return cursor.fetchone()[0]


def messages_personal_data_strip(*, rows: Sequence[tuple[int, bytes, str]], at: datetime) -> int:
    """[(id, the address's keyed hash, the error with the address redacted)]: the recipient
    becomes '', the context {}, the hash and the time are stored. One UPDATE over arrays; the
    rows are the caller's, locked by the pick."""
    if not rows:
        return 0
    sql = (f"UPDATE {TABLE} AS m SET recipient = '', context = '{{}}'::jsonb, recipient_hash = v.hash, "
           f"personal_data_removed_at = %s, error = v.error "
           f"FROM unnest(%s::bigint[], %s::bytea[], %s::text[]) AS v(id, hash, error) WHERE m.id = v.id "
           f"AND {ids_span_sql('m', [r[0] for r in rows])}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [at, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]])
        return cursor.rowcount
