"""The recovery sweeps: claims whose worker vanished, sends with no recorded answer, and QUEUED
transactional rows whose task may be lost (by age, or every one after the broker lost its
queues). Each runs as one autocommit statement walking the status index (decision 68)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import chain

from django.db import connection
from django.utils import timezone

from delivery.services.ledger.sql import LOCK_FREE_ROWS, TABLE, Status, walking_the_index

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


def stale_claims_release(*, claimed_before: Cutoff) -> list[tuple[int, int]]:
    """Claims whose worker vanished before the hand-off go back to QUEUED: [(id, priority)]."""
    older, params = _older_than("claimed_at", claimed_before)
    sql = (
        f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL "
        f"WHERE status = %s AND send_started_at IS NULL AND {older} RETURNING id, priority"
    )
    with connection.cursor() as cursor:
        cursor.execute(walking_the_index(sql), [Status.QUEUED, Status.SENDING, *params])
        return [(row[0], row[1]) for row in cursor.fetchall()]


def stalled_sends_read(*, started_before: datetime, limit: int = 10_000) -> list[tuple[int, str, str, int]]:
    """Handed over long ago with no recorded answer (the worker was lost mid-call, or is stuck):
    [(id, claim token, provider, priority)], for the recovery to settle from the send journal."""
    sql = (f"SELECT id, claim_token, provider, priority FROM {TABLE} "
           f"WHERE status = %s AND send_started_at < %s LIMIT %s")
    with connection.cursor() as cursor:
        cursor.execute(walking_the_index(sql), [Status.SENDING, started_before, limit])
        return [(row[0], row[1], row[2], row[3]) for row in cursor.fetchall()]


def stalled_sends_mark_ambiguous(*, started_before: datetime) -> list[tuple[int, str]]:
    """Handed over long ago with no recorded answer (the worker was lost mid-call): hold for
    reconciliation. [(id, provider the hand-off named)]."""
    sql = (
        f"UPDATE {TABLE} SET status = %s, error = %s "
        "WHERE status = %s AND send_started_at < %s RETURNING id, provider"
    )
    error = "no provider answer recorded; awaiting reconciliation"
    with connection.cursor() as cursor:
        cursor.execute(walking_the_index(sql), [Status.AMBIGUOUS, error, Status.SENDING, started_before])
        return [(row[0], row[1]) for row in cursor.fetchall()]


# Transactional rows no worker claimed, as msg_queued_txn_idx's predicate writes them (the status
# test unindexed): the sweeps below read that index, which holds only these rows, and never the
# status index, where a running campaign's QUEUED rows are (decision 119).
QUEUED_TRANSACTIONAL = "(status || '') = %s AND campaign_id IS NULL AND claimed_at IS NULL"


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
        f"WHERE {QUEUED_TRANSACTIONAL}) "
        f", c AS (SELECT id FROM {TABLE} JOIN q ON id = q.qid "
        f"WHERE q.newer > {f'CASE priority{cases} ELSE 0 END' if covered else '0'} "
        f"AND (status || '') = %s AND campaign_id IS NULL "
        f"AND claimed_at IS NULL AND ((requeued_at IS NULL AND {created}) "
        f"OR ({requeued} AND requeued_at + (requeued_at - created_at) < %s)) {LOCK_FREE_ROWS}) "
        f"UPDATE {TABLE} SET requeued_at = %s WHERE id IN (SELECT id FROM c) RETURNING id, priority"
    )
    params = [Status.QUEUED, *chain.from_iterable(covered.items()), Status.QUEUED]
    params += [*created_params, *requeued_params, now, now]
    with connection.cursor() as cursor:
        cursor.execute(walking_the_index(sql), params)
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
    sql = (f"UPDATE {TABLE} SET requeued_at = %s WHERE id IN (SELECT id FROM {TABLE} "
           f"WHERE {QUEUED_TRANSACTIONAL} "
           f"AND coalesce(requeued_at, created_at) < %s {LOCK_FREE_ROWS}) RETURNING id, priority")
    with connection.cursor() as cursor:
        cursor.execute(walking_the_index(sql), [now, Status.QUEUED, published_before])
        return [(row[0], row[1]) for row in cursor.fetchall()]
