"""A campaign's rows changed from outside the send path: a pause or cancel of its claimed and
unsent rows, the pages of QUEUED rows a re-publish walks, and a contact's unsent rows
suppressed. Each names the states it may move from, so it races safely with the send path."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from delivery.services.ledger.events import with_events
from delivery.services.ledger.sql import (
    ORDERED_INDEX_WALK,
    TABLE,
    UNSENT,
    Status,
    status_is,
    unsent_params,
    with_local_settings,
)
from eventlog.types import EventType

# The rows a pause or cancel takes, locked without waiting: a row a worker's multi-row claim,
# hand-off or release holds right now is skipped, never waited for. A pause or cancel that waited
# on it while holding the rows it had already locked deadlocked with that worker's statement
# waiting on one of those (seen in CI: the cancel API answered 503 during a busy campaign). A
# statement that never waits is in no cycle, whatever order either side locks in (as the
# sweeps: sql.LOCK_FREE_ROWS). Ends a `SELECT id ... WHERE ...` subquery.
_SKIP_BUSY_ROWS = f"FOR UPDATE OF {TABLE} SKIP LOCKED"


def campaign_unstarted_claims_set(*, campaign_id: int, status: str) -> int:
    """A campaign's claimed rows not yet handed to a provider -> QUEUED (pause) or CANCELLED.

    A worker holding the claim finds its token gone at the hand-off mark and skips them. A row
    the worker is writing at this moment is left to it: handed over, it is sent (the worker won
    the race, as if its mark had committed first); released, it is QUEUED, which a cancel's
    `campaign_unsent_cancel` loop then takes."""
    unstarted = "status = %s AND send_started_at IS NULL"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET status = %s, claim_token = '', claimed_at = NULL "
            f"WHERE id IN (SELECT id FROM {TABLE} WHERE campaign_id = %s AND {unstarted} "
            f"{_SKIP_BUSY_ROWS}) AND {unstarted}",
            [status, campaign_id, Status.SENDING, Status.SENDING],
        )
        return cursor.rowcount


def campaign_unsent_cancel(*, campaign_id: int, limit: int) -> int:
    """Up to `limit` of a campaign's unsent rows (queued, scheduled, claimed but not handed
    over) -> CANCELLED; callers repeat until `campaign_has_unsent` says none is left.

    Rows a worker is writing right now are skipped, not waited for (`_SKIP_BUSY_ROWS`): this
    returns 0 while some are still unsent, and the caller asks again once they are free. The
    outer WHERE says "unsent" again: a row whose hand-off mark committed after this statement's
    snapshot is re-checked against it, so a handed-over row is never marked CANCELLED while
    its provider call goes ahead."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET status = %s WHERE id IN (SELECT id FROM {TABLE} "
            f"WHERE campaign_id = %s AND {UNSENT} LIMIT %s {_SKIP_BUSY_ROWS}) AND {UNSENT}",
            [Status.CANCELLED, campaign_id, *unsent_params(), limit, *unsent_params()],
        )
        return cursor.rowcount


def campaign_has_unsent(*, campaign_id: int) -> bool:
    """Whether any of the campaign's rows is still unsent (skipped rows included)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE campaign_id = %s AND {UNSENT})",
                       [campaign_id, *unsent_params()])
        return bool(cursor.fetchone()[0])


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
    `campaign_id + 0` and `status_is` keep those two conditions out of any index; the
    planner settings leave the ordered walk of the `order` column's index as the only plan
    (4-7 ms a page of 5,000, measured on the same rows)."""
    if order not in _PAGE_ORDERS:
        raise ValueError(f"order must be one of {_PAGE_ORDERS}, not {order!r}")
    bounded = "" if upper is None else f" AND {order} <= %s"
    sql = (f"SELECT id, {order} FROM {TABLE} WHERE (campaign_id + 0) = %s AND {status_is()} "
           f"AND {order} > %s{bounded} ORDER BY {order} LIMIT %s")
    params = [campaign_id, Status.QUEUED, after, *([] if upper is None else [upper]), limit]
    with connection.cursor() as cursor:
        cursor.execute(with_local_settings(sql, ORDERED_INDEX_WALK), params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


def contact_campaign_messages_suppress(
    *, contact_id: int, error: str, statuses: Sequence[str] = (Status.QUEUED,)
) -> int:
    """Unsent campaign rows of a contact who unsubscribed (QUEUED) or is being deleted (QUEUED
    and SCHEDULED) -> SUPPRESSED (claimed ones are dropped by the send path's own check), each
    recording message.suppressed in the same statement (decision 115)."""
    change = (f"UPDATE {TABLE} SET status = %s, error = %s WHERE contact_id = %s "
              f"AND campaign_id IS NOT NULL AND status = ANY(%s)")
    with connection.cursor() as cursor:
        cursor.execute(with_events(change, "id", EventType.SUPPRESSED, alias=TABLE),
                       [Status.SUPPRESSED, error, contact_id, list(statuses)])
        return cursor.rowcount
