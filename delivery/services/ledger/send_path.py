"""The batch send path: the claim (QUEUED -> SENDING under a token), the hand-off mark, and
each outcome's mark (SENT, FAILED / AMBIGUOUS / SUPPRESSED, released or deferred to QUEUED).
Each names the state and the claim token it expects, so a late or duplicate worker changes
nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.dispatch import receiver
from django.utils import timezone

from audience.selectors import message_withheld_sql
from core.partitions.routing import ids_span_sql
from delivery.extensions import claim_guard_sql
from delivery.models import EmailMessage
from delivery.services.ledger.events import status_event_sql, with_events
from delivery.services.ledger.sql import (
    QUEUED_OR_MINE,
    TABLE,
    Status,
    message_is_test_sql,
    placeholders,
    status_is,
    without_flush_wait,
)
from delivery.services.ledger.unflushed import SentMark, recent, sent_marks_remember, server_start_read
from eventlog.types import EventType


def messages_claim(*, message_ids: Sequence[int], token: str) -> list[tuple[int, int]]:
    """QUEUED -> SENDING for this task; returns [(id, attempts)] of the rows it now owns.

    A row already SENDING under the same token but not yet handed to a provider is re-claimed:
    that is this very task redelivered after its worker died mid-batch (Celery keeps the id).
    """
    if not message_ids:
        return []
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = %s, claimed_at = %s, "
        f"attempts = attempts + 1 WHERE id IN ({placeholders(message_ids)}) AND {QUEUED_OR_MINE} "
        # Registered rules, e.g. campaigns: never claim a row of a paused or cancelled campaign.
        f"AND {claim_guard_sql()} "
        f"RETURNING id, attempts"
    )
    params = [Status.SENDING, token, timezone.now(), *message_ids]
    params += [Status.QUEUED, Status.SENDING, token]
    with connection.cursor() as cursor:
        cursor.execute(without_flush_wait(sql), params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


# The error a row gets when its address was suppressed when its send was decided.
SUPPRESSED_ERROR = "suppressed"
# A hand-off's rows that turned out suppressed record message.suppressed (the others nothing).
_HAND_OFF_EVENT = status_event_sql("changed.ev_status", {Status.SUPPRESSED: EventType.SUPPRESSED})
# The final marks' events; AMBIGUOUS records none (it is not an outcome the client can act on).
_FINAL_EVENT = {Status.FAILED: EventType.FAILED, Status.SUPPRESSED: EventType.SUPPRESSED}


@dataclass(frozen=True)
class HandOff:
    """What a hand-off mark did: the rows this task may now send, and the rows whose address
    turned out suppressed, moved to SUPPRESSED by the same write (never to be sent)."""

    started: set[int] = field(default_factory=set)
    suppressed: set[int] = field(default_factory=set)


def hand_off_sql(where: str, *, ids: str = "m.id = ANY(%s)") -> str:
    """The hand-off mark as one UPDATE of the rows `where` picks (SQL over the table `t`, its
    placeholders after the SET's four and the ids' one: `ids`, over `m`): each row is handed over to the
    provider named (decision 89), or, if its address is suppressed by now, SUPPRESSED instead.
    RETURNING id and the new status. A test key's row looks at the test key's suppressions.

    The claim read the suppression list too, but a suppression that commits after it (a hard
    bounce arriving while the batch renders, F17) must still stop the send: this write, right
    before the provider call, is the send path's last look (docs/decisions.md 91)."""
    suppressed = message_withheld_sql("m", message_is_test_sql("m"))
    return with_events(
        f"UPDATE {TABLE} t SET send_started_at = CASE WHEN v.suppressed THEN NULL ELSE %s::timestamptz END, "
        f"status = CASE WHEN v.suppressed THEN %s ELSE t.status END, "
        f"error = CASE WHEN v.suppressed THEN %s ELSE t.error END, "
        f"provider = CASE WHEN v.suppressed THEN t.provider ELSE %s END "
        f"FROM (SELECT m.id, {suppressed} AS suppressed "
        f"FROM {TABLE} m WHERE {ids}) v "
        # `where` names the ids of `t` too: the UPDATE's own partitions are pruned (decision 122).
        # A server-side prepared statement prunes only by a scalar id (`id = $1`): PostgreSQL
        # prunes an array parameter's `= ANY($1)` in no partition (decision 133).
        f"WHERE t.id = v.id AND {where}",
        "t.id, t.status", _HAND_OFF_EVENT, alias="t")


def hand_off_result(rows: Sequence[Sequence[object]]) -> HandOff:
    """A hand-off UPDATE's RETURNING rows as a HandOff."""
    result = HandOff()
    for pk, status in rows:
        (result.suppressed if status == Status.SUPPRESSED else result.started).add(int(pk))
    return result


