"""Guarded state changes on the send ledger, one SQL statement per batch.

Every change names the state it expects (and, while SENDING, the claim token), so a late or
duplicate worker changes nothing: the database, not Redis or the broker, fences double sends.
RETURNING is used so a single round trip both changes and reports the rows.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, ProgrammingError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.dispatch import receiver
from django.utils import timezone
from psycopg2.errors import InvalidSqlStatementName

from audience.models import Contact
from audience.selectors import contact_merge_data_sql, email_is_suppressed_sql
from delivery.extensions import claim_guard_sql, requeue_guard_sql
from delivery.models import DeliveryAttempt, EmailMessage

Status = EmailMessage.Status
TABLE = EmailMessage._meta.db_table


def _walking_the_index(sql: str) -> str:
    """Run this one autocommit sweep by a plain index scan, never a bitmap scan.

    The recovery sweeps look for the few live rows in a state (`status = 'SENDING'`), but until
    VACUUM passes, the status index still holds an entry for every row that was ever in it: a
    running campaign leaves one per sent row. A bitmap scan visits the heap for each of them on
    every sweep and never learns (1.03 s per sweep at 700,000 dead entries, measured); a plain
    index scan marks each dead entry as it meets it (LP_DEAD), so the next scan of any kind
    skips it (0.2 s once, then 5 ms). Decision 68.
    """
    return _with_local_settings(sql, {"enable_bitmapscan": "OFF"})


# An ordered walk of one index that stops at its LIMIT, whatever the statistics say: no plan that
# reads every candidate and sorts, no parallel workers or JIT compiling (~0.5 s) that the
# statistics' false "a handful of rows, found only at the end of a full scan" would call for.
_ORDERED_INDEX_WALK = {"enable_seqscan": "OFF", "enable_bitmapscan": "OFF", "enable_sort": "OFF",
                       "jit": "OFF", "max_parallel_workers_per_gather": "0"}


def _with_local_settings(sql: str, planner: Mapping[str, str]) -> str:
    """Run this one autocommit statement with these planner settings (SET LOCAL ends with it)."""
    if connection.in_atomic_block:
        return sql  # SET LOCAL would outlive the statement; the plan only costs time
    return "".join(f"SET LOCAL {name} TO {value}; " for name, value in planner.items()) + sql


def _placeholders(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))


def _status_is(column: str = "status") -> str:
    """`column = %s` written so the planner cannot answer it from the status index.

    A statement that names its rows by id must be driven by the primary key. The statistics of
    `status` are the table's steady state (almost every row SENT, "QUEUED" rare), and a campaign
    makes a million rows QUEUED long before autoanalyze looks again (10% of a large table): with
    a plain `status = 'QUEUED'` the planner then walks every QUEUED row through the status index
    for each batch (decision 67). The empty concatenation changes no result, only the plan.
    """
    return f"({column} || '') = %s"


def without_flush_wait(sql: str) -> str:
    """Let this one autocommit statement commit without waiting for the WAL flush (PostgreSQL).

    For writes whose loss in a PostgreSQL crash cannot cause a second send (docs/decisions.md
    32): a lost claim only returns the row to QUEUED; a lost SENT mark leaves a handed-over row
    that turns AMBIGUOUS (never resent blindly); a lost attempt row is a lost log line. The
    hand-off mark, the one write exactly-once rests on, keeps a synchronous commit, and since
    WAL is flushed in order, flushing it makes the claim before it durable too. Sampled under
    load, 73% of active backends were waiting for WAL flushes before this.
    """
    if connection.in_atomic_block or not settings.NOTIFIER_LEDGER_ASYNC_COMMIT:
        return sql
    # Several statements in one query string run as one implicit transaction: SET LOCAL
    # covers exactly the statement after it.
    return "SET LOCAL synchronous_commit TO OFF; " + sql


Cutoff = datetime | Mapping[int, datetime]


def _older_than(column: str, cutoff: Cutoff) -> tuple[str, list[object]]:
    """SQL: `column` is before its row's cutoff, one instant for all rows or one per priority
    (priorities missing from the mapping use the latest). The latest cutoff also comes first as
    a plain range condition, so the (status, claimed_at) index still narrows the scan."""
    if isinstance(cutoff, datetime):
        return f"{column} < %s", [cutoff]
    latest = max(cutoff.values())
    cases = " ".join("WHEN %s THEN %s" for _ in cutoff)
    sql = f"{column} < %s AND {column} < CASE priority {cases} ELSE %s END"
    return sql, [latest, *chain.from_iterable(cutoff.items()), latest]


# A row this very task claimed and has not handed over (params: SENDING, token): Celery
# redelivers a task that died mid-batch under the same id.
_MINE_NOT_HANDED_OVER = f"{_status_is()} AND claim_token = %s AND send_started_at IS NULL"
# Not handed over yet, or handed over by the very call that is running again (param: its instant).
_NOT_STARTED_OR_AT = "(send_started_at IS NULL OR send_started_at = %s)"
# What a claim may take (params: QUEUED, SENDING, token).
_QUEUED_OR_MINE = f"({_status_is()} OR ({_MINE_NOT_HANDED_OVER}))"


def messages_claim(*, message_ids: Sequence[int], token: str) -> list[tuple[int, int]]:
    """QUEUED -> SENDING for this task; returns [(id, attempts)] of the rows it now owns.

    A row already SENDING under the same token but not yet handed to a provider is re-claimed:
    that is this very task redelivered after its worker died mid-batch (Celery keeps the id).
    """
    if not message_ids:
        return []
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = %s, claimed_at = %s, "
        f"attempts = attempts + 1 WHERE id IN ({_placeholders(message_ids)}) AND {_QUEUED_OR_MINE} "
        # Registered rules, e.g. campaigns: never claim a row of a paused or cancelled campaign.
        f"AND {claim_guard_sql()} "
        f"RETURNING id, attempts"
    )
    params = [Status.SENDING, token, timezone.now(), *message_ids]
    params += [Status.QUEUED, Status.SENDING, token]
    with connection.cursor() as cursor:
        cursor.execute(without_flush_wait(sql), params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


def messages_mark_started(
    *, message_ids: Sequence[int], token: str, started_at: datetime | None = None
) -> set[int]:
    """Record the hand-off to a provider at `started_at`; only the rows returned may be sent.

    Conditional on `send_started_at IS NULL`, so of two copies of one task only one wins a row.
    Committed synchronously (never `without_flush_wait`): lost in a crash after the provider
    call, it would let the row be claimed and sent again. Run again with the same `started_at`
    (its first run's answer was lost with the connection: core.db_outage.hold_through_outage),
    it returns the rows that run marked: that instant is this call's alone, so a redelivered
    copy of the task, which marks with its own, never takes them.
    """
    if not message_ids:
        return set()
    started_at = started_at or timezone.now()
    sql = (
        f"UPDATE {TABLE} SET send_started_at = %s WHERE id IN ({_placeholders(message_ids)}) "
        f"AND {_status_is()} AND claim_token = %s AND {_NOT_STARTED_OR_AT} RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [started_at, *message_ids, Status.SENDING, token, started_at])
        return {row[0] for row in cursor.fetchall()}


def messages_claim_hand_off(
    *, message_ids: Sequence[int], token: str, started_at: datetime | None = None
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
    mine = (f"({_status_is(f'{TABLE}.status')} AND {TABLE}.claim_token = %s "
            f"AND {TABLE}.send_started_at = %s)")
    sql = (
        f"UPDATE {TABLE} SET status = CASE WHEN v.suppressed THEN %s ELSE %s END, "
        f"send_started_at = CASE WHEN v.suppressed THEN NULL ELSE %s END, "
        f"error = CASE WHEN v.suppressed THEN %s ELSE {TABLE}.error END, "
        f"attempts = {TABLE}.attempts + CASE WHEN {TABLE}.send_started_at = %s THEN 0 ELSE 1 END, "
        f"claim_token = %s, claimed_at = %s "
        f"FROM (SELECT m.id, {email_is_suppressed_sql('lower(m.recipient)')} "
        f"AS suppressed FROM {TABLE} m WHERE m.id IN ({_placeholders(message_ids)})) v "
        f"WHERE {TABLE}.id = v.id AND ({_status_is(f'{TABLE}.status')} OR {mine}) "
        f"AND {claim_guard_sql()} "
        f"RETURNING {TABLE}.id, {TABLE}.status, {TABLE}.attempts"
    )
    params = [Status.SUPPRESSED, Status.SENDING, started_at, "suppressed", started_at, token, started_at,
              *message_ids, Status.QUEUED, Status.SENDING, token, started_at]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)  # synchronous commit: exactly-once rests on this write
        return {row[0]: (row[1], row[2]) for row in cursor.fetchall()}


def _owned(message_ids: Sequence[int], token: str):
    return EmailMessage.objects.filter(
        id__in=message_ids, status__unindexed=Status.SENDING, claim_token=token
    )


def messages_mark_sent(*, provider_ids: dict[int, str], provider: str, token: str) -> int:
    """SENDING -> SENT with each row's provider message id, in one UPDATE.

    The per-row ids come in as a VALUES list joined with UPDATE ... FROM: a 500-branch CASE
    built through the ORM cost ~0.4 s per batch of 500 in bench/pipeline_throughput.py.
    Committed synchronously: the provider's answer exists nowhere else, and a PostgreSQL crash
    that lost it would leave a sent message AMBIGUOUS (decision 82). A row the recovery already
    held as AMBIGUOUS under this claim (a worker that waited out a long outage with the answer
    in hand) is SENT too: the answer is the evidence the hold was waiting for.
    """
    if not provider_ids:
        return 0
    values = ", ".join(["(%s, %s)"] * len(provider_ids))
    sql = (
        f"WITH v(id, pid) AS (VALUES {values}) "
        f"UPDATE {TABLE} SET status = %s, sent_at = %s, provider = %s, provider_message_id = v.pid, "
        f"error = '' FROM v WHERE {TABLE}.id = v.id AND ({TABLE}.status || '') IN (%s, %s) "
        f"AND {TABLE}.claim_token = %s "
        f"RETURNING {TABLE}.id"
    )
    params: list[object] = [item for pair in provider_ids.items() for item in pair]
    params += [Status.SENT, timezone.now(), provider, Status.SENDING, Status.AMBIGUOUS, token]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return len(cursor.fetchall())


def messages_mark_final(*, message_ids: Sequence[int], token: str, status: str, error: str) -> int:
    """SENDING -> FAILED / AMBIGUOUS / SUPPRESSED with the reason."""
    if not message_ids:
        return 0
    return _owned(message_ids, token).update(status=status, error=error[:2000])


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


def failed_messages_requeue(*, message_ids: Sequence[int], error: str) -> list[tuple[int, int]]:
    """FAILED -> QUEUED for rows a provider fault failed (delivery/services/provider_faults.py).

    Only rows no provider ever accepted (no provider message id, no sent_at): sending one of
    those again cannot deliver it twice. The attempt it used stays counted. [(id, priority)].
    """
    if not message_ids:
        return []
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL, "
        f"send_started_at = NULL, error = %s WHERE id IN ({_placeholders(message_ids)}) "
        f"AND status = %s AND provider_message_id = '' AND sent_at IS NULL "
        f"AND {requeue_guard_sql()} RETURNING id, priority"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [Status.QUEUED, error[:2000], *message_ids, Status.FAILED])
        return [(row[0], row[1]) for row in cursor.fetchall()]


def stale_claims_release(*, claimed_before: Cutoff) -> list[tuple[int, int]]:
    """Claims whose worker vanished before the hand-off go back to QUEUED: [(id, priority)]."""
    older, params = _older_than("claimed_at", claimed_before)
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL "
        f"WHERE status = %s AND send_started_at IS NULL AND {older} RETURNING id, priority"
    )
    with connection.cursor() as cursor:
        cursor.execute(_walking_the_index(sql), [Status.QUEUED, Status.SENDING, *params])
        return [(row[0], row[1]) for row in cursor.fetchall()]


def stalled_sends_mark_ambiguous(*, started_before: datetime) -> int:
    """Handed over long ago with no recorded answer: hold for reconciliation."""
    sql = (
        f"UPDATE {TABLE} SET status = %s, error = %s "
        "WHERE status = %s AND send_started_at < %s RETURNING id"
    )
    error = "no provider answer recorded; awaiting reconciliation"
    with connection.cursor() as cursor:
        cursor.execute(_walking_the_index(sql), [Status.AMBIGUOUS, error, Status.SENDING, started_before])
        return len(cursor.fetchall())


def orphaned_messages_claim_requeue(
    *, older_than: Cutoff, in_broker: Mapping[int, int] | None = None
) -> list[tuple[int, int]]:
    """Transactional rows QUEUED for too long (their task may be lost): [(id, priority)].

    Campaign rows are left to the campaign sweeps, which track their own progress. A second
    publish of a row whose task still exists is harmless (the claim lets only one send), but
    under a backlog it feeds the backlog it waits on (seen in the million-day scenario). So:
    `in_broker` gives the tasks the broker still holds per priority; the queue is FIFO, so the
    newest that many QUEUED rows of a priority are taken to have theirs, and only older rows are
    candidates (decision 69). And each re-publish doubles a row's wait: again only once its time
    since the last re-publish exceeds its age at that re-publish.
    """
    now = timezone.now()
    created, created_params = _older_than("created_at", older_than)
    requeued, requeued_params = _older_than("requeued_at", older_than)
    covered = {p: n for p, n in (in_broker or {}).items() if n}
    cases = "".join(" WHEN %s THEN %s" for _ in covered)
    sql = (
        # Rank every QUEUED transactional row of a priority, newest publish first.
        f"WITH q AS (SELECT id AS qid, row_number() OVER (PARTITION BY priority "
        f"ORDER BY coalesce(requeued_at, created_at) DESC, id DESC) AS newer FROM {TABLE} "
        f"WHERE status = %s AND campaign_id IS NULL AND claimed_at IS NULL) "
        f"UPDATE {TABLE} SET requeued_at = %s FROM q WHERE id = q.qid "
        f"AND q.newer > {f'CASE priority{cases} ELSE 0 END' if covered else '0'} "
        f"AND status = %s AND campaign_id IS NULL "
        f"AND claimed_at IS NULL AND ((requeued_at IS NULL AND {created}) "
        f"OR ({requeued} AND requeued_at + (requeued_at - created_at) < %s)) RETURNING id, priority"
    )
    params = [Status.QUEUED, now, *chain.from_iterable(covered.items()), Status.QUEUED]
    params += [*created_params, *requeued_params, now]
    with connection.cursor() as cursor:
        cursor.execute(_walking_the_index(sql), params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


def queued_transactional_requeue(*, published_before: datetime) -> list[tuple[int, int]]:
    """Every QUEUED transactional row last published before the instant: [(id, priority)],
    stamped re-published now.

    For a broker that lost its queues (a Redis restarted without persistence): their tasks are
    gone whatever their age, so neither the age rule nor the broker's depth (decision 69) of
    `orphaned_messages_claim_requeue` applies, and waiting out P0's 5 s would be most of its
    latency. A row whose task survived is only published twice: the claim lets one send.
    Campaign rows are left to the campaign sweep, which re-publishes them the same way."""
    now = timezone.now()
    sql = (f"UPDATE {TABLE} SET requeued_at = %s WHERE status = %s AND claimed_at IS NULL "
           f"AND campaign_id IS NULL AND coalesce(requeued_at, created_at) < %s RETURNING id, priority")
    with connection.cursor() as cursor:
        cursor.execute(_walking_the_index(sql), [now, Status.QUEUED, published_before])
        return [(row[0], row[1]) for row in cursor.fetchall()]


# Changes made from outside the send path: a campaign paused or cancelled, a scheduled message
# falling due or cancelled, an operator's requeue, a reconciliation. Each is guarded the same
# way: it names the states it may move from, so it races safely with the send path.


def campaign_unstarted_claims_set(*, campaign_id: int, status: str) -> int:
    """A campaign's claimed rows not yet handed to a provider -> QUEUED (pause) or CANCELLED.

    A worker holding the claim finds its token gone at the hand-off mark and skips them."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL "
            "WHERE campaign_id = %s AND status = %s AND send_started_at IS NULL",
            [status, campaign_id, Status.SENDING],
        )
        return cursor.rowcount


