"""Scheduled rows changed from outside the send path: fenced SCHEDULED -> QUEUED when due (the
dispatcher), or cancelled. Each names the states it may move from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from delivery.services.ledger.sql import TABLE, Status


def scheduled_messages_fence(
    *, message_ids: Sequence[int], dispatched_before: datetime, fence_by: datetime | None = None
) -> list[tuple[int, int, int | None]]:
    """SCHEDULED -> QUEUED for rows due by the database clock, plus QUEUED rows fenced before
    `dispatched_before` that no worker claimed since: [(id, priority, campaign id)] to publish
    (scheduling/services/dispatcher.py says why the second kind is published again). Nothing
    changes when the statement starts at or after `fence_by` (the claim is too old to fence)."""
    late = "" if fence_by is None else "statement_timestamp() < %s AND "
    sql = (
        f"UPDATE {TABLE} SET status = %s, requeued_at = statement_timestamp() WHERE {late}id = ANY(%s) AND ("
        f"(status = %s AND scheduled_for <= statement_timestamp()) OR "
        f"(status = %s AND claimed_at IS NULL AND requeued_at < %s)) RETURNING id, priority, campaign_id"
    )
    params = [Status.QUEUED, *([] if fence_by is None else [fence_by]), list(message_ids),
              Status.SCHEDULED, Status.QUEUED, dispatched_before]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(row[0], row[1], row[2]) for row in cursor.fetchall()]


def scheduled_messages_cancel(
    *, reason: str, client_id: int | None = None, cancel_key: str | None = None,
    campaign_id: int | None = None,
) -> list[int]:
    """SCHEDULED -> CANCELLED for a client's rows with a cancel key, or a campaign's rows: the
    ids cancelled. The dispatcher's fence races on the same row lock; the loser matches nothing."""
    if campaign_id is not None:
        where, params = "campaign_id = %s", [campaign_id]
    elif client_id is not None and cancel_key:
        where, params = "client_id = %s AND cancel_key = %s", [client_id, cancel_key]
    else:
        raise ValueError("give campaign_id, or client_id and cancel_key")
    sql = f"UPDATE {TABLE} SET status = %s, error = %s WHERE status = %s AND {where} RETURNING id"
    with connection.cursor() as cursor:
        cursor.execute(sql, [Status.CANCELLED, reason[:2000], Status.SCHEDULED, *params])
        return [row[0] for row in cursor.fetchall()]