def messages_mark_started(
    *, message_ids: Sequence[int], token: str, provider: str = "", started_at: datetime | None = None
) -> HandOff:
    """Record the hand-off to `provider` (the first the failover will offer them: decision 89)
    at `started_at`; only the rows in `started` may be sent. A row whose address is suppressed
    by now goes to SUPPRESSED in the same write (`hand_off_sql`).

    Conditional on `send_started_at IS NULL`, so of two copies of one task only one wins a row.
    Committed synchronously (never `without_flush_wait`): lost in a crash after the provider
    call, it would let the row be claimed and sent again. Run again with the same `started_at`
    (its first run's answer was lost with the connection: core.db_outage.hold_through_outage),
    it returns the rows that run marked: that instant is this call's alone, so a redelivered
    copy of the task, which marks with its own, never takes them. (Rows the first run
    suppressed are in neither set then; nothing was sent, and a claim never takes them again.)
    """
    if not message_ids:
        return HandOff()
    started_at = started_at or timezone.now()
    where = (f"t.id = ANY(%s) AND {status_is('t.status')} AND t.claim_token = %s "
             f"AND (t.send_started_at IS NULL OR t.send_started_at = %s)")
    params = [started_at, Status.SUPPRESSED, SUPPRESSED_ERROR, provider, list(message_ids), list(message_ids),
              Status.SENDING, token, started_at]
    with connection.cursor() as cursor:
        cursor.execute(hand_off_sql(where), params)
        return hand_off_result(cursor.fetchall())


def messages_claim_hand_off(
    *, message_ids: Sequence[int], token: str, provider: str = "", started_at: datetime | None = None
) -> dict[int, tuple[str, int]]:
    """QUEUED -> SENDING and handed over, in one synchronously committed UPDATE (bulk batches,
    after rendering: decision 59); {id: (status, attempts)} of the rows it changed.

    The claim and the hand-off mark of `messages_claim` + `messages_mark_started` in one write:
    only rows returned SENDING may be sent; a crash after the commit leaves them handed over
    (AMBIGUOUS after the lease, never resent blindly), a crash before it leaves them QUEUED with
    nothing sent. A row whose address is suppressed by now goes to SUPPRESSED in the same write
    (the send path's re-check, at the last moment before the provider).

    Run again with the same `started_at` after its answer was lost, it returns the rows its
    first run handed over (as `messages_mark_started`), without counting their attempt twice.
    """
    if not message_ids:
        return {}
    started_at = started_at or timezone.now()
    mine = (f"({status_is(f'{TABLE}.status')} AND {TABLE}.claim_token = %s "
            f"AND {TABLE}.send_started_at = %s)")
    sql = with_events(
        f"UPDATE {TABLE} SET status = CASE WHEN v.suppressed THEN %s ELSE %s END, "
        f"send_started_at = CASE WHEN v.suppressed THEN NULL ELSE %s END, "
        f"error = CASE WHEN v.suppressed THEN %s ELSE {TABLE}.error END, "
        f"attempts = {TABLE}.attempts + CASE WHEN {TABLE}.send_started_at = %s THEN 0 ELSE 1 END, "
        f"claim_token = %s, claimed_at = %s, provider = %s "
        f"FROM (SELECT m.id, {message_withheld_sql('m', message_is_test_sql('m'))} "
        f"AS suppressed FROM {TABLE} m WHERE m.id IN ({placeholders(message_ids)})) v "
        f"WHERE {TABLE}.id = v.id AND {ids_span_sql(TABLE, message_ids)} "
        f"AND ({status_is(f'{TABLE}.status')} OR {mine}) "
        f"AND {claim_guard_sql()}",
        f"{TABLE}.id, {TABLE}.status, {TABLE}.attempts", _HAND_OFF_EVENT, alias=TABLE)
    params = [Status.SUPPRESSED, Status.SENDING, started_at, SUPPRESSED_ERROR, started_at, token, started_at,
              provider, *message_ids, Status.QUEUED, Status.SENDING, token, started_at]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)  # synchronous commit: exactly-once rests on this write
        return {row[0]: (row[1], row[2]) for row in cursor.fetchall()}


def messages_mark_provider(*, message_ids: Sequence[int], token: str, provider: str) -> set[int]:
    """Handed over rows about to be offered to a provider other than the one their hand-off
    mark named (a failover): the ledger always names the one ESP that may have them. Returns
    the rows still this claim's: only those may be offered (the recovery may have released the
    rest of a stuck worker's batch, decision 92)."""
    if not message_ids:
        return set()
    sql = (f"UPDATE {TABLE} SET provider = %s WHERE id IN ({placeholders(message_ids)}) "
           f"AND {status_is()} AND claim_token = %s RETURNING id")
    with connection.cursor() as cursor:
        cursor.execute(sql, [provider, *message_ids, Status.SENDING, token])
        return {row[0] for row in cursor.fetchall()}