_UNSENT = "(status IN (%s, %s) OR (status = %s AND send_started_at IS NULL))"


def campaign_unsent_cancel(*, campaign_id: int, limit: int) -> int:
    """Up to `limit` of a campaign's unsent rows (queued, scheduled, claimed but not handed
    over) -> CANCELLED; callers repeat until none changes.

    The outer WHERE says "unsent" again: a row whose hand-off mark commits while this statement
    waits for its lock is re-checked against it (PostgreSQL re-evaluates the outer conditions on
    the new row version, not the subquery's), so a handed-over row is never marked CANCELLED
    while its provider call goes ahead."""
    unsent = [Status.QUEUED, Status.SCHEDULED, Status.SENDING]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET status = %s WHERE id IN (SELECT id FROM {TABLE} "
            f"WHERE campaign_id = %s AND {_UNSENT} LIMIT %s) AND {_UNSENT}",
            [Status.CANCELLED, campaign_id, *unsent, limit, *unsent],
        )
        return cursor.rowcount


# Columns a page of a campaign's QUEUED rows may be ordered by, each with its own index.
_PAGE_ORDERS = ("id", "contact_id")


def campaign_queued_page(
    *, campaign_id: int, order: str, after: int, upper: int | None, limit: int
) -> list[tuple[int, int]]:
    """Up to `limit` of a campaign's QUEUED rows whose `order` column ("id" or "contact_id") is
    past `after` (and at most `upper`), in that order: [(id, order value)].

    Driven by that column's own index, never by the (campaign, status) index: a running
    campaign's statistics say "no QUEUED row" (decision 67), and the planner then read every
    QUEUED row of the campaign and sorted them for each page, 0.5 s a page at 700,000 rows, a
    quadratic ~60 s of PostgreSQL for the re-publish after a broker restart (decision 77).
    `campaign_id + 0` and `_status_is` keep those two conditions out of any index; the
    planner settings leave the ordered walk of the `order` column's index as the only plan
    (4-7 ms a page of 5,000, measured on the same rows)."""
    if order not in _PAGE_ORDERS:
        raise ValueError(f"order must be one of {_PAGE_ORDERS}, not {order!r}")
    bounded = "" if upper is None else f" AND {order} <= %s"
    sql = (f"SELECT id, {order} FROM {TABLE} WHERE (campaign_id + 0) = %s AND {_status_is()} "
           f"AND {order} > %s{bounded} ORDER BY {order} LIMIT %s")
    params = [campaign_id, Status.QUEUED, after, *([] if upper is None else [upper]), limit]
    with connection.cursor() as cursor:
        cursor.execute(_with_local_settings(sql, _ORDERED_INDEX_WALK), params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


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


def _requeue_one(message_id: int, *, expected: str, error: str, **extra: object) -> int | None:
    """`expected` -> QUEUED with a fresh claim state; the row's priority, or None if it was not
    in `expected` (someone else moved it first)."""
    rows = EmailMessage.objects.filter(id=message_id, status=expected)
    changed = rows.update(status=Status.QUEUED, claim_token="", claimed_at=None,
                          send_started_at=None, error=error[:2000], **extra)
    if not changed:
        return None
    return EmailMessage.objects.values_list("priority", flat=True).get(id=message_id)


def failed_message_requeue(*, message_id: int, error: str) -> int | None:
    """FAILED -> QUEUED with its attempts reset (an operator requeues a dead letter)."""
    return _requeue_one(message_id, expected=Status.FAILED, error=error, attempts=0)


def ambiguous_message_requeue(*, message_id: int, error: str) -> int | None:
    """AMBIGUOUS -> QUEUED: reconciliation found the ESP never accepted it."""
    return _requeue_one(message_id, expected=Status.AMBIGUOUS, error=error)


def handed_over_message_mark_sent(
    *, message_id: int, provider: str, provider_message_id: str, error: str
) -> bool:
    """AMBIGUOUS, or SENDING after the hand-off -> SENT: reconciliation found the ESP accepted it."""
    handed_over = Q(status=Status.AMBIGUOUS) | Q(status=Status.SENDING, send_started_at__isnull=False)
    fields: dict[str, object] = {"status": Status.SENT, "provider": provider,
                                 "sent_at": timezone.now(), "error": error}
    if provider_message_id:
        fields["provider_message_id"] = provider_message_id
    return bool(EmailMessage.objects.filter(handed_over, id=message_id).update(**fields))


# What the ESPs reported after the hand-off, ranked (feedback/services/statuses.py derives each
# message's target from its event marks). A move goes up the ranks only, so arrival order does
# not matter and a bounce or complaint is never undone by a later open; FAILED (a drop) ranks
# last. Statuses outside the ladder (SENDING, SUPPRESSED, ...) rank 99 and never move here.
REPORTED_RANK: dict[str, int] = {
    Status.SENT: 0,
    Status.DELIVERED: 1,
    Status.OPENED: 2,
    Status.CLICKED: 3,
    Status.BOUNCED: 4,
    Status.COMPLAINED: 5,
    Status.FAILED: 6,
}


def _reported_rank_sql(column: str) -> str:
    whens = " ".join(f"WHEN '{status}' THEN {rank}" for status, rank in REPORTED_RANK.items())
    return f"(CASE {column} {whens} ELSE 99 END)"


def reported_statuses_apply(
    *, targets: Mapping[int, tuple[str | None, Mapping[str, datetime | None]]]
) -> None:
    """{id: (target status or None, {timestamp column: earliest reported time})}: one UPDATE.

    Status moves only up REPORTED_RANK; each timestamp only to an earlier time. A VALUES join
    rather than CASE-per-row expressions: building those in the ORM cost ~0.2 s per 1,000 rows
    (measured), more than the rest of the batch. Rows with nothing to change are not touched
    (the WHERE repeats each condition), so a repeated batch writes nothing.
    """
    if not targets:
        return
    columns = sorted({column for _, stamps in targets.values() for column in stamps})
    params: list[object] = []
    for message_id, (target, stamps) in sorted(targets.items()):
        params += [message_id, target or "", REPORTED_RANK[target] if target else -1]
        params += [stamps.get(column) for column in columns]
    row = "(%s, %s, %s" + ", %s::timestamptz" * len(columns) + ")"
    rank = _reported_rank_sql("m.status")
    earlier = {c: f"(v.{c} IS NOT NULL AND (m.{c} IS NULL OR m.{c} > v.{c}))" for c in columns}
    sets = [f"status = CASE WHEN {rank} < v.rank THEN v.status ELSE m.status END"]
    sets += [f"{c} = CASE WHEN {cond} THEN v.{c} ELSE m.{c} END" for c, cond in earlier.items()]
    changed = " OR ".join([f"{rank} < v.rank", *earlier.values()])
    value_columns = ", ".join(["id", "status", "rank", *columns])
    sql = (
        f"UPDATE {TABLE} AS m SET {', '.join(sets)} "
        f"FROM (VALUES {', '.join([row] * len(targets))}) AS v({value_columns}) "
        f"WHERE m.id = v.id AND ({changed})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def contact_campaign_messages_suppress(
    *, contact_id: int, error: str, statuses: Sequence[str] = (Status.QUEUED,)
) -> int:
    """Unsent campaign rows of a contact who unsubscribed (QUEUED) or is being deleted (QUEUED
    and SCHEDULED) -> SUPPRESSED (claimed ones are dropped by the send path's own check)."""
    return EmailMessage.objects.filter(
        contact_id=contact_id, campaign__isnull=False, status__in=statuses
    ).update(status=Status.SUPPRESSED, error=error)


# The single-message fast path (delivery/services/send_one.py, docs/decisions.md 54): the same
# guarded moves as above, each folded with the reads or writes that always go with it for one
# message, so an OTP costs three statements instead of about eight. They run as server-side
# prepared statements: planning the claim (a join, a guard, two sub-selects) took ~0.15 ms of
# PostgreSQL CPU per execution, more than running it.

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


def _execute_prepared(cursor, name: str, sql: str, params: Sequence[object], *,
                      flush_wait: bool) -> None:
    """Run `sql` as a statement prepared once per connection (plain, inside a transaction:
    a failed EXECUTE there would abort the caller's transaction, e.g. a test's)."""
    if connection.in_atomic_block:
        cursor.execute(sql if flush_wait else without_flush_wait(sql), params)
        return
    statement = f"{name}_{zlib.crc32(sql.encode()):08x}"
    prepared = _prepared.setdefault(id(connections[DEFAULT_DB_ALIAS]), set())
    call = f"EXECUTE {statement} ({_placeholders(params)})"
    call = call if flush_wait else without_flush_wait(call)
    if statement in prepared:
        try:
            cursor.execute(call, params)
            return
        except ProgrammingError as exc:
            if not isinstance(exc.__cause__, InvalidSqlStatementName):
                raise
            prepared.discard(statement)  # dropped under us (DISCARD ALL): prepare it again
    cursor.execute(f"PREPARE {statement} AS {_numbered(sql)}")
    prepared.add(statement)
    cursor.execute(call, params)


@dataclass(frozen=True, slots=True)
class ClaimedMessage:
    """A row to send, with what sending it needs (read in the claim's round trip, or by
    `messages_queued_read_for_send` for a bulk batch): plain values, no model instance (~20 us a row less)."""

    id: int
    attempts: int
    priority: int
    recipient: str
    context: dict
    template_version_id: int
    campaign_id: int | None
    contact_id: int | None
    suppressed: bool
    locale: str
    contact_gone: bool = False


CONTACT_TABLE = Contact._meta.db_table
CONTACT_GONE_ERROR = "contact deleted"
# A campaign row whose contact was deleted after the fan-out (the LEFT JOIN found none).
_CONTACT_GONE = f"({TABLE}.campaign_id IS NOT NULL AND {TABLE}.contact_id IS NOT NULL AND c.id IS NULL)"


def _send_rows_sql(source: str, *, suppressed: str, where: str = "") -> str:
    """SELECT the columns a send reads (ClaimedMessage's order) from `source` (the table, or a
    claim's CTE), named as the message table, LEFT JOINed once to each row's contact. A campaign
    row carries only its audience's own data (the inline audience's per-recipient values, else
    {}): the contact's is read now, under it, in the order the fan-out used to copy it
    (docs/decisions.md 65). Other rows render their own context. `suppressed`: SQL of the
    column that says the row must not be sent."""
    context = (
        f"CASE WHEN {TABLE}.campaign_id IS NULL THEN {TABLE}.context "
        f"ELSE COALESCE({contact_merge_data_sql('c')}, '{{}}'::jsonb) || {TABLE}.context END"
    )
    return (
        f"SELECT {TABLE}.id, {TABLE}.attempts, {TABLE}.priority, {TABLE}.recipient, {context}, "
        f"{TABLE}.template_version_id, {TABLE}.campaign_id, {TABLE}.contact_id, {suppressed}, "
        f"COALESCE(c.locale, ''), {_CONTACT_GONE} "
        f"FROM {source} AS {TABLE} LEFT JOIN {CONTACT_TABLE} c ON c.id = {TABLE}.contact_id {where}"
    )


def _claimed(row: Sequence) -> ClaimedMessage:
    context = json.loads(row[4]) if isinstance(row[4], str) else row[4]
    return ClaimedMessage(row[0], row[1], row[2], row[3], context or {}, row[5], row[6], row[7],
                          bool(row[8]), row[9] or "", bool(row[10]))


def messages_queued_read_for_send(*, message_ids: Sequence[int]) -> list[ClaimedMessage]:
    """The rows of a batch still QUEUED, as a send needs them, read before their claim (a bulk
    batch, decision 59), in one prepared statement (a LEFT JOIN reads each row's contact: its
    locale, and a campaign row's merge data). The claim re-checks suppression itself
    (`messages_claim_hand_off`): `suppressed` is left False here."""
    if not message_ids:
        return []
    sql = _send_rows_sql(TABLE, suppressed="FALSE",
                         where=f"WHERE {TABLE}.id = ANY(%s) AND {_status_is(f'{TABLE}.status')} "
                               f"ORDER BY {TABLE}.id")
    with connection.cursor() as cursor:
        _execute_prepared(cursor, "send_rows", sql, [list(message_ids), Status.QUEUED], flush_wait=True)
        return [_claimed(row) for row in cursor.fetchall()]


def _claim_cte(rows: str) -> str:
    """`messages_claim`'s UPDATE as a CTE named `claimed` of the rows `rows` picks (SQL whose
    placeholders follow the SET's three), under the registered claim guards."""
    return (
        f"WITH claimed AS (UPDATE {TABLE} SET status = %s, claim_token = %s, claimed_at = %s, "
        f"attempts = attempts + 1 WHERE {rows} AND {claim_guard_sql()} RETURNING *) "
    )


def messages_claim_for_send(*, message_ids: Sequence[int], token: str) -> list[ClaimedMessage]:
    """`messages_claim` returning the rows as a send reads them (attempts as counted by this
    claim), in one prepared statement instead of a claim and a read (a P2 batch, claimed before
    it renders). Committed without waiting for the WAL flush, like the claim (decision 32).

    A batch that finds a row of its own SENDING and not handed over claims nothing: it is this
    very task redelivered after its worker died mid-batch (Celery keeps the id), and the caller
    splits it (`sending._split`). One row is re-taken instead, as `messages_claim` does.
    """
    if not message_ids:
        return []
    ids = list(message_ids)
    if len(ids) > 1:
        mine = f"EXISTS (SELECT 1 FROM {TABLE} WHERE id = ANY(%s) AND {_MINE_NOT_HANDED_OVER})"
        rows, params = f"id = ANY(%s) AND {_status_is()} AND NOT {mine}", [ids, Status.QUEUED, ids]
    else:
        rows, params = f"id = ANY(%s) AND {_QUEUED_OR_MINE}", [ids, Status.QUEUED]
    suppressed = email_is_suppressed_sql(f"lower({TABLE}.recipient)")
    sql = _claim_cte(rows) + _send_rows_sql("claimed", suppressed=suppressed, where=f"ORDER BY {TABLE}.id")
    params = [Status.SENDING, token, timezone.now(), *params, Status.SENDING, token]
    with connection.cursor() as cursor:
        _execute_prepared(cursor, "batch_claim", sql, params, flush_wait=False)
        return [_claimed(row) for row in cursor.fetchall()]


def message_claim_for_send(*, message_id: int, token: str) -> ClaimedMessage | None:
    """`messages_claim` for one row (send_one's lean path), returning the row as a send reads
    it, in one statement; this very task redelivered before its hand-off re-takes its row (one
    row is never split). `suppressed` also says its campaign contact was deleted."""
    suppressed = f"({email_is_suppressed_sql(f'lower({TABLE}.recipient)')} OR {_CONTACT_GONE})"
    sql = _claim_cte(f"id = %s AND {_QUEUED_OR_MINE}") + _send_rows_sql("claimed", suppressed=suppressed)
    params = [Status.SENDING, token, timezone.now(), message_id, Status.QUEUED, Status.SENDING, token]
    with connection.cursor() as cursor:
        _execute_prepared(cursor, "send_one_claim", sql, params, flush_wait=False)
        row = cursor.fetchone()
    return _claimed(row) if row is not None else None


def message_mark_sent_with_attempt(
    *, message_id: int, token: str, provider: str, provider_message_id: str, response_code: str,
    duration_ms: int,
) -> bool:
    """SENDING (or AMBIGUOUS under this claim) -> SENT and its accepted attempt row, in one
    statement (a data-modifying CTE), committed synchronously like `messages_mark_sent`
    (decision 82). The attempt row is written only with the SENT mark, so running it again after
    a lost answer writes nothing twice."""
    attempts = DeliveryAttempt._meta.db_table
    sql = (
        f"WITH sent AS (UPDATE {TABLE} SET status = %s, sent_at = %s, provider = %s, "
        f"provider_message_id = %s, error = '' WHERE id = %s AND (status || '') IN (%s, %s) "
        f"AND claim_token = %s RETURNING id) "
        f"INSERT INTO {attempts} (message_id, provider, outcome, response_code, error, duration_ms, "
        f"created_at) SELECT id, %s, %s, %s, '', %s, %s FROM sent RETURNING message_id"
    )
    now = timezone.now()
    params = [Status.SENT, now, provider, provider_message_id, message_id, Status.SENDING, Status.AMBIGUOUS,
              token, provider, DeliveryAttempt.Outcome.ACCEPTED.value, response_code, duration_ms, now]
    with connection.cursor() as cursor:
        _execute_prepared(cursor, "send_one_sent", sql, params, flush_wait=True)
        return cursor.fetchone() is not None


def message_mark_started(*, message_id: int, token: str, started_at: datetime | None = None) -> bool:
    """`messages_mark_started` for one row: the hand-off mark, committed synchronously (the one
    write exactly-once rests on: decisions 31-32); True if this task may send it. Idempotent
    for the same `started_at`, as `messages_mark_started`."""
    sql = (
        f"UPDATE {TABLE} SET send_started_at = %s WHERE id = %s AND status = %s "
        f"AND claim_token = %s AND {_NOT_STARTED_OR_AT} RETURNING id"
    )
    started_at = started_at or timezone.now()
    with connection.cursor() as cursor:
        _execute_prepared(cursor, "send_one_started", sql,
                          [started_at, message_id, Status.SENDING, token, started_at], flush_wait=True)
        return cursor.fetchone() is not None
