"""The single-message fast path (delivery/services/send_one.py, docs/decisions.md 54): the
batch path's guarded moves, each folded with the reads or writes that always go with it for one
message, so an OTP costs three statements instead of about eight, each a prepared statement."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone

from audience.selectors import message_withheld_sql
from delivery.providers.base import Outcome, SendResult
from delivery.services.ledger.attempts import attempts_insert_sql
from delivery.services.ledger.events import event_columns, message_events_sql
from delivery.services.ledger.prepared import execute_prepared
from delivery.services.ledger.send_path import SUPPRESSED_ERROR, HandOff, hand_off_result, hand_off_sql
from delivery.services.ledger.send_reads import (
    CONTACT_GONE,
    ClaimedMessage,
    claim_cte,
    claimed_message,
    send_rows_sql,
)
from delivery.services.ledger.sql import QUEUED_OR_MINE, TABLE, Status, message_is_test_sql
from delivery.services.ledger.unflushed import sent_marks_remember
from eventlog.types import EventType


def message_claim_for_send(*, message_id: int, token: str) -> ClaimedMessage | None:
    """`messages_claim` for one row (send_one's lean path), returning the row as a send reads
    it, in one statement; this very task redelivered before its hand-off re-takes its row (one
    row is never split). `suppressed` also says its campaign contact was deleted."""
    is_test = message_is_test_sql(TABLE)
    suppressed = f"({message_withheld_sql(TABLE, is_test)} OR {CONTACT_GONE})"
    sql = claim_cte(f"id = %s AND {QUEUED_OR_MINE}") + send_rows_sql("claimed", suppressed=suppressed)
    params = [Status.SENDING, token, timezone.now(), message_id, Status.QUEUED, Status.SENDING, token]
    with connection.cursor() as cursor:
        execute_prepared(cursor, "send_one_claim", sql, params, flush_wait=False)
        row = cursor.fetchone()
    return claimed_message(row) if row is not None else None


def message_mark_sent_with_attempt(
    *, message_id: int, token: str, provider: str, provider_message_id: str, response_code: str,
    duration_ms: int,
) -> bool:
    """SENDING (or AMBIGUOUS under this claim) -> SENT and its accepted attempt row, in one
    statement (a data-modifying CTE), committed without waiting for the WAL flush and remembered
    until it is on disk, like `messages_mark_sent` (decision 82). The attempt row is written only
    with the SENT mark, so running it again after a lost answer writes nothing twice."""
    now = timezone.now()
    accepted = SendResult(message_id, Outcome.ACCEPTED, provider_message_id=provider_message_id,
                          response_code=response_code, duration_ms=duration_ms)
    attempt, attempt_params = attempts_insert_sql(provider=provider, results=[accepted], at=now,
                                                  only_if="EXISTS (SELECT 1 FROM sent)")
    sql = (
        f"WITH sent AS (UPDATE {TABLE} SET status = %s, sent_at = %s, provider = %s, "
        f"provider_message_id = %s, error = '' WHERE id = %s AND (status || '') IN (%s, %s) "
        f"AND claim_token = %s RETURNING id, {event_columns(TABLE)}), "
        # The sent event, in the same statement (decision 115).
        f"ev AS ({message_events_sql('sent', EventType.SENT)}) "
        f"{attempt} RETURNING message_id"
    )
    params = [Status.SENT, now, provider, provider_message_id, message_id, Status.SENDING,
              Status.AMBIGUOUS, token, *attempt_params]
    with connection.cursor() as cursor:
        execute_prepared(cursor, "send_one_sent", sql, params, flush_wait=False, inserts=True)
        sent = cursor.fetchone() is not None
    if sent:  # until it is surely on disk: written again after a crash (`unflushed`)
        sent_marks_remember(provider_ids={message_id: provider_message_id}, provider=provider, token=token)
    return sent


def message_mark_started(
    *, message_id: int, token: str, provider: str = "", started_at: datetime | None = None
) -> HandOff:
    """`messages_mark_started` for one row: the hand-off mark to `provider`, committed
    synchronously (the one write exactly-once rests on: decisions 31-32); the row is in
    `started` if this task may send it, in `suppressed` if its address was suppressed after the
    claim read it (F17). Idempotent for the same `started_at`, as `messages_mark_started`."""
    # Scalar ids, not `= ANY(%s)`: the prepared statement's generic plan then reads the row's
    # partition only (with an array it probed every partition's primary key: decision 133).
    where = ("t.id = %s AND t.status = %s AND t.claim_token = %s "
             "AND (t.send_started_at IS NULL OR t.send_started_at = %s)")
    started_at = started_at or timezone.now()
    params = [started_at, Status.SUPPRESSED, SUPPRESSED_ERROR, provider, message_id, message_id,
              Status.SENDING, token, started_at]
    with connection.cursor() as cursor:
        execute_prepared(cursor, "send_one_started", hand_off_sql(where, ids="m.id = %s"), params,
                         flush_wait=True)
        return hand_off_result(cursor.fetchall())