def _owned(message_ids: Sequence[int], token: str):
    return EmailMessage.objects.filter(
        id__in=message_ids, status__unindexed=Status.SENDING, claim_token=token
    )


def messages_mark_sent(
    *, provider_ids: dict[int, str], provider: str, token: str, remember: bool = True
) -> int:
    """SENDING -> SENT with each row's provider message id, in one UPDATE.

    The per-row ids come in as a VALUES list joined with UPDATE ... FROM: a 500-branch CASE
    built through the ORM cost ~0.4 s per batch of 500 in bench/pipeline_throughput.py.
    Committed without waiting for the WAL flush (decision 32); the process remembers the marks
    until they are surely on disk and writes them again after a crash (`unflushed`, decision 82).
    A row the recovery already held AMBIGUOUS under this claim (a worker that waited out a long
    outage with the answer in hand) is SENT too: the answer is the evidence the hold waited for.
    """
    if not provider_ids:
        return 0
    values = ", ".join(["(%s, %s)"] * len(provider_ids))
    sql = with_events(
        f"UPDATE {TABLE} SET status = %s, sent_at = %s, provider = %s, provider_message_id = v.pid, "
        f"error = '' FROM v WHERE {TABLE}.id = v.id AND {ids_span_sql(TABLE, provider_ids)} "
        f"AND ({TABLE}.status || '') IN (%s, %s) "
        f"AND {TABLE}.claim_token = %s",
        f"{TABLE}.id", EventType.SENT, alias=TABLE, prefix=f"v(id, pid) AS (VALUES {values}), ")
    params: list[object] = [item for pair in provider_ids.items() for item in pair]
    params += [Status.SENT, timezone.now(), provider, Status.SENDING, Status.AMBIGUOUS, token]
    with connection.cursor() as cursor:
        cursor.execute(without_flush_wait(sql), params)
        changed = len(cursor.fetchall())
    if remember:  # the whole batch: writing it again changes only rows still waiting for it
        sent_marks_remember(provider_ids=provider_ids, provider=provider, token=token)
    return changed


@receiver(connection_created, dispatch_uid="delivery-ledger-unflushed-sent-marks")
def _rewrite_after_a_restart(sender: object, connection: BaseDatabaseWrapper, **_: object) -> None:
    """A new connection to a server that started since this process's last one: write again
    the SENT marks a crash may have lost (`unflushed`)."""
    if connection.vendor != "postgresql":
        return
    marks = recent.take_if_restarted(server_start_read(connection))
    if marks:
        sent_marks_rewrite(marks)


def sent_marks_rewrite(marks: list[SentMark]) -> int:
    """Write the marks again, each the guarded UPDATE it was; rows changed."""
    return sum(messages_mark_sent(provider_ids=mark.provider_ids, provider=mark.provider, token=mark.token,
                                  remember=False) for mark in marks)


def messages_mark_final(
    *, message_ids: Sequence[int], token: str, status: str, error: str, event: EventType | None = None,
) -> int:
    """SENDING -> FAILED / AMBIGUOUS / SUPPRESSED with the reason, and in the same statement
    the event of that outcome (`event`, else message.failed / message.suppressed; none for
    AMBIGUOUS)."""
    if not message_ids:
        return 0
    sql = (f"UPDATE {TABLE} SET status = %s, error = %s "
           f"WHERE id = ANY(%s) AND {status_is()} AND claim_token = %s")
    event = event or _FINAL_EVENT.get(status)
    if event is not None:
        sql = with_events(sql, "id", event, alias=TABLE)
    with connection.cursor() as cursor:
        cursor.execute(sql, [status, error[:2000], list(message_ids), Status.SENDING, token])
        return cursor.rowcount


def messages_release(*, message_ids: Sequence[int], token: str, error: str = "") -> int:
    """SENDING -> QUEUED (a transient failure before hand-off acceptance): retry later."""
    if not message_ids:
        return 0
    return _owned(message_ids, token).update(
        status=Status.QUEUED, claim_token="", claimed_at=None, send_started_at=None, error=error[:2000]
    )


def messages_defer(*, message_ids: Sequence[int], token: str, reason: str) -> int:
    """SENDING -> QUEUED without using up an attempt (throttled, or every breaker open).

    The claim counted an attempt; a message that was never offered to an ESP gives it back, so
    a long throttle cannot exhaust a message's attempts and dead-letter it.
    """
    if not message_ids:
        return 0
    return _owned(message_ids, token).update(
        status=Status.QUEUED, claim_token="", claimed_at=None, send_started_at=None,
        attempts=Greatest(F("attempts") - 1, Value(0)), error=f"deferred: {reason}"[:2000],
    )
