"""The SQL pieces every ledger statement shares: the message table, the status condition the
planner cannot answer from the status index, per-statement planner settings, the commit without
a WAL flush wait, and the claim's conditions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.conf import settings
from django.db import connection

from clients.key_types import KeyType
from delivery.models import EmailMessage

Status = EmailMessage.Status
TABLE = EmailMessage._meta.db_table


def message_is_test_sql(alias: str) -> str:
    """Whether the message row `alias` is a test key's (issue 27): its suppression check looks
    at the test key's suppressions only (audience.selectors.message_withheld_sql)."""
    return f"({alias}.key_type = '{KeyType.TEST.value}')"


# A sweep's candidate rows, locked in one order and never waited for: a row a worker's claim or
# hand-off holds right now is busy, not lost, and is skipped. A sweep that waited on it could
# deadlock with that worker's multi-row UPDATE (the 1M day: the re-publish after a broker restart
# against a P1 hand-off; the scheduler exited). Ends a `SELECT id ... WHERE ...` subquery.
LOCK_FREE_ROWS = f"ORDER BY id FOR UPDATE OF {TABLE} SKIP LOCKED"


def walking_the_index(sql: str) -> str:
    """Run this one autocommit sweep by a plain index scan, never a bitmap scan.

    The recovery sweeps look for the few live rows in a state (`status = 'SENDING'`), but until
    VACUUM passes, the status index still holds an entry for every row that was ever in it: a
    running campaign leaves one per sent row. A bitmap scan visits the heap for each of them on
    every sweep and never learns (1.03 s per sweep at 700,000 dead entries, measured); a plain
    index scan marks each dead entry as it meets it (LP_DEAD), so the next scan of any kind
    skips it (0.2 s once, then 5 ms). Decision 68.
    """
    return with_local_settings(sql, {"enable_bitmapscan": "OFF"})


# An ordered walk of one index that stops at its LIMIT, whatever the statistics say: no plan that
# reads every candidate and sorts, no parallel workers or JIT compiling (~0.5 s) that the
# statistics' false "a handful of rows, found only at the end of a full scan" would call for.
ORDERED_INDEX_WALK = {"enable_seqscan": "OFF", "enable_bitmapscan": "OFF", "enable_sort": "OFF",
                      "jit": "OFF", "max_parallel_workers_per_gather": "0"}


def with_local_settings(sql: str, planner: Mapping[str, str]) -> str:
    """Run this one autocommit statement with these planner settings (SET LOCAL ends with it)."""
    if connection.in_atomic_block:
        return sql  # SET LOCAL would outlive the statement; the plan only costs time
    return "".join(f"SET LOCAL {name} TO {value}; " for name, value in planner.items()) + sql


# Not yet handed to a provider: waiting (queued, scheduled) or claimed without the hand-off mark.
# Its parameters: `unsent_params()`.
UNSENT = "(status IN (%s, %s) OR (status = %s AND send_started_at IS NULL))"


def unsent_params() -> list[str]:
    return [Status.QUEUED, Status.SCHEDULED, Status.SENDING]


def placeholders(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))


def ids_in(column: str = "id") -> str:
    """`column` among a list of ids (placeholders: the list, its lowest, its highest; values from
    `ids_params`). The bounds are for a server-side prepared statement: its generic plan prunes
    the day partitions by a scalar bound, never by an array's `= ANY($1)` (decision 133)."""
    return f"{column} = ANY(%s) AND {column} BETWEEN %s AND %s"


def ids_params(ids: Sequence[int]) -> list[object]:
    """`ids_in`'s three values."""
    ids = list(ids)
    return [ids, min(ids), max(ids)]


def status_is(column: str = "status") -> str:
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


# A row this very task claimed and has not handed over (params: SENDING, token): Celery
# redelivers a task that died mid-batch under the same id.
MINE_NOT_HANDED_OVER = f"{status_is()} AND claim_token = %s AND send_started_at IS NULL"
# What a claim may take (params: QUEUED, SENDING, token).
QUEUED_OR_MINE = f"({status_is()} OR ({MINE_NOT_HANDED_OVER}))"
# Not handed over yet, or handed over by the very call that is running again (param: its instant;
# decision 82).
NOT_STARTED_OR_AT = "(send_started_at IS NULL OR send_started_at = %s)"
