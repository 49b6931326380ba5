"""Rows that leave FAILED or AMBIGUOUS: a provider fault's rows and an operator's dead letter
back to QUEUED, and what a reconciliation finds (the ESP never accepted it: QUEUED; it did:
SENT). Changes made from outside the send path, each naming the states it may move from."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection
from django.utils import timezone

from delivery.extensions import claim_guard_sql, requeue_guard_sql
from delivery.models import EmailMessage
from delivery.services.ledger.events import with_events
from delivery.services.ledger.sql import TABLE, Status, placeholders
from eventlog.types import EventType


def failed_messages_requeue(*, message_ids: Sequence[int], error: str) -> list[tuple[int, int]]:
    """FAILED -> QUEUED for rows a provider fault failed (delivery/services/provider_faults.py).

    Only rows no provider ever accepted (no provider message id, no sent_at): sending one of
    those again cannot deliver it twice. The attempt it used stays counted. [(id, priority)].
    """
    if not message_ids:
        return []
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL, "
        f"send_started_at = NULL, error = %s WHERE id IN ({placeholders(message_ids)}) "
        f"AND status = %s AND provider_message_id = '' AND sent_at IS NULL "
        f"AND personal_data_removed_at IS NULL AND {requeue_guard_sql()} RETURNING id, priority"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [Status.QUEUED, error[:2000], *message_ids, Status.FAILED])
        return [(row[0], row[1]) for row in cursor.fetchall()]


def _requeue_one(message_id: int, *, expected: str, error: str, **extra: object) -> int | None:
    """`expected` -> QUEUED with a fresh claim state; the row's priority, or None if it was not
    in `expected` (someone else moved it first)."""
    # A scrubbed row has no address left to send to (decision 120): it is never requeued.
    rows = EmailMessage.objects.filter(id=message_id, status=expected, personal_data_removed_at__isnull=True)
    changed = rows.update(status=Status.QUEUED, claim_token="", claimed_at=None,
                          send_started_at=None, error=error[:2000], **extra)
    if not changed:
        return None
    return EmailMessage.objects.values_list("priority", flat=True).get(id=message_id)


def ambiguous_messages_resend(
    *, message_ids: Sequence[int], provider: str, handed_over_before: object, error: str
) -> list[tuple[int, int]]:
    """AMBIGUOUS -> QUEUED for rows held for `provider` and handed over before the instant the
    evidence covers (delivery/services/ambiguity.py); the row keeps its provider, which the
    re-send is pinned to. [(id, priority)] of the rows it moved."""
    if not message_ids:
        return []
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL, "
        f"send_started_at = NULL, error = %s WHERE id IN ({placeholders(message_ids)}) "
        f"AND status = %s AND provider = %s AND send_started_at < %s "
        # The claim's guard, not the requeue guard: the campaign of a row that never arrived has
        # usually COMPLETED meanwhile (an AMBIGUOUS row is finished for its progress), and its
        # re-send is that campaign's own promise; a paused or cancelled one sends nothing.
        f"AND {claim_guard_sql()} RETURNING id, priority"
    )
    params = [Status.QUEUED, error[:2000], *message_ids, Status.AMBIGUOUS, provider, handed_over_before]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


def failed_message_requeue(*, message_id: int, error: str) -> int | None:
    """FAILED -> QUEUED with its attempts reset (an operator requeues a dead letter)."""
    return _requeue_one(message_id, expected=Status.FAILED, error=error, attempts=0)


def ambiguous_message_requeue(*, message_id: int, error: str) -> int | None:
    """AMBIGUOUS -> QUEUED: reconciliation found the ESP never accepted it."""
    return _requeue_one(message_id, expected=Status.AMBIGUOUS, error=error)


def handed_over_message_mark_sent(
    *, message_id: int, provider: str, provider_message_id: str, error: str
) -> bool:
    """AMBIGUOUS, or SENDING after the hand-off -> SENT: reconciliation found the ESP accepted
    it. The sent event is written by the same statement (decision 115)."""
    change = (
        f"UPDATE {TABLE} SET status = %s, provider = %s, sent_at = %s, error = %s, "
        f"provider_message_id = CASE WHEN %s <> '' THEN %s ELSE provider_message_id END "
        f"WHERE id = %s AND (status = %s OR (status = %s AND send_started_at IS NOT NULL))"
    )
    params = [Status.SENT, provider, timezone.now(), error, provider_message_id, provider_message_id,
              message_id, Status.AMBIGUOUS, Status.SENDING]
    with connection.cursor() as cursor:
        cursor.execute(with_events(change, "id", EventType.SENT, alias=TABLE), params)
        return cursor.fetchone() is not None
